import { appendFileSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { probe } from "../../src/controlplane/https-probe.js";
import type { LocalControlPlane } from "../../src/controlplane/local-control-plane.js";
import { waitFor } from "../../src/util/wait.js";
import { startKvc, type KvcProcess } from "../support/kvc-process.js";
import type { LeaseState } from "./recorder.js";
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
  /** The Lease as the apiserver has it now. */
  lease(): Promise<LeaseState | undefined>;
  leaseDurationMs: number;
  random: () => number;
  /**
   * For the targeted kills: resolves with the half-done state of a bind or an attach once the watches
   * show one, or undefined once `deadline` aborts.
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
  /** For a targeted kill: the half-done state it landed in. */
  inside?: string;
  /**
   * Whether it hit what it was aimed at, shown by the target itself: the live leader's process died
   * of the kill or stayed stopped, the leader's connections were partitioned, the apiserver or etcd
   * is a process started after the fault, the compaction applied and the leader's connections were
   * cut. `missed` says why not.
   */
  landed: boolean;
  missed?: string;
}

/** The faults that kill the leader (its writes after `at` are not the new leader's). */
export function killsLeader(kind: FaultKind): boolean {
  return kind === "kill" || kind === "kill-in-bind" || kind === "kill-in-attach" || kind === "sigstop";
}

/** The faults aimed at the leader: they wait for a live one first. */
function aimsAtLeader(kind: FaultKind): boolean {
  return killsLeader(kind) || kind === "partition" || kind === "watchcut";
}

/** How long a fault aimed at the leader waits for one (replicas restart, take over, in seconds). */
const LEADER_WAIT_MS = 60_000;

/** The replica whose live process the Lease names and has renewed within its duration, or why none. */
export async function liveLeader(
  ctx: Pick<FaultContext, "lease" | "replicas">,
): Promise<{ replica: Replica; process: KvcProcess; identity: string } | string> {
  const l = await ctx.lease().catch(() => undefined);
  if (!l) return "no Lease holder could be read";
  const age = Date.now() - l.renewedAt;
  if (age > l.durationMs) return `the Lease of ${l.holder} was last renewed ${age} ms ago`;
  const replica = ctx.replicas.find((r) => r.identity() === l.holder);
  const p = replica?.process;
  if (!replica || !p) return `the Lease names ${l.holder}, the identity of no running replica process`;
  if (p.child.exitCode !== null || p.child.signalCode !== null)
    return `the Lease names ${l.holder}, whose process has exited`;
  return { replica, process: p, identity: l.holder };
}

/** Injects one fault and returns once it is over (the process resumed, the path healed, …). */
export async function inject(kind: FaultKind, ctx: FaultContext): Promise<InjectedFault> {
  const targeted = kind === "kill-in-bind" || kind === "kill-in-attach";
  const inside = targeted
    ? await ctx.halfDone(kind === "kill-in-bind" ? "bind" : "attach", ctx.deadline)
    : undefined;
  if (targeted && inside === undefined) {
    const missed = `no ${kind === "kill-in-bind" ? "bind half done" : "attach in flight"} seen in the round`;
    return { kind, detail: `no kill: ${missed}`, at: Date.now(), landed: false, missed };
  }
  // A targeted kill takes the leader of the moment (waiting would leave the half-done state); the
  // others wait for a live one: the Lease may still name a replica that was just killed.
  let found = aimsAtLeader(kind) ? await liveLeader(ctx) : "not aimed at the leader";
  if (typeof found === "string" && aimsAtLeader(kind) && !targeted) {
    await waitFor(async () => typeof (found = await liveLeader(ctx)) !== "string", {
      timeoutMs: LEADER_WAIT_MS,
      intervalMs: 100,
      what: "a live leader",
    }).catch(() => {});
  }
  const at = Date.now();
  if (aimsAtLeader(kind) && typeof found === "string") {
    return { kind, detail: `no ${kind}: ${found}`, at, landed: false, missed: found };
  }
  const leader = typeof found === "string" ? undefined : found;
  const leaderId = leader ? { leader: leader.identity } : {};
  const outlast = () =>
    // Longer than the lease: the others take over meanwhile. A bounded fault duration, not a sync.
    new Promise((resolve) => setTimeout(resolve, ctx.leaseDurationMs * 1.5));
  switch (kind) {
    case "kill":
    case "kill-in-bind":
    case "kill-in-attach": {
      const p = leader!.process;
      p.child.kill("SIGKILL");
      const signal = await Promise.race([
        p.exited.then(([, sig]) => sig ?? "an exit of its own"),
        sleep(10_000, undefined, { ref: false }),
      ]);
      const landed = signal === "SIGKILL";
      return {
        kind,
        detail: `SIGKILL ${leader!.replica.name}${inside ? ` inside: ${inside}` : ""}`,
        at,
        ...leaderId,
        ...(inside ? { inside } : {}),
        landed,
        ...(landed
          ? {}
          : {
              missed: `the leader's process ${signal ? `ended by ${signal}` : "was alive 10 s"} after the kill`,
            }),
      };
    }
    case "sigstop": {
      const p = leader!.process;
      p.child.kill("SIGSTOP");
      // The kernel's word that it is stopped (state T), at the start of the pause and at its end.
      const stoppedAtStart = await waitFor(() => processState(p.child.pid) === "T", {
        timeoutMs: 1000,
        intervalMs: 10,
        what: "the leader to stop",
      }).catch(() => false);
      await outlast();
      const stoppedAtEnd = processState(p.child.pid) === "T";
      p.child.kill("SIGCONT");
      const landed = stoppedAtStart && stoppedAtEnd;
      return {
        kind,
        detail: `SIGSTOP/SIGCONT ${leader!.replica.name}`,
        at,
        ...leaderId,
        landed,
        ...(landed ? {} : { missed: `the leader's process was not stopped for the whole pause` }),
      };
    }
    case "apiserver": {
      const before = await startTime(apiserverMetrics(ctx.cp));
      await ctx.cp.restartApiServer();
      const after = await startTime(apiserverMetrics(ctx.cp));
      return { kind, detail: "kube-apiserver restart", at, ...restarted("kube-apiserver", before, after) };
    }
    case "etcd": {
      const before = await startTime(etcdMetrics(ctx.cp));
      await ctx.cp.restartEtcd();
      // The apiserver serves again once it reconnected to etcd.
      await waitFor(async () => (await fetchOk(ctx)) || undefined, {
        timeoutMs: 120_000,
        what: "the apiserver to serve after the etcd restart",
      });
      const after = await startTime(etcdMetrics(ctx.cp));
      return { kind, detail: "etcd restart", at, ...restarted("etcd", before, after) };
    }
    case "partition": {
      const partition: PartitionKind = (["drop", "stall", "half-open"] as const)[
        Math.floor(ctx.random() * 3)
      ]!;
      const target = leader!.replica;
      const cutOff = await target.proxy.partition(partition);
      await outlast();
      await target.proxy.heal();
      return {
        kind,
        detail: `${partition} partition of ${target.name} (${cutOff} connections)`,
        at,
        ...leaderId,
        landed: cutOff > 0,
        ...(cutOff > 0 ? {} : { missed: `the leader ${target.name} had no connection to partition` }),
      };
    }
    case "watchcut": {
      const compacted = await compactEtcd(ctx.cp);
      const cut = await Promise.all(ctx.replicas.map((r) => r.proxy.cut()));
      const leaderCut = cut[ctx.replicas.indexOf(leader!.replica)] ?? 0;
      const missed =
        compacted !== undefined
          ? `etcd refused the compaction: ${compacted}`
          : leaderCut === 0
            ? `the leader ${leader!.replica.name} had no connection to cut`
            : undefined;
      return {
        kind,
        detail: `etcd compacted, every replica's connections cut (${cut.join(" + ")}; watches relist: 410 Gone)`,
        at,
        ...leaderId,
        landed: missed === undefined,
        ...(missed ? { missed } : {}),
      };
    }
  }
}

