import { KCM_CONTROLLERS } from "./kcm-flags.js";

/**
 * The kube-controller-manager loops this project replaces, by upstream's names and aliases, so that
 * `--controllers` reads exactly as KCM's, and the name of each one's API client (KCM's
 * ControllerContext.NewClient): its own rate limiter, and the end of its User-Agent.
 */
export const CONTROLLERS = [
  {
    name: "persistentvolume-binder-controller",
    aliases: ["persistentvolume-binder"],
    client: "persistent-volume-binder",
  },
  {
    name: "persistentvolume-attach-detach-controller",
    aliases: ["attachdetach"],
    client: "attachdetach-controller",
  },
  {
    name: "persistentvolumeclaim-protection-controller",
    aliases: ["pvc-protection"],
    client: "pvc-protection-controller",
  },
  {
    name: "persistentvolume-protection-controller",
    aliases: ["pv-protection"],
    client: "pv-protection-controller",
  },
] as const;

export type ControllerName = (typeof CONTROLLERS)[number]["name"];

const canonical = new Map<string, ControllerName>(
  CONTROLLERS.flatMap((c) => [c.name, ...c.aliases].map((n) => [n, c.name] as const)),
);

/**
 * Resolves a KCM-style `--controllers` list: `*` enables every controller (all of ours are on by
 * default in KCM), `name` enables one, `-name` disables one; the first entry naming a controller
 * wins, as in KCM's IsControllerEnabled. KCM's other controllers (and aliases) are accepted and left
 * to KCM, so that KCM's own `--controllers` value works; a name KCM does not know is an error.
 */
export function enabledControllers(list: readonly string[]): Set<ControllerName> {
  const decided = new Map<ControllerName, boolean>();
  let star = false;
  for (const raw of list) {
    const entry = raw.trim();
    if (entry === "*") {
      star = true;
      continue;
    }
    const disable = entry.startsWith("-");
    const bare = disable ? entry.slice(1) : entry;
    const name = canonical.get(bare);
    if (!name && KCM_CONTROLLERS.includes(bare)) continue;
    if (!name) {
      const known = CONTROLLERS.map((c) => c.name).join(", ");
      throw new Error(
        `"${entry}" is not in the list of known controllers (kvc's: ${known}; or another of kube-controller-manager's, or *)`,
      );
    }
    if (!decided.has(name)) decided.set(name, !disable);
  }
  return new Set(CONTROLLERS.map((c) => c.name).filter((n) => decided.get(n) ?? star));
}

/**
 * The warning for a `--controllers` value that turns off all four loops: most likely KCM's own
 * cut-over line (`*,…,-persistentvolume-binder-controller,…`, which turns them off in KCM) pasted into
 * kvc's flags, leaving the cluster with no volume loop at all. Undefined when any loop runs.
 */
export function noLoopsWarning(enabled: ReadonlySet<ControllerName>): string | undefined {
  if (enabled.size > 0) return undefined;
  return (
    "--controllers turns off all four volume loops: nothing binds, provisions, reclaims, attaches or " +
    "detaches volumes, and no protection finalizer is removed. If this is kube-controller-manager's " +
    "--controllers line (which turns them off in KCM), give kvc its own: --controllers=* (docs/operations.md)"
  );
}
