import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { ApiException, CoordinationV1Api, V1MicroTime } from "@kubernetes/client-node";
import { LocalControlPlane } from "../../src/controlplane/local-control-plane.js";
import { JITTER_FACTOR, LeaderElector } from "../../src/runtime/leader-election.js";
import { waitFor } from "../../src/util/wait.js";

const ns = "default";
// Short timings keep the test fast; they satisfy lease > renew > 1.2 × retry like the defaults.
const LEASE = 2_000;
const RENEW = 1_500;
const RETRY = 300;
/** Longest wait between two acquire attempts. */
const MAX_ATTEMPT_GAP = RETRY * (1 + JITTER_FACTOR);
/** Round trips to a loopback apiserver under test load; generous, it only widens upper bounds. */
const LATENCY = 250;

interface Interval {
  who: string;
  start: number;
  end: number;
}

/** Electors on one Lease, with every leadership interval and a 20 ms sample of isLeader(). */
class Campaign {
  readonly #coord: CoordinationV1Api;
  readonly #lease: string;
  readonly #running = new Map<
    string,
    { elector: LeaderElector; stop: AbortController; done: Promise<void> }
  >();
  readonly intervals: Interval[] = [];
  readonly bothLeading: number[] = [];
  readonly #poller: NodeJS.Timeout;

