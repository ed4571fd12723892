/** What the benchmarks share: bounded concurrency (p-queue), RSS, and kvc run compiled as the image runs it. */
import { spawn } from "node:child_process";
import { once } from "node:events";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import PQueue from "p-queue";
import { probe } from "../src/controlplane/https-probe.js";
import { freePort } from "../src/controlplane/ports.js";
import { waitFor } from "../src/util/wait.js";

/** Runs `fn` over `items` with at most `concurrency` in flight; rejects with the first failure. */
export async function pool<T>(
  items: readonly T[],
  concurrency: number,
  fn: (item: T) => Promise<unknown>,
): Promise<void> {
  await new PQueue({ concurrency }).addAll(items.map((item) => () => fn(item)));
}

/** Resident set size of a process, MiB. */
export function rssMiB(pid: number): number {
  const kb = /VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))?.[1];
  return Number(kb) / 1024;
}

export interface StartedController {
  pid: number;
  stop(): Promise<void>;
}

const cli = fileURLToPath(new URL("../dist/src/cli.js", import.meta.url));

/** `kvc run` from dist/ (`npm run build`), as in the image; resolves once /readyz passes. */
export async function startCompiledKvc(
  kubeconfig: string,
  args: readonly string[],
): Promise<StartedController> {
  const port = await freePort();
  const child = spawn(
    process.execPath,
    [
      cli,
      "run",
      `--kubeconfig=${kubeconfig}`,
      "--leader-elect=false",
      "--bind-address=127.0.0.1",
      `--secure-port=${port}`,
      ...args,
    ],
    { stdio: "ignore" },
  );
  const exited = once(child, "exit");
  await waitFor(async () => (await probe(`http://127.0.0.1:${port}/readyz`)).status === 200, {
    timeoutMs: 10 * 60_000,
    what: "kvc to be ready",
  });
  return {
    pid: child.pid!,
    stop: async () => {
      child.kill("SIGTERM");
      await exited;
    },
  };
}
