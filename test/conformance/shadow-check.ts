import { appendFile } from "node:fs/promises";
import type { Comparison, Outcome } from "../../src/shadow/comparator.js";
import type { ShadowSummary } from "../../src/shadow/shadow-mode.js";
import { waitFor } from "../../src/util/wait.js";
import { AuditLogTail, describeEvents, isWrite, type AuditEvent } from "../support/audit.js";
import { startKvc, type KvcProcess } from "../support/kvc-process.js";

/*
 * Issue 15's evidence on every differential scenario: on the reference control plane, a `kvc run
 * --shadow` runs beside kube-controller-manager (started and stopped with it, so it restarts where KCM
 * restarts and forgets what KCM forgets) and compares each of KCM's decisions with its own. After each
 * scenario: every decision agrees or is a tie, at most MAX_TIED_BINDINGS bindings tie, the shadow
 * understood every write of kvc's, it compared at least MIN_COMPARED decisions where KCM wrote
 * anything it compares (issue 32: a shadow that observed nothing passed), and the apiserver's audit
 * log shows no write by the shadow. On by default; KVC_CONFORMANCE_SHADOW=0 turns it off (a quicker
 * run of the outcomes alone).
 */

/**
 * Tied bindings a scenario may have. The scenarios give each claim one best volume (distinct sizes),
 * so a tie is rare; more are a matcher or comparator that no longer tells volumes apart.
 */
export const MAX_TIED_BINDINGS = 1;
/** Decisions the shadow must have compared in a scenario in which KCM wrote what it compares. */
export const MIN_COMPARED = 1;
/** What the compared loops write (Leases are leader election, no decision). */
const COMPARED_RESOURCES = new Set([
  "persistentvolumes",
  "persistentvolumeclaims",
  "volumeattachments",
  "nodes",
  "pods",
  "events",
]);
const KCM_USER_AGENT = "kube-controller-manager/";
/** A key of the counts that is no outcome: the writes the shadow did not understand. */
const UNPARSED = "unparsed";

/** The shadow's grace window: long enough for KCM's slowest decision after kvc's (a few resyncs). */
const GRACE_S = 10;
/** The shadow's User-Agent (and only the shadow runs kvc on the reference control plane). */
const USER_AGENT = "kube-volume-controller/v";
/** Reviews authenticating GET /shadow: answered, not stored; they change nothing in the cluster. */
const REVIEWS = new Set(["tokenreviews", "subjectaccessreviews"]);

export const SHADOW_ENABLED = process.env.KVC_CONFORMANCE_SHADOW !== "0";
/** A file the shadows' debug logs are appended to as each one ends, for tracing a disagreement. */
const SHADOW_LOG = process.env.KVC_CONFORMANCE_SHADOW_LOG;

/** What the shadow saw during one scenario (and the previous one's cleanup). */
export interface ShadowVerdict {
  /** Decisions compared, by outcome. */
  counts: Record<Outcome, number>;
  /** Bindings that tied (the phase changes that follow from a tie are ties too, not counted here). */
  tiedBindings: number;
  /** kvc's writes the shadow did not understand. */
  unparsed: number;
  /** The comparisons that are neither agree nor tie. */
  disagreements: Comparison[];
  /** Writes by the shadow's User-Agent in the audit log. */
  writes: AuditEvent[];
  /** KCM's writes of what the shadow compares, since the shadow of this scenario started. */
  upstreamWrites: AuditEvent[];
}

type Counts = Map<string, number>;

/** The shadow kvc beside the reference runner's KCM. */
export class ShadowCheck {
  readonly #audit: AuditLogTail;
  #process: KvcProcess | undefined;
  /** Per-kind counts of the running shadow at the last verdict (or its start). */
  #base: Counts = new Map();
  /** Counts and disagreements of shadows stopped since the last verdict. */
  #carried: { counts: Counts; disagreements: Comparison[] } = { counts: new Map(), disagreements: [] };
  #since = new Date();

  constructor(
    private readonly kubeconfig: string,
    auditLogPath: string,
    private readonly args: readonly string[],
  ) {
    this.#audit = new AuditLogTail(auditLogPath);
  }

  /**
   * Starts a shadow, with a scenario's own `flags` after the check's; resolves once its informers have
   * synced (it ignores objects older than itself).
   */
  async start(flags: readonly string[] = []): Promise<void> {
    const p = await startKvc(this.kubeconfig, [
      "--shadow",
      `--shadow-grace-period=${GRACE_S}s`,
      "--kube-api-qps=-1",
      ...(SHADOW_LOG ? ["--v=4"] : []),
      ...this.args,
      ...flags,
    ]);
    await p.ready();
    this.#process = p;
    this.#base = new Map();
  }

  /** Stops the shadow once its pending decisions are compared, keeping its counts for the verdict. */
  async stop(): Promise<void> {
    const p = this.#process;
    if (!p) return;
    const s = await this.#settled();
    this.#carried.counts = add(this.#carried.counts, minus(countsOf(s), this.#base));
    this.#carried.disagreements.push(...this.#newDisagreements(s));
    await this.#end();
  }

