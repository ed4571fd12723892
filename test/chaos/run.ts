import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { monitorEventLoopDelay } from "node:perf_hooks";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import yargs from "yargs";
import { hideBin } from "yargs/helpers";
import { LocalControlPlane } from "../../src/controlplane/local-control-plane.js";
import { startExternalAttacher } from "../../src/dev/external-attacher.js";
import { silentLogger } from "../../src/runtime/logger.js";
import { realClock } from "../../src/runtime/clock.js";
import { until, waitFor } from "../../src/util/wait.js";
import { readAuditLog, type AuditEvent } from "../support/audit.js";
import { killAllKvc } from "../support/kvc-process.js";
import { mulberry32 } from "../support/random.js";
import { TcpProxyThread } from "../support/tcp-proxy-thread.js";
import { FAULT_KINDS, inject, killsLeader, Replica, type FaultKind, type InjectedFault } from "./faults.js";
import { halfDone } from "./half-done.js";
import { isLeaderElectionWrite, replicaOf } from "./history.js";
import {
  checkHistory,
  checkObservations,
  checkSettled,
  SettleWindow,
  settledState,
  type Violation,
} from "./invariants.js";
import { Recorder } from "./recorder.js";
import { CSI_DRIVER, runExternalProvisioner, runKubelets } from "./stand-ins.js";
import { NAMESPACE, storageClasses, Workload } from "./workload.js";

/*
 * `npm run chaos`: two kvc replicas (compiled dist/, leader election) on the real control plane under
 * a seeded workload, one fault per round at a seeded point of it, the invariants checked after every
 * round and over the whole recorded history at the end. Exits non-zero on any violation.
 */

/** Settled: 5 consecutive polls 500 ms apart (2 s) pass the checks and see one state. */
export const SETTLE_POLLS = 5;

export interface ChaosOptions {
  seed: number;
  claims: number;
  pods: number;
  moves: number;
  nodes: number;
  faults: Record<FaultKind, number>;
  /** Leader election timings (ms): lease, renew deadline, retry period. */
  leaseDurationMs: number;
  renewDeadlineMs: number;
  retryPeriodMs: number;
  /** Where the replicas' logs go. */
  logDir: string;
  /** Per round: how long the cluster may take to settle. */
  settleTimeoutMs: number;
  /** Settled: this many consecutive polls (500 ms apart) pass the checks and see the same state. */
  settlePolls: number;
  log: (line: string) => void;
}

export interface FaultRecord extends InjectedFault {
  /** From the fault to the first write kvc got applied (by a new leader, after a leader fault). */
  firstWriteMs?: number;
  settledMs?: number;
}

export interface ChaosReport {
  seed: number;
  durationMs: number;
  claimsCreated: number;
  movesDone: number;
  faults: FaultRecord[];
  restarts: number;
  conflicts: number;
  /** What the invariants were checked over: watched object states, kvc's applied writes, lease terms. */
  observed: { states: number; kvcWrites: number; terms: number };
  /**
   * The recorder's watches: streams resumed from their last resourceVersion; relists after a 410
   * Gone (each a gap: the states between were not seen), and how many objects had changed unseen in
   * them (0: the gaps lost nothing).
   */
  watches: { resumes: number; gaps: number; changedInGaps: number };
  /** The longest the harness's own event loop was blocked (its proxies run in threads of their own). */
  harnessStallMaxMs: number;
  violations: Violation[];
}

