import { appendFileSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { probe } from "../../src/controlplane/https-probe.js";
import type { LocalControlPlane } from "../../src/controlplane/local-control-plane.js";
import { waitFor } from "../../src/util/wait.js";
import { startKvc, type KvcProcess } from "../support/kvc-process.js";
import type { PartitionKind } from "../support/tcp-proxy.js";
import type { TcpProxyThread } from "../support/tcp-proxy-thread.js";

/*
 * The kvc replicas as a Deployment runs them (a replica that exits is started again), each behind its
 * own TCP proxy to the apiserver, and the faults the run injects into them and the control plane.
 */

export const FAULT_KINDS = [
  "kill",
  "kill-in-bind",
  "kill-in-attach",
  "sigstop",
  "apiserver",
  "etcd",
  "partition",
  "watchcut",
] as const;
export type FaultKind = (typeof FAULT_KINDS)[number];

export class Replica {
  process: KvcProcess | undefined;
  restarts = 0;
  #stopping = false;

  constructor(
    readonly name: string,
    readonly proxy: TcpProxyThread,
    readonly kubeconfig: string,
    readonly args: readonly string[],
    /** Each process's log is written here (`<name>.log`, appended) once it exits. */
    readonly logDir: string,
  ) {}

  /** Starts kvc, and again each time it exits until stop(). */
  async start(): Promise<void> {
    const p = await startKvc(
      this.kubeconfig,
      [`--master=https://127.0.0.1:${this.proxy.port}`, ...this.args],
      {},
      {
        compiled: true,
      },
    );
    this.process = p;
    void p.exited.then(([code, signal]) => {
      appendFileSync(
        join(this.logDir, `${this.name}.log`),
        `${p.logs()}--- exited: code ${String(code)}, signal ${String(signal)} at ${new Date().toISOString()}\n`,
      );
      if (this.#stopping) return;
      this.restarts++;
      void this.start();
    });
  }

  /** The identity it leads with, once it has led (kvc logs it on "started leading"). */
  identity(): string | undefined {
    return /"identity":"([^"]+)","lease"/.exec(this.process?.logs() ?? "")?.[1];
  }

  async stop(): Promise<void> {
    this.#stopping = true;
    const p = this.process;
    if (!p) return;
    p.child.kill("SIGCONT");
    p.child.kill("SIGTERM");
    await p.exited;
  }
}

export interface FaultContext {
  cp: LocalControlPlane;
  replicas: readonly Replica[];
  /** The Lease's current holder. */
  holder(): string | undefined;
  leaseDurationMs: number;
  random: () => number;
  /**
   * For the targeted kills: resolves with the half-done state of a bind or an attach once the watches
   * show one, or undefined once `deadline` aborts (the kill then lands wherever the work is).
   */
  halfDone(kind: "bind" | "attach", deadline: AbortSignal): Promise<string | undefined>;
  /** Aborts when the round's workload is over. */
  deadline: AbortSignal;
}

/** The fault as injected; `leader` is the identity the fault hit, when it hit the leader. */
export interface InjectedFault {
  kind: FaultKind;
  detail: string;
  at: number;
  leader?: string;
  /** For a targeted kill: the half-done state it landed in (absent: none was seen, a plain kill). */
  inside?: string;
}

/** The faults that kill the leader (its writes after `at` are not the new leader's). */
export function killsLeader(kind: FaultKind): boolean {
  return kind === "kill" || kind === "kill-in-bind" || kind === "kill-in-attach" || kind === "sigstop";
}

/** Injects one fault and returns once it is over (the process resumed, the path healed, …). */
export async function inject(kind: FaultKind, ctx: FaultContext): Promise<InjectedFault> {
  const inside =
    kind === "kill-in-bind" || kind === "kill-in-attach"
      ? await ctx.halfDone(kind === "kill-in-bind" ? "bind" : "attach", ctx.deadline)
      : undefined;
  const leaderIdentity = ctx.holder();
  const leader = ctx.replicas.find((r) => leaderIdentity && r.identity() === leaderIdentity);
  const at = Date.now();
  const outlast = () =>
    // Longer than the lease: the others take over meanwhile. A bounded fault duration, not a sync.
    new Promise((resolve) => setTimeout(resolve, ctx.leaseDurationMs * 1.5));
  switch (kind) {
    case "kill":
      leader?.process?.child.kill("SIGKILL");
      return { kind, detail: `SIGKILL ${leader?.name ?? "(no leader)"}`, at, ...leaderOf(leaderIdentity) };
    case "kill-in-bind":
    case "kill-in-attach":
      leader?.process?.child.kill("SIGKILL");
      return {
        kind,
        detail: `SIGKILL ${leader?.name ?? "(no leader)"} ${inside ? `inside: ${inside}` : `(no ${kind === "kill-in-bind" ? "bind half done" : "attach in flight"} seen in the round: a plain kill)`}`,
        at,
        ...leaderOf(leaderIdentity),
        ...(inside ? { inside } : {}),
      };
    case "sigstop": {
      const p = leader?.process;
      p?.child.kill("SIGSTOP");
      await outlast();
      p?.child.kill("SIGCONT");
      return {
        kind,
        detail: `SIGSTOP/SIGCONT ${leader?.name ?? "(no leader)"}`,
        at,
        ...leaderOf(leaderIdentity),
      };
    }
    case "apiserver":
      await ctx.cp.restartApiServer();
      return { kind, detail: "kube-apiserver restart", at };
    case "etcd":
      await ctx.cp.restartEtcd();
      // The apiserver serves again once it reconnected to etcd.
      await waitFor(async () => (await fetchOk(ctx)) || undefined, {
        timeoutMs: 120_000,
        what: "the apiserver to serve after the etcd restart",
      });
      return { kind, detail: "etcd restart", at };
    case "partition": {
      const partition: PartitionKind = (["drop", "stall", "half-open"] as const)[
        Math.floor(ctx.random() * 3)
      ]!;
      const target = leader ?? ctx.replicas[0]!;
      await target.proxy.partition(partition);
      await outlast();
      await target.proxy.heal();
      return { kind, detail: `${partition} partition of ${target.name}`, at, ...leaderOf(leaderIdentity) };
    }
    case "watchcut": {
      await compactEtcd(ctx.cp);
      await Promise.all(ctx.replicas.map((r) => r.proxy.cut()));
      return {
        kind,
        detail: "etcd compacted, every replica's connections cut (watches relist: 410 Gone)",
        at,
      };
    }
  }
}

function leaderOf(identity: string | undefined): { leader?: string } {
  return identity ? { leader: identity } : {};
}

async function fetchOk(ctx: FaultContext): Promise<boolean> {
  const res = await probe(`${ctx.cp.server}/readyz`, {
    ca: readFileSync(ctx.cp.caFile, "utf8"),
    token: ctx.cp.token,
  });
  return res.status === 200;
}

/** Compacts etcd at its current revision: a watch resumed from an older resourceVersion gets 410 Gone. */
async function compactEtcd(cp: LocalControlPlane): Promise<void> {
  const url = `http://127.0.0.1:${cp.etcdPort}/v3/kv`;
  const range = (await (
    await fetch(`${url}/range`, {
      method: "POST",
      body: JSON.stringify({ key: Buffer.from("/").toString("base64") }),
    })
  ).json()) as { header: { revision: string } };
  await fetch(`${url}/compaction`, {
    method: "POST",
    body: JSON.stringify({ revision: range.header.revision }),
  });
}
