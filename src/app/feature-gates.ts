import { parseGoBool } from "./flag-types.js";
import { KCM_FEATURE_GATES } from "./kcm-feature-gates.js";

/**
 * --feature-gates as kube-controller-manager takes it (component-base's featuregate.Set, at the
 * pinned release): `[kube:]Name=bool` pairs, comma separated, the flag repeatable. What KCM refuses
 * to start with is refused here in its words: a gate it does not know, a value that is not a Go bool,
 * a locked gate set against its lock. KCM's check of gate dependencies is not repeated.
 */
export interface FeatureGates {
  /** Whether the gate is on: set, else from AllAlpha/AllBeta for its stage, else its default. */
  enabled(name: VolumeLoopGate): boolean;
  /** Gates set on the command line that change none of kvc's loops (named in a startup warning). */
  withoutEffect: string[];
  /** KCM's own warnings for setting a GA or deprecated gate. */
  warnings: string[];
}

/** The gates the volume loops read at v1.37 (upstream's pkg/controller/volume). */
export const VOLUME_LOOP_GATES = ["PersistentVolumeClaimUnusedSinceTime"] as const;
export type VolumeLoopGate = (typeof VOLUME_LOOP_GATES)[number];

const BY_NAME = new Map(KCM_FEATURE_GATES.map((g) => [g.name, g]));

/** The flag's comma-split items (repeats concatenated, later ones winning), as FeatureGates. */
export function parseFeatureGates(items: readonly string[]): FeatureGates {
  const set = new Map<string, boolean>();
  const prefixes = new Set<string>();
  for (const item of items) {
    const [key, value] = splitOnce(item.trim(), "=");
    // The component registry's prefix, "kube" when left out; KCM registers no other.
    const [component, name] = key.includes(":") ? splitOnce(key, ":") : ["", key];
    if (component !== "" && component !== "kube") throw new Error(`component not registered: ${component}`);
    prefixes.add(component);
    if (prefixes.size > 1) {
      throw new Error(
        "set kube feature gates with default empty prefix or kube: prefix consistently, do not mix use",
      );
    }
    const k = (name ?? "").trim();
    if (value === undefined) throw new Error(`missing bool value for ${k}`);
    const v = parseGoBool(value.trim());
    if (v === undefined) {
      throw new Error(
        `invalid value of ${k}=${value.trim()}, err: strconv.ParseBool: parsing "${value.trim()}": invalid syntax`,
      );
    }
    set.set(k, v);
  }
  const warnings: string[] = [];
  for (const [name, value] of set) {
    const gate = BY_NAME.get(name);
    if (!gate) throw new Error(`unrecognized feature gate: ${name}`);
    if (gate.lockToDefault && gate.default !== value) {
      throw new Error(`cannot set feature gate ${name} to ${value}, feature is locked to ${gate.default}`);
    }
    if (gate.stage === "GA" || gate.stage === "DEPRECATED") {
      const stage = gate.stage === "GA" ? "GA" : "deprecated";
      warnings.push(`setting ${stage} feature gate ${name}=${value}: it will be removed in a future release`);
    }
  }
  const all = { ALPHA: set.get("AllAlpha"), BETA: set.get("AllBeta") };
  const loopGates: ReadonlySet<string> = new Set([...VOLUME_LOOP_GATES, "AllAlpha", "AllBeta"]);
  return {
    enabled(name) {
      const gate = BY_NAME.get(name);
      if (!gate)
        throw new Error(`kcm-feature-gates.ts has no gate ${name}: regenerate it (npm run kcm:flags)`);
      const bulk = gate.stage === "ALPHA" || gate.stage === "BETA" ? all[gate.stage] : undefined;
      return set.get(name) ?? (gate.lockToDefault ? undefined : bulk) ?? gate.default;
    },
    withoutEffect: [...set.keys()].filter((name) => !loopGates.has(name)),
    warnings,
  };
}

function splitOnce(s: string, separator: string): [string, string | undefined] {
  const i = s.indexOf(separator);
  return i < 0 ? [s, undefined] : [s.slice(0, i), s.slice(i + 1)];
}