export async function runChaos(o: ChaosOptions): Promise<ChaosReport> {
  const t0 = Date.now();
  const stalls = monitorEventLoopDelay({ resolution: 20 });
  stalls.enable();
  const random = mulberry32(o.seed);
  const cp = await LocalControlPlane.start({ audit: true, onProgress: o.log });
  o.log(`replica logs in ${o.logDir}`);
  const ac = new AbortController();
  const replicas: Replica[] = [];
  const proxies: TcpProxyThread[] = [];
  const lease = { namespace: NAMESPACE, name: "kube-volume-controller" };
  try {
    const kc = cp.kubeConfig();
    const recorder = new Recorder(
      { server: cp.server, ca: readFileSync(cp.caFile, "utf8"), token: cp.token },
      lease,
    );
    await recorder.start(ac.signal);
    const workload = new Workload(kc, recorder.world, {
      claims: o.claims,
      pods: o.pods,
      moves: o.moves,
      nodes: o.nodes,
      random,
    });
    await workload.setup();
    void runKubelets(kc, recorder.world, ac.signal);
    void runExternalProvisioner(kc, recorder.world, ac.signal);
    const attacher = startExternalAttacher({
      kubeConfig: kc,
      drivers: [CSI_DRIVER],
      log: silentLogger,
      signal: ac.signal,
    });

    const args = [
      `--leader-elect-resource-namespace=${lease.namespace}`,
      `--leader-elect-resource-name=${lease.name}`,
      `--leader-elect-lease-duration=${o.leaseDurationMs}ms`,
      `--leader-elect-renew-deadline=${o.renewDeadlineMs}ms`,
      `--leader-elect-retry-period=${o.retryPeriodMs}ms`,
      "--enable-hostpath-provisioner",
    ];
    for (const name of ["replica-a", "replica-b"]) {
      const proxy = await TcpProxyThread.start(cp.apiserverPort);
      proxies.push(proxy);
      const r = new Replica(name, proxy, cp.kubeconfigPath, args, o.logDir);
      replicas.push(r);
      await r.start();
    }
    await waitFor(() => recorder.holder, { timeoutMs: 120_000, what: "a leader" });

    // A second writer for the whole run: kvc's writes from a stale cache get 409s.
    let conflicts = 0;
    void until(() => workload.touch().catch(() => (conflicts += 1)), 250, {
      clock: realClock,
      signal: ac.signal,
    });

    const plan = FAULT_KINDS.flatMap((k) => Array.from({ length: o.faults[k] }, () => k));
    shuffle(plan, random);
    // The targeted kills first, while the workload still has claims to bind and pods to move; the
    // binds before the attaches, which need bound claims.
    const rank = (k: FaultKind) => (k === "kill-in-bind" ? 0 : k === "kill-in-attach" ? 1 : 2);
    plan.sort((a, b) => rank(a) - rank(b));
    const rounds = Math.max(1, plan.length);
    const stepsPerRound = Math.ceil((o.claims * 2.2 + o.moves * 1.5) / rounds);
    const faults: FaultRecord[] = [];
    const violations: Violation[] = [];
    for (let round = 0; round < rounds; round++) {
      const kind = plan[round];
      // A targeted kill waits from the round's start for the half-done state, its round's steps start
      // that work while the workload has some left, and the round goes on (up to 3 × its steps) until
      // the kill landed.
      const work = kind === "kill-in-bind" ? "bind" : kind === "kill-in-attach" ? "attach" : undefined;
      const faultAt = work ? 0 : Math.floor(random() * stepsPerRound);
      const roundOver = new AbortController();
      let fault: Promise<InjectedFault> | undefined;
      let over = false;
      for (
        let i = 0;
        i < stepsPerRound ||
        (work && !over && i < 3 * stepsPerRound) ||
        (round === rounds - 1 && !workload.done);
        i++
      ) {
        if (kind && i === faultAt) {
          fault = inject(kind, {
            cp,
            replicas,
            lease: () => recorder.readLease(),
            leaseDurationMs: o.leaseDurationMs,
            random,
            halfDone: (what, deadline) => watchHalfDone(recorder, what, deadline),
            deadline: roundOver.signal,
          });
          void fault.then(
            () => (over = true),
            () => {},
          );
        }
        // Refused while the fault lasts: the next step goes on.
        await (work && !over ? workload.stepToward(work) : workload.step()).catch(() => {});
      }
      roundOver.abort();
      const injected = await fault;
      const settled = await waitSettled(recorder, o.settleTimeoutMs, o.settlePolls);
      if (injected) {
        const record: FaultRecord = {
          ...injected,
          ...(settled.ok ? { settledMs: Date.now() - injected.at } : {}),
        };
        const first = firstWriteAfter(readAuditLog(cp.auditLogPath), injected);
        if (first !== undefined) record.firstWriteMs = first - injected.at;
        faults.push(record);
        o.log(
          `round ${round + 1}/${rounds}: ${injected.detail}${injected.landed ? "" : ` (NOT LANDED: ${injected.missed})`}; first write +${record.firstWriteMs ?? "?"} ms, settled +${record.settledMs ?? "never"} ms`,
        );
      }
      if (!settled.ok) violations.push(...settled.violations);
      const continuous = checkObservations(recorder.observations);
      if (continuous.length > 0) {
        violations.push(...continuous);
        break;
      }
      if (!settled.ok) break;
    }

    ac.abort(new Error("the run is over"));
    await attacher.stop();
    const audit = readAuditLog(cp.auditLogPath);
    violations.push(...checkHistory({ observations: recorder.observations, audit, terms: recorder.terms }));
    const kvcWrites = audit.filter(
      (e) => replicaOf(e.userAgent) && !isLeaderElectionWrite(e) && (e.responseStatus?.code ?? 0) < 300,
    ).length;
    return {
      seed: o.seed,
      durationMs: Date.now() - t0,
      claimsCreated: workload.claimsCreated,
      movesDone: workload.movesDone,
      faults,
      restarts: replicas.reduce((n, r) => n + r.restarts, 0),
      conflicts,
      observed: { states: recorder.observations.length, kvcWrites, terms: recorder.terms.length },
      watches: {
        resumes: recorder.resumes,
        gaps: recorder.gaps.length,
        changedInGaps: recorder.gaps.reduce((n, g) => n + g.changed, 0),
      },
      harnessStallMaxMs: Math.round(stalls.max / 1e6),
      violations: dedupe(violations),
    };
  } finally {
    stalls.disable();
    ac.abort();
    await Promise.all(replicas.map((r) => r.stop()));
    killAllKvc();
    await Promise.all(proxies.map((p) => p.close()));
    await cp.stop();
  }
}

