import { spawn, execFile } from "node:child_process";
import { existsSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";

/** Where kube-apiserver and etcd were built. */
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
export type ControlPlaneBinary = "kube-apiserver" | "kube-controller-manager" | "etcd" | "promtool";

/**
 * Builds the named binaries from the Go module proxy if the cache does not hold them yet
 * (test/control-plane/build.sh; minutes cold, well under a second warm) and returns their directory.
 * `onProgress` receives the build's progress lines (packages compiled of total, an estimate) so a
 * caller can show them instead of going silent.
 */
export async function buildControlPlane(
  names: readonly ControlPlaneBinary[],
  onProgress: (line: string) => void = () => {},
): Promise<string> {
  const script = join(repoRoot(), "test", "control-plane", "build.sh");
  const child = spawn(script, names, { stdio: ["ignore", "pipe", "pipe"] });
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

/** kube-apiserver and etcd, what a control plane needs (kube-controller-manager only on demand). */
export async function ensureBinaries(onProgress?: (line: string) => void): Promise<Binaries> {
  const dir = await buildControlPlane(["kube-apiserver", "etcd"], onProgress);
  return { dir, kubeApiserver: join(dir, "kube-apiserver"), etcd: join(dir, "etcd") };
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