  constructor(coord: CoordinationV1Api, lease: string) {
    this.#coord = coord;
    this.#lease = lease;
    this.#poller = setInterval(() => {
      const leaders = [...this.#running.values()].filter((r) => r.elector.isLeader());
      if (leaders.length > 1) this.bothLeading.push(performance.now());
    }, 20);
  }

  start(identity: string, releaseOnCancel: boolean): LeaderElector {
    const elector = new LeaderElector({
      lock: { name: this.#lease, namespace: ns, identity },
      coordination: this.#coord,
      leaseDurationMs: LEASE,
      renewDeadlineMs: RENEW,
      retryPeriodMs: RETRY,
      releaseOnCancel,
      onStartedLeading: (signal) => {
        const interval = { who: identity, start: performance.now(), end: Infinity };
        this.intervals.push(interval);
        signal.addEventListener("abort", () => {
          interval.end = performance.now();
        });
      },
      onStoppedLeading: () => {},
    });
    const stop = new AbortController();
    this.#running.set(identity, { elector, stop, done: elector.run(stop.signal) });
    return elector;
  }

  /** Aborts `identity`'s run and waits for it to end (including any release); returns when it was aborted. */
  async stop(identity: string): Promise<number> {
    const r = this.#running.get(identity)!;
    const at = performance.now();
    r.stop.abort();
    await r.done;
    this.#running.delete(identity);
    return at;
  }

  started(identity: string): number {
    const i = this.intervals.findLast((x) => x.who === identity);
    assert.ok(i, `${identity} led`);
    return i.start;
  }

  async close(): Promise<void> {
    clearInterval(this.#poller);
    await Promise.all([...this.#running.keys()].map((id) => this.stop(id)));
  }

  readLease() {
    return this.#coord.readNamespacedLease({ name: this.#lease, namespace: ns });
  }

  /** Waits until the Lease's renewTime has taken `n` new values: its holder is renewing. */
  async renewals(n: number): Promise<void> {
    const seen = new Set<unknown>();
    await waitFor(
      async () => {
        seen.add((await this.readLease()).spec?.renewTime);
        return seen.size > n;
      },
      { timeoutMs: (n + 1) * (RETRY + LATENCY) + 5_000, intervalMs: 50, what: `${n} renewals` },
    );
  }
}

function assertNoOverlap(intervals: readonly Interval[]): void {
  const sorted = [...intervals].sort((x, y) => x.start - y.start);
  for (let i = 1; i < sorted.length; i++) {
    const [prev, next] = [sorted[i - 1]!, sorted[i]!];
    assert.ok(
      prev.end <= next.start,
      `${prev.who} led until ${prev.end.toFixed(1)} but ${next.who} started at ${next.start.toFixed(1)}`,
    );
  }
}

describe("leader election on a real apiserver", () => {
  let cp: LocalControlPlane;
  let coord: CoordinationV1Api;

  before(async () => {
    cp = await LocalControlPlane.start();
    coord = cp.kubeConfig().makeApiClient(CoordinationV1Api);
  });
  after(() => cp.stop());

  test("Lease MicroTime: client-node must be given V1MicroTime, and reads come back as strings", async () => {
    const name = "microtime";
    const millis = coord.createNamespacedLease({
      namespace: ns,
      body: { metadata: { name }, spec: { holderIdentity: "x", renewTime: new Date() } },
    });
    await assert.rejects(millis, (err: unknown) => {
      assert.ok(err instanceof ApiException);
      assert.equal(err.code, 400);
      return true;
    });
    await coord.createNamespacedLease({
      namespace: ns,
      body: { metadata: { name }, spec: { holderIdentity: "x", renewTime: new V1MicroTime(Date.now()) } },
    });
    const read = await coord.readNamespacedLease({ name, namespace: ns });
    assert.equal(typeof read.spec?.renewTime, "string", "typed V1MicroTime, but not deserialized");
    assert.match(String(read.spec?.renewTime), /\.\d{6}Z$/);
  });

  test("two electors: one leader at a time, takeover after a stop without and with release", async () => {
    const campaign = new Campaign(coord, "kvc-leader-election");
    try {
      const a = campaign.start("a", false);
      await waitFor(() => a.isLeader(), { timeoutMs: 10_000, intervalMs: 10, what: "a to lead" });
      const b = campaign.start("b", true);
      await waitFor(() => b.getLeader() === "a", { timeoutMs: 5_000, intervalMs: 10, what: "b to see a" });
      await campaign.renewals(5);
      assert.equal(b.isLeader(), false);
      const first = await campaign.readLease();
      assert.equal(first.spec?.holderIdentity, "a");
      assert.equal(first.spec.leaseTransitions, 0);
      assert.equal(first.spec.leaseDurationSeconds, LEASE / 1000);

      // Without release, b waits out the lease from the last change it saw: a's last renewal, seen at
      // most one attempt gap (plus a round trip) after a stopped; then at most one more gap.
      const takeoverBound = LEASE + 2 * (MAX_ATTEMPT_GAP + LATENCY);
      const aStopped = await campaign.stop("a");
      await waitFor(() => b.isLeader(), { timeoutMs: 2 * takeoverBound, intervalMs: 10, what: "b to lead" });
      const withoutRelease = campaign.started("b") - aStopped;
      console.log(`takeover without release: ${withoutRelease.toFixed(0)} ms (bound ${takeoverBound} ms)`);
      assert.ok(withoutRelease <= takeoverBound, `took ${withoutRelease} ms`);
      const second = await campaign.readLease();
      assert.equal(second.spec?.holderIdentity, "b");
      assert.equal(second.spec.leaseTransitions, 1);
      assert.notEqual(String(second.spec.acquireTime), String(first.spec.acquireTime));

      // With release, the lease is free at once: the standby's next attempt takes it.
      const c = campaign.start("c", false);
      await waitFor(() => c.getLeader() === "b", { timeoutMs: 5_000, intervalMs: 10, what: "c to see b" });
      await campaign.renewals(3);
      const releaseBound = MAX_ATTEMPT_GAP + 2 * LATENCY;
      const bStopped = await campaign.stop("b");
      await waitFor(() => c.isLeader(), { timeoutMs: 2 * takeoverBound, intervalMs: 10, what: "c to lead" });
      const withRelease = campaign.started("c") - bStopped;
      console.log(`takeover with release: ${withRelease.toFixed(0)} ms (bound ${releaseBound} ms)`);
      assert.ok(withRelease <= releaseBound, `took ${withRelease} ms`);
      const third = await campaign.readLease();
      assert.equal(third.spec?.holderIdentity, "c");
      assert.equal(third.spec.leaseTransitions, 2);
    } finally {
      await campaign.close();
    }
    assert.deepEqual(
      campaign.intervals.map((i) => i.who),
      ["a", "b", "c"],
    );
    assertNoOverlap(campaign.intervals);
    assert.deepEqual(campaign.bothLeading, [], "no isLeader() sample had two leaders");
  });
});