/**
 * Polls the settled-state checks until `polls` consecutive polls pass them and see the same state
 * (settledState), or the deadline passes (then: what still fails, or that the state kept changing).
 */
async function waitSettled(
  recorder: Recorder,
  timeoutMs: number,
  polls: number,
): Promise<{ ok: true } | { ok: false; violations: Violation[] }> {
  const classes = storageClasses();
  const window = new SettleWindow(polls);
  let last: Violation[] = [];
  try {
    await waitFor(
      async () => {
        const world = recorder.snapshot();
        last = checkSettled(world, await recorder.explanations(), classes);
        return window.observe(last, settledState(world));
      },
      { timeoutMs, intervalMs: 500, what: "the cluster to settle" },
    );
    return { ok: true };
  } catch {
    const unstable =
      last.length === 0
        ? [
            {
              invariant: "settled",
              message: `the state kept changing: ${window.same} of ${polls} equal polls at the deadline`,
            },
          ]
        : [];
    return { ok: false, violations: [...last, ...unstable] };
  }
}

/** The first half-done state of `kind` the watches show, or undefined once `deadline` aborts. */
function watchHalfDone(
  recorder: Recorder,
  kind: "bind" | "attach",
  deadline: AbortSignal,
): Promise<string | undefined> {
  return new Promise((resolve) => {
    const now = halfDone(kind, recorder.world);
    if (now !== undefined || deadline.aborted) {
      resolve(now);
      return;
    }
    const finish = (state: string | undefined) => {
      unsubscribe();
      deadline.removeEventListener("abort", onAbort);
      resolve(state);
    };
    const onAbort = () => {
      finish(undefined);
    };
    const unsubscribe = recorder.subscribe((o) => {
      const state = halfDone(kind, recorder.world, o);
      if (state !== undefined) finish(state);
    });
    deadline.addEventListener("abort", onAbort);
  });
}

/** When kvc first got a write applied after the fault, by another replica than the leader it hit. */
function firstWriteAfter(audit: readonly AuditEvent[], f: InjectedFault): number | undefined {
  for (const e of audit) {
    const at = Date.parse(e.requestReceivedTimestamp);
    const replica = replicaOf(e.userAgent);
    const code = e.responseStatus?.code ?? 0;
    if (at < f.at || !replica || isLeaderElectionWrite(e) || code < 200 || code >= 300) continue;
    if (f.leader && replica === f.leader && killsLeader(f.kind)) continue;
    return at;
  }
  return undefined;
}

function shuffle(xs: unknown[], random: () => number): void {
  for (let i = xs.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [xs[i], xs[j]] = [xs[j], xs[i]];
  }
}

function dedupe(vs: Violation[]): Violation[] {
  const seen = new Set<string>();
  return vs.filter((v) => !seen.has(v.message) && seen.add(v.message));
}

/** p50 and p99 (nearest rank) of `xs`. */
export function percentiles(xs: readonly number[]): { p50?: number; p99?: number } {
  const s = [...xs].sort((a, b) => a - b);
  const at = (q: number) => s[Math.min(s.length - 1, Math.ceil(q * s.length) - 1)];
  return s.length === 0 ? {} : { p50: at(0.5)!, p99: at(0.99)! };
}

/**
 * The figures docs/reliability.md shows: per fault kind, how many landed where aimed, first write
 * and settled p50/p99 (of the landed ones).
 */