/** A process's state letter from /proc (R, S, T for stopped, …), or undefined once it is gone. */
function processState(pid: number | undefined): string | undefined {
  try {
    // The state follows the command name, which is in parentheses and may hold spaces.
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2).split(" ")[0];
  } catch {
    return undefined;
  }
}

/** Landed when the process answering after the restart started after the one answering before. */
function restarted(
  what: string,
  before: number | undefined,
  after: number | undefined,
): { landed: boolean; missed?: string } {
  if (before !== undefined && after !== undefined && after > before) return { landed: true };
  return {
    landed: false,
    missed: `${what}'s process_start_time_seconds went from ${before ?? "?"} to ${after ?? "?"}`,
  };
}

function apiserverMetrics(cp: LocalControlPlane): () => Promise<{ status: number; body: string }> {
  const ca = readFileSync(cp.caFile, "utf8");
  return () => probe(`${cp.server}/metrics`, { ca, token: cp.token, timeoutMs: 30_000 });
}

function etcdMetrics(cp: LocalControlPlane): () => Promise<{ status: number; body: string }> {
  return () => probe(`http://127.0.0.1:${cp.etcdPort}/metrics`, { timeoutMs: 30_000 });
}

/** A process's start (epoch seconds) from its Prometheus metrics, or undefined when not answered. */
async function startTime(get: () => Promise<{ status: number; body: string }>): Promise<number | undefined> {
  const res = await get().catch(() => undefined);
  const m = res?.status === 200 ? /^process_start_time_seconds (\S+)$/m.exec(res.body) : null;
  return m ? Number(m[1]) : undefined;
}

async function fetchOk(ctx: FaultContext): Promise<boolean> {
  const res = await probe(`${ctx.cp.server}/readyz`, {
    ca: readFileSync(ctx.cp.caFile, "utf8"),
    token: ctx.cp.token,
  });
  return res.status === 200;
}

/**
 * Compacts etcd at its current revision: a watch resumed from an older resourceVersion gets 410
 * Gone. Undefined once applied, else etcd's answer.
 */
async function compactEtcd(cp: LocalControlPlane): Promise<string | undefined> {
  const url = `http://127.0.0.1:${cp.etcdPort}/v3/kv`;
  const range = (await (
    await fetch(`${url}/range`, {
      method: "POST",
      body: JSON.stringify({ key: Buffer.from("/").toString("base64") }),
    })
  ).json()) as { header: { revision: string } };
  const res = await fetch(`${url}/compaction`, {
    method: "POST",
    body: JSON.stringify({ revision: range.header.revision }),
  });
  return res.ok ? undefined : `HTTP ${res.status}: ${await res.text()}`;
}
