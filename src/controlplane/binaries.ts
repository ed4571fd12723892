import { spawn, execFile } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";

/** Where kube-apiserver was built (and etcd, always at the pinned release). */
export interface Binaries {
  dir: string;
  kubeApiserver: string;
  etcd: string;
}

export interface Versions {
  kubernetes: string;
  etcd: string;
}

/** The repository root: the nearest folder above this module holding test/control-plane. */
export function repoRoot(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  while (!existsSync(join(dir, "test", "control-plane", "build.sh"))) {
    const parent = dirname(dir);
    if (parent === dir) throw new Error("test/control-plane/build.sh not found above " + import.meta.url);
    dir = parent;
  }
  return dir;
}

/** What test/control-plane/build.sh builds: the control plane, and the Go tools the tests run. */
export type ControlPlaneBinary = "kube-apiserver" | "kube-controller-manager" | "etcd" | "helm" | "promtool";

/** The Kubernetes release the control plane is pinned to (test/control-plane/K8S_VERSION). */
export function pinnedVersion(): string {
  return readFileSync(join(repoRoot(), "test", "control-plane", "K8S_VERSION"), "utf8").trim();
}

/**
 * The older release the integration tests also run kube-apiserver at (test/control-plane/skew/, built
 * by `build.sh --skew`): one minor before the pinned one, the skew a control-plane upgrade passes through.
 */
export function skewVersion(): string {
  return readFileSync(join(repoRoot(), "test", "control-plane", "skew", "K8S_VERSION"), "utf8").trim();
}

/**
 * Builds the named binaries from the Go module proxy if the cache does not hold them yet
 * (test/control-plane/build.sh; minutes cold, well under a second warm) and returns their directory.
 * `onProgress` receives the build's progress lines (packages compiled of total, an estimate) so a
 * caller can show them instead of going silent. `skew`: kube-apiserver at skewVersion() instead.
 */
export async function buildControlPlane(
  names: readonly ControlPlaneBinary[],
  onProgress: (line: string) => void = () => {},
  { skew = false }: { skew?: boolean } = {},
): Promise<string> {
  const script = join(repoRoot(), "test", "control-plane", "build.sh");
  const child = spawn(script, skew ? ["--skew", ...names] : names, { stdio: ["ignore", "pipe", "pipe"] });
  const lines: string[] = [];
  createInterface({ input: child.stderr }).on("line", (line) => {
    lines.push(line);
    onProgress(line);
  });
  let stdout = "";
  child.stdout.on("data", (chunk: Buffer) => (stdout += chunk.toString()));
  const code = await new Promise<number | null>((done) => child.once("close", done));
  if (code !== 0) {
    throw new Error(`${script} failed (exit ${String(code)}):\n${lines.slice(-40).join("\n")}`);
  }
  return resolve(stdout.trim().split("\n").at(-1) ?? "");
}

/**
 * kube-apiserver and etcd, what a control plane needs (kube-controller-manager only on demand).
 * KVC_APISERVER_VERSION picks the apiserver: unset or the pinned release, that one; the skew release
 * (skewVersion()), that one beside the pinned etcd. Any other value fails: no build exists for it.
 */
export async function ensureBinaries(
  onProgress?: (line: string) => void,
  env: NodeJS.ProcessEnv = process.env,
): Promise<Binaries> {
  const wanted = env.KVC_APISERVER_VERSION;
  if (wanted === undefined || wanted === "" || wanted === pinnedVersion()) {
    const dir = await buildControlPlane(["kube-apiserver", "etcd"], onProgress);
    return { dir, kubeApiserver: join(dir, "kube-apiserver"), etcd: join(dir, "etcd") };
  }
  if (wanted !== skewVersion()) {
    throw new Error(
      `KVC_APISERVER_VERSION=${wanted}: kube-apiserver is built at ${pinnedVersion()} ` +
        `(test/control-plane/K8S_VERSION) or ${skewVersion()} (test/control-plane/skew/K8S_VERSION) only`,
    );
  }
  const etcdDir = await buildControlPlane(["etcd"], onProgress);
  const dir = await buildControlPlane(["kube-apiserver"], onProgress, { skew: true });
  return { dir, kubeApiserver: join(dir, "kube-apiserver"), etcd: join(etcdDir, "etcd") };
}

/** The versions the binaries report about themselves. */
export async function binaryVersions(bin: Binaries): Promise<Versions> {
  const run = promisify(execFile);
  const [apiserver, etcd] = await Promise.all([
    run(bin.kubeApiserver, ["--version"]),
    run(bin.etcd, ["--version"]),
  ]);
  return {
    kubernetes: apiserver.stdout.trim().replace(/^Kubernetes\s+/, ""),
    etcd: /etcd Version:\s*(\S+)/.exec(etcd.stdout)?.[1] ?? etcd.stdout.trim(),
  };
}