export function summarize(r: ChaosReport): string {
  const lines = [
    `seed ${r.seed}: ${r.claimsCreated} claims, ${r.movesDone} pod moves, ${r.faults.length} faults, ` +
      `${r.restarts} replica restarts, ${r.conflicts} second-writer conflicts, ${Math.round(r.durationMs / 1000)} s; ` +
      `checked over ${r.observed.states} object states, ${r.observed.kvcWrites} kvc writes, ${r.observed.terms} lease terms; ` +
      `the recorder's watches resumed ${r.watches.resumes} times, relisted after 410 Gone ${r.watches.gaps} times, ${r.watches.changedInGaps} objects changed unseen in those gaps; ` +
      `harness event loop blocked ${r.harnessStallMaxMs} ms at most`,
    "| fault | landed / aimed | first write p50 / p99 (ms) | settled p50 / p99 (ms) |",
    "| --- | --- | --- | --- |",
  ];
  for (const kind of [...FAULT_KINDS, "all"] as const) {
    const aimed = r.faults.filter((f) => kind === "all" || f.kind === kind);
    if (aimed.length === 0) continue;
    const fs = aimed.filter((f) => f.landed);
    const w = percentiles(fs.flatMap((f) => (f.firstWriteMs === undefined ? [] : [f.firstWriteMs])));
    const s = percentiles(fs.flatMap((f) => (f.settledMs === undefined ? [] : [f.settledMs])));
    lines.push(
      `| ${kind} | ${fs.length} / ${aimed.length} | ${w.p50 ?? "-"} / ${w.p99 ?? "-"} | ${s.p50 ?? "-"} / ${s.p99 ?? "-"} |`,
    );
  }
  for (const f of r.faults.filter((f) => !f.landed)) lines.push(`not landed: ${f.kind}: ${f.missed}`);
  lines.push(`invariant violations: ${r.violations.length}`);
  for (const v of r.violations) lines.push(`  ${v.invariant}: ${v.message}`);
  return lines.join("\n");
}

async function main(): Promise<void> {
  const argv = await yargs(hideBin(process.argv))
    .scriptName("npm run chaos --")
    .usage("$0 [options]: kvc under faults on the real control plane; exits 1 on any invariant violation")
    .options({
      seed: { type: "number", default: 1, describe: "seed of the workload and the fault schedule" },
      claims: { type: "number", default: 60, describe: "claims to create" },
      pods: { type: "number", default: 10, describe: "pods alive at most at once" },
      moves: { type: "number", default: 20, describe: "pod moves between nodes" },
      nodes: { type: "number", default: 3 },
      kills: { type: "number", default: 2, describe: "kill -9 of the leader" },
      "kills-in-bind": {
        type: "number",
        default: 1,
        describe: "kill -9 of the leader once the watches see a bind half done (none seen: not landed)",
      },
      "kills-in-attach": {
        type: "number",
        default: 1,
        describe: "kill -9 of the leader once the watches see an attach in flight (none seen: not landed)",
      },
      sigstops: {
        type: "number",
        default: 1,
        describe: "SIGSTOP of the leader past its lease, then SIGCONT",
      },
      "apiserver-restarts": { type: "number", default: 1 },
      "etcd-restarts": { type: "number", default: 1 },
      partitions: {
        type: "number",
        default: 1,
        describe: "drop, stall or half-open between the leader and the apiserver",
      },
      "watch-cuts": {
        type: "number",
        default: 1,
        describe: "etcd compaction and every connection cut (410 Gone on relist)",
      },
      "lease-duration": { type: "number", default: 4000, describe: "ms" },
      "renew-deadline": { type: "number", default: 3000, describe: "ms" },
      "retry-period": { type: "number", default: 500, describe: "ms" },
      "settle-timeout": { type: "number", default: 180_000, describe: "ms, per round" },
      "settle-polls": {
        type: "number",
        default: SETTLE_POLLS,
        describe: "settled: this many consecutive polls, 500 ms apart, pass the checks and see one state",
      },
      out: { type: "string", describe: "write the report as JSON here" },
      "log-dir": { type: "string", describe: "the replicas' logs (default: a new temporary directory)" },
    })
    .strict()
    .parseAsync();
  const report = await runChaos({
    seed: argv.seed,
    claims: argv.claims,
    pods: argv.pods,
    moves: argv.moves,
    nodes: argv.nodes,
    faults: {
      kill: argv.kills,
      "kill-in-bind": argv["kills-in-bind"],
      "kill-in-attach": argv["kills-in-attach"],
      sigstop: argv.sigstops,
      apiserver: argv["apiserver-restarts"],
      etcd: argv["etcd-restarts"],
      partition: argv.partitions,
      watchcut: argv["watch-cuts"],
    },
    leaseDurationMs: argv["lease-duration"],
    renewDeadlineMs: argv["renew-deadline"],
    retryPeriodMs: argv["retry-period"],
    settleTimeoutMs: argv["settle-timeout"],
    settlePolls: argv["settle-polls"],
    logDir: argv["log-dir"] ?? mkdtempSync(join(tmpdir(), "kvc-chaos-logs-")),
    log: (line) => {
      console.error(`[chaos ${new Date().toISOString()}] ${line}`);
    },
  });
  if (argv.out) writeFileSync(argv.out, JSON.stringify(report, null, 2));
  console.log(summarize(report));
  process.exitCode = report.violations.length > 0 ? 1 : 0;
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? "").href) await main();
