import { spawn, type ChildProcess } from "node:child_process";
import { once } from "node:events";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { KubeConfig } from "@kubernetes/client-node";
import { probe } from "../../src/controlplane/https-probe.js";
import { freePort } from "../../src/controlplane/ports.js";
import { abortedWhen, waitFor } from "../../src/util/wait.js";
import type { TestSeams } from "../../src/persistentvolume/crash-seam.js";
import { imageEntrypoint } from "./image.js";

const root = fileURLToPath(new URL("../..", import.meta.url));
const cli = join(root, "src/app/cli.ts");
const withSeams = join(root, "test/support/kvc-seams.ts");

export interface StartKvcOptions {
  /**
   * Run the compiled dist/ (`npm run build` first) with the image's Node options, as the image's
   * ENTRYPOINT does, instead of the sources through tsx.
   */
  compiled?: boolean;
  /** Start it through test/support/kvc-seams.ts with these test seams (sources only). */
  seams?: TestSeams;
}

export interface KvcProcess {
  child: ChildProcess;
  port: number;
  exited: Promise<[number | null, string | null]>;
  logs(): string;
  url(path: string): string;
  /** GETs `path` on the serving port with `token` (default: the kubeconfig's, an admin's). */
  get(path: string, token?: string): Promise<{ status: number; body: string }>;
  /** Resolves once /readyz passes (informers synced). */
  ready(timeoutMs?: number): Promise<void>;
}

const running = new Set<ChildProcess>();

/** The binder as upstream's integration tests run it: 1 s sync period, hostPath provisioning, no client limit. */
export const BINDER_FLAGS = [
  "--leader-elect=false",
  "--pvclaimbinder-sync-period=1s",
  "--enable-hostpath-provisioner",
  "--kube-api-qps=-1",
];

/**
 * `kvc run` as a separate process, as production runs it, serving HTTPS on a free loopback port with
 * the kubeconfig also used for delegated authentication and authorization.
 */
export async function startKvc(
  kubeconfig: string,
  args: readonly string[] = [],
  env: Record<string, string> = {},
  opts: StartKvcOptions = {},
): Promise<KvcProcess> {
  const port = await freePort();
  const [, ...image] = imageEntrypoint();
  const script = opts.compiled
    ? [...image.slice(0, -1), join(root, image.at(-1) ?? "")]
    : opts.seams
      ? ["--import", "tsx", withSeams, JSON.stringify(opts.seams)]
      : ["--import", "tsx", cli];
  const child = spawn(
    process.execPath,
    [
      ...script,
      "run",
      `--kubeconfig=${kubeconfig}`,
      "--bind-address=127.0.0.1",
      `--secure-port=${port}`,
      `--authentication-kubeconfig=${kubeconfig}`,
      `--authorization-kubeconfig=${kubeconfig}`,
      ...args,
    ],
    { stdio: ["ignore", "ignore", "pipe"], env: { ...process.env, ...env } },
  );
  running.add(child);
  let logs = "";
  child.stderr.on("data", (c: Buffer) => (logs += c.toString()));
  const exited = once(child, "exit") as Promise<[number | null, string | null]>;
  void exited.then(() => running.delete(child));
  const died = abortedWhen(exited, (r) => new Error(`kvc exited with code ${String(r?.[0])}:\n${logs}`));
  const url = (path: string) => `https://127.0.0.1:${port}${path}`;
  const adminToken = kubeconfigToken(kubeconfig);
  return {
    child,
    port,
    exited,
    logs: () => logs,
    url,
    get: (path, token = adminToken) => probe(url(path), token ? { token } : {}),
    ready: async (timeoutMs = 60_000) => {
      await waitFor(async () => (await probe(url("/readyz"))).status === 200, {
        timeoutMs,
        what: "kvc /readyz to pass",
        signal: died,
      });
    },
  };
}

/** The bearer token of the kubeconfig's first user, if it has one (the local control plane's admin). */
function kubeconfigToken(kubeconfig: string): string | undefined {
  const kc = new KubeConfig();
  kc.loadFromFile(kubeconfig);
  return kc.getCurrentUser()?.token;
}

/** SIGKILLs every kvc process still running (for after() hooks). */
export function killAllKvc(): void {
  for (const c of running) c.kill("SIGKILL");
}