  /**
   * Stops the shadow at once, forgetting what it decided since the last verdict: the runner's cleanup
   * (finalizers stripped, objects deleted in its own order) is no decision of KCM's to compare. The
   * audit log is still read at the next verdict: a write is a write. start() runs a fresh one.
   */
  async discard(): Promise<void> {
    this.#base = new Map();
    this.#carried = { counts: new Map(), disagreements: [] };
    this.#since = new Date();
    await this.#end();
  }

  /** Terminates the running shadow, if any. */
  async #end(): Promise<void> {
    const p = this.#process;
    this.#process = undefined;
    if (!p) return;
    p.child.kill("SIGTERM");
    await p.exited;
    if (SHADOW_LOG) await appendFile(SHADOW_LOG, `=== shadow ended ${new Date().toISOString()}\n${p.logs()}`);
  }

  /** After a scenario (before its cleanup): the decisions compared and the shadow's writes since the last. */
  async verdict(): Promise<ShadowVerdict> {
    const s = this.#process && (await this.#settled());
    const counts = add(this.#carried.counts, s ? minus(countsOf(s), this.#base) : new Map<string, number>());
    const disagreements = [...this.#carried.disagreements, ...(s ? this.#newDisagreements(s) : [])];
    const since = this.#since.getTime();
    this.#base = s ? countsOf(s) : new Map<string, number>();
    this.#carried = { counts: new Map(), disagreements: [] };
    this.#since = new Date();
    const byOutcome = { agree: 0, differ: 0, "kvc-only": 0, "upstream-only": 0, tie: 0 } as Record<
      Outcome,
      number
    >;
    let tiedBindings = 0;
    let unparsed = 0;
    for (const [key, n] of counts) {
      if (key === UNPARSED) {
        unparsed += n;
        continue;
      }
      const [, kind, outcome] = key.split(" ");
      byOutcome[outcome as Outcome] += n;
      if (kind === "binding" && outcome === "tie") tiedBindings += n;
    }
    const events = this.#audit.next().filter(isWrite);
    const by = (e: AuditEvent, agent: string) => (e.userAgent ?? "").includes(agent);
    const writes = events.filter((e) => by(e, USER_AGENT) && !REVIEWS.has(e.objectRef?.resource ?? ""));
    // The previous scenario's cleanup (before this shadow started) is no decision of this scenario's.
    const upstreamWrites = events.filter(
      (e) =>
        by(e, KCM_USER_AGENT) &&
        COMPARED_RESOURCES.has(e.objectRef?.resource ?? "") &&
        Date.parse(e.requestReceivedTimestamp) >= since,
    );
    return { counts: byOutcome, tiedBindings, unparsed, disagreements, writes, upstreamWrites };
  }

  /** The shadow's summary once no decision waits for the other side (one-sided ones expire after GRACE_S). */
  async #settled(): Promise<ShadowSummary> {
    const p = this.#process;
    if (!p) throw new Error("no shadow running");
    return waitFor(
      async () => {
        const res = await p.get("/shadow");
        if (res.status !== 200) throw new Error(`GET /shadow: ${res.status} ${res.body}`);
        const s = JSON.parse(res.body) as ShadowSummary;
        return s.pending === 0 ? s : undefined;
      },
      { timeoutMs: (GRACE_S + 20) * 1000, intervalMs: 250, what: "the shadow's pending decisions compared" },
    );
  }

  #newDisagreements(s: ShadowSummary): Comparison[] {
    return s.disagreements.filter((d) => Date.parse(d.at) >= this.#since.getTime());
  }
}

function countsOf(s: ShadowSummary): Counts {
  const counts = new Map(s.decisions.map((d) => [`${d.controller} ${d.kind} ${d.outcome}`, d.count]));
  return counts.set(UNPARSED, s.unparsed.count);
}

function minus(a: Counts, b: Counts): Counts {
  return new Map([...a].map(([k, n]) => [k, n - (b.get(k) ?? 0)]));
}

function add(a: Counts, b: Counts): Counts {
  const out = new Map(a);
  for (const [k, n] of b) out.set(k, (out.get(k) ?? 0) + n);
  return out;
}

/** The verdict's failures, one line each (empty: the shadow agreed and wrote nothing). */
export function shadowFailures(v: ShadowVerdict, differs: string | undefined): string[] {
  const compared = Object.values(v.counts).reduce((a, b) => a + b, 0);
  return [
    ...(differs
      ? [] // declared different from upstream: the shadow is expected to say so
      : v.disagreements.map(
          (d) => `${d.outcome} ${d.key}: kvc ${d.kvc ?? "-"}, upstream ${d.upstream ?? "-"}`,
        )),
    ...(!differs && v.tiedBindings > MAX_TIED_BINDINGS
      ? [`${v.tiedBindings} tied binding(s), more than the ${MAX_TIED_BINDINGS} a scenario may have`]
      : []),
    ...(v.upstreamWrites.length > 0 && compared < MIN_COMPARED
      ? [
          `the shadow compared ${compared} decision(s), not at least ${MIN_COMPARED}, where KCM wrote ` +
            `${v.upstreamWrites.length} time(s):\n${describeEvents(v.upstreamWrites.slice(0, 10))}`,
        ]
      : []),
    ...(v.unparsed > 0
      ? [`${v.unparsed} write(s) of kvc the shadow did not understand (GET /shadow: unparsed)`]
      : []),
    ...(v.writes.length ? [`the shadow wrote:\n${describeEvents(v.writes)}`] : []),
  ];
}
