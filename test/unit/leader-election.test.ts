import assert from "node:assert/strict";
import { describe, test } from "node:test";
import {
  ApiException,
  HttpMethod,
  RequestContext,
  type ConfigurationOptions,
  type CoordinationV1ApiCreateNamespacedLeaseRequest,
  type CoordinationV1ApiReplaceNamespacedLeaseRequest,
  type V1Lease,
  type V1LeaseSpec,
  type V1MicroTime,
} from "@kubernetes/client-node";
import { pino } from "pino";
import { FakeClock } from "../../src/runtime/clock.js";
import {
  LeaderElector,
  type LeaderElectionConfig,
  type LeaseClient,
} from "../../src/runtime/leader-election.js";

const LEASE = 15_000;
const RENEW = 10_000;
const RETRY = 2_000;
const MICRO_TIME = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$/;

/** A logger keeping its warnings and errors: message, and holder where one is named. */
function warnings(): { logger: pino.Logger; lines: string[] } {
  const lines: string[] = [];
  const write = (line: string) => {
    const { msg, holder } = JSON.parse(line) as { msg: string; holder?: string };
    lines.push(holder === undefined ? msg : `${msg} (holder ${holder})`);
  };
  return { logger: pino({ level: "warn" }, { write }), lines };
}

function apiError(code: number, reason: string): ApiException<string> {
  return new ApiException(
    code,
    reason,
    JSON.stringify({ kind: "Status", code, reason, message: reason }),
    {},
  );
}

/**
 * One Lease with the apiserver's rules the elector relies on: create fails if it exists, replace
 * needs the current resourceVersion, MicroTime has six fractional digits. Objects cross a JSON
 * boundary both ways, so reads hand back times as strings, as client-node does.
 */
class MemoryLeases implements LeaseClient {
  stored: V1Lease | undefined;
  /** "fail": every call answers 500; "hang": no call answers until its request signal aborts. */
  mode: "ok" | "fail" | "hang" = "ok";
  readonly calls: string[] = [];
  #rv = 0;

  async readNamespacedLease(_: unknown, options?: ConfigurationOptions): Promise<V1Lease> {
    await this.#serve("read", options);
    if (!this.stored) throw apiError(404, "NotFound");
    return structuredClone(this.stored);
  }

  async createNamespacedLease(
    { body }: CoordinationV1ApiCreateNamespacedLeaseRequest,
    options?: ConfigurationOptions,
  ): Promise<V1Lease> {
    await this.#serve("create", options);
    if (this.stored) throw apiError(409, "AlreadyExists");
    return this.#commit(body);
  }

  async replaceNamespacedLease(
    { body }: CoordinationV1ApiReplaceNamespacedLeaseRequest,
    options?: ConfigurationOptions,
  ): Promise<V1Lease> {
    await this.#serve("replace", options);
    if (!this.stored) throw apiError(404, "NotFound");
    if (body.metadata?.resourceVersion !== this.stored.metadata?.resourceVersion) {
      throw apiError(409, "Conflict");
    }
    return this.#commit(body);
  }

  /** Another replica's write, bypassing any elector here. */
  write(spec: V1LeaseSpec): void {
    this.#commit({ metadata: { name: "test", namespace: "default" }, spec });
  }

  get spec(): V1LeaseSpec {
    return this.stored?.spec ?? {};
  }

  #commit(body: V1Lease): V1Lease {
    const wire = JSON.parse(JSON.stringify(body)) as V1Lease;
    for (const t of [wire.spec?.acquireTime, wire.spec?.renewTime]) {
      if (t !== undefined && !MICRO_TIME.test(t as unknown as string)) throw apiError(400, "BadRequest");
    }
    (wire.metadata ??= {}).resourceVersion = String(++this.#rv);
    this.stored = wire;
    return structuredClone(wire);
  }

  /** Runs the request's middleware the way client-node does, to find the signal that aborts it. */
  async #serve(call: string, options?: ConfigurationOptions): Promise<void> {
    this.calls.push(call);
    const ctx = new RequestContext("http://memory/", HttpMethod.GET);
    for (const m of options?.middleware ?? []) await m.pre(ctx).toPromise();
    const signal = ctx.getSignal();
    signal?.throwIfAborted();
    if (this.mode === "fail") throw apiError(500, "InternalError");
    if (this.mode === "hang") {
      await new Promise((_, reject) => {
        signal?.addEventListener("abort", () => {
          reject(signal.reason as Error);
        });
      });
    }
  }
}

/** Lets every promise continuation the last timers released run to its next wait. */
const settle = () => new Promise<void>((resolve) => setImmediate(resolve));

/** Moves the fake clock forward in steps, letting the electors react before each and at the end. */
async function advance(clock: FakeClock, ms: number, step = 100): Promise<void> {
  for (let done = 0; done < ms; done += step) {
    await settle();
    clock.advance(Math.min(step, ms - done));
  }
  await settle();
}

interface Candidate {
  elector: LeaderElector;
  events: string[];
  status: boolean[];
  leading: AbortSignal | undefined;
  stop: () => void;
  done: Promise<void>;
}

function candidate(
  store: MemoryLeases,
  clock: FakeClock,
  identity: string,
  overrides: Partial<LeaderElectionConfig> = {},
): Candidate {
  const events: string[] = [];
  const status: boolean[] = [];
  let leading: AbortSignal | undefined;
  const elector = new LeaderElector({
    lock: { name: "test", namespace: "default", identity },
    coordination: store,
    clock,
    random: () => 0,
    leaseDurationMs: LEASE,
    renewDeadlineMs: RENEW,
    retryPeriodMs: RETRY,
    onStartedLeading: (signal) => {
      leading = signal;
      events.push(`started@${clock.now()}`);
    },
    onStoppedLeading: () => events.push(`stopped@${clock.now()}`),
    onNewLeader: (id) => events.push(`leader=${id}`),
    onLeaderStatus: (on) => status.push(on),
    ...overrides,
  });
  const ac = new AbortController();
  return {
    elector,
    events,
    status,
    get leading() {
      return leading;
    },
    stop: () => {
      ac.abort();
    },
    done: elector.run(ac.signal),
  };
}

describe("LeaderElector configuration", () => {
  const base = {
    lock: { identity: "a" },
    coordination: new MemoryLeases(),
    onStartedLeading: () => {},
    onStoppedLeading: () => {},
  };
  const invalid: [Partial<LeaderElectionConfig>, RegExp][] = [
    [
      { leaseDurationMs: 10_000, renewDeadlineMs: 10_000 },
      /leaseDuration must be greater than renewDeadline/,
    ],
    [
      { renewDeadlineMs: 2_400, retryPeriodMs: 2_000 },
      /renewDeadline must be greater than retryPeriod\*JitterFactor/,
    ],
    [
      { leaseDurationMs: 0, renewDeadlineMs: -2, retryPeriodMs: -2 },
      /leaseDuration must be greater than zero/,
    ],
    [
      { leaseDurationMs: 1000, renewDeadlineMs: 0, retryPeriodMs: -1 },
      /renewDeadline must be greater than zero/,
    ],
    [{ retryPeriodMs: 0 }, /retryPeriod must be greater than zero/],
    [{ lock: { identity: "" } }, /Lock identity is empty/],
    [{ leaseDurationMs: 2_500, renewDeadlineMs: 2_000, retryPeriodMs: 100 }, /whole number of seconds/],
  ];
  for (const [overrides, message] of invalid) {
    test(`rejects ${JSON.stringify(overrides)}`, () => {
      assert.throws(() => new LeaderElector({ ...base, ...overrides }), message);
    });
  }

  test("accepts client-go's defaults and the boundary just above retryPeriod × 1.2", () => {
    new LeaderElector(base);
    new LeaderElector({ ...base, leaseDurationMs: 3_000, renewDeadlineMs: 2_401, retryPeriodMs: 2_000 });
  });
});

describe("LeaderElector", () => {
  test("creates a missing Lease holding it, then renews it on the fast path without reading", async () => {
    const store = new MemoryLeases();
    const clock = new FakeClock();
    const a = candidate(store, clock, "a");
    await settle();
    assert.deepEqual(a.events, ["leader=a", "started@0"]);
    assert.deepEqual(a.status, [false, true]);
    assert.equal(a.elector.isLeader(), true);
    assert.equal(a.elector.getLeader(), "a");
    assert.equal(store.spec.holderIdentity, "a");
    assert.equal(store.spec.leaseDurationSeconds, 15);
    assert.equal(store.spec.leaseTransitions, 0);
    assert.match(String(store.spec.renewTime), MICRO_TIME);
    const acquired = store.spec.acquireTime;

    store.calls.length = 0;
    await advance(clock, 3 * RETRY);
    assert.deepEqual(store.calls, ["replace", "replace", "replace"]);
    assert.equal(store.spec.acquireTime, acquired, "renewals keep the acquire time");
    assert.equal(store.spec.leaseTransitions, 0);
    a.stop();
    await a.done;
  });

  for (const [when, renewTime] of [
    ["long past", "2000-01-01T00:00:00.000000Z"],
    ["far future", "2100-01-01T00:00:00.000000Z"],
  ] as const) {
    test(`judges expiry from its own observation, not a renewTime in the ${when}`, async () => {
      const store = new MemoryLeases();
      store.write({
        holderIdentity: "other",
        leaseDurationSeconds: 15,
        acquireTime: renewTime as unknown as V1MicroTime,
        renewTime: renewTime as unknown as V1MicroTime,
        leaseTransitions: 4,
      });
      const clock = new FakeClock();
      const b = candidate(store, clock, "b");
      await settle();
      assert.deepEqual(b.events, ["leader=other"]);
      // First seen at 0, unchanged since: expired at 0 + 15 s. Attempts run every 2 s (jitter pinned to
      // 0), but the wait before the one at 16 s ends when the record expires: it takes over at 15 s.
      await advance(clock, 14_900);
      assert.equal(b.elector.isLeader(), false);
      assert.equal(store.spec.holderIdentity, "other");
      await advance(clock, 100);
      assert.equal(b.elector.isLeader(), true);
      assert.deepEqual(b.events, ["leader=other", "leader=b", "started@15000"]);
      assert.equal(store.spec.leaseTransitions, 5);
      assert.notEqual(store.spec.acquireTime, renewTime, "a new term gets a new acquire time");
      b.stop();
      await b.done;
    });
  }

  test("never takes over a lease whose record keeps changing, then does a lease duration after it stops", async () => {
    const store = new MemoryLeases();
    const clock = new FakeClock();
    const renew = (n: number) => {
      store.write({
        holderIdentity: "other",
        leaseDurationSeconds: 15,
        renewTime: `2000-01-01T00:00:${String(n).padStart(2, "0")}.000000Z` as unknown as V1MicroTime,
        leaseTransitions: 0,
      });
    };
    renew(0);
    const b = candidate(store, clock, "b");
    for (let n = 1; n <= 10; n++) {
      await advance(clock, 9_000);
      renew(n);
      await advance(clock, 1_000);
    }
    assert.equal(b.elector.isLeader(), false);
    // The last change (at 99 s) was first seen by the attempt at 100 s: expired at 115 s.
    await advance(clock, 14_900);
    assert.equal(b.elector.isLeader(), false);
    await advance(clock, 100);
    assert.equal(b.elector.isLeader(), true);
    assert.equal(store.spec.leaseTransitions, 1);
    b.stop();
    await b.done;
  });

  test("acquire attempts are retryPeriod × (1 + rand × 1.2) apart", async () => {
    const store = new MemoryLeases();
    store.write({ holderIdentity: "other", leaseDurationSeconds: 60, leaseTransitions: 0 });
    const clock = new FakeClock();
    const attempts: number[] = [];
    const read = store.readNamespacedLease.bind(store);
    store.readNamespacedLease = (param, options) => {
      attempts.push(clock.now());
      return read(param, options);
    };
    const b = candidate(store, clock, "b", { random: () => 0.5 });
    await advance(clock, 10_000);
    assert.deepEqual(attempts, [0, 3_200, 6_400, 9_600]);
    b.stop();
    await b.done;
  });

  test("loses leadership when no renewal succeeds within renewDeadline, aborting hung requests", async () => {
    const store = new MemoryLeases();
    const clock = new FakeClock();
    const { logger, lines } = warnings();
    const a = candidate(store, clock, "a", { logger });
    await advance(clock, 2 * RETRY); // renewed at 2 s and 4 s
    store.mode = "hang";
    // The next renewal starts at 6 s and hangs; its deadline is 6 s + renewDeadline.
    await advance(clock, RETRY + RENEW - 100);
    assert.equal(a.elector.isLeader(), true);
    const leading = a.leading!;
    assert.equal(leading.aborted, false);
    await advance(clock, 100);
    assert.equal(a.elector.isLeader(), false);
    assert.equal(leading.aborted, true);
    assert.deepEqual(a.events, ["leader=a", "started@0", "stopped@16000"]);
    assert.deepEqual(a.status, [false, true, false]);
    assert.deepEqual(lines, ["failed to renew lease: leadership lost"]);
    await a.done;
  });

  test("keeps retrying failed renewals every retryPeriod until renewDeadline", async () => {
    const store = new MemoryLeases();
    const clock = new FakeClock();
    const a = candidate(store, clock, "a");
    await settle();
    store.mode = "fail";
    store.calls.length = 0;
    await advance(clock, RETRY + RENEW); // attempts at 2, 4, …, 10 s; deadline at 12 s
    assert.equal(a.elector.isLeader(), false);
    assert.equal(a.events.at(-1), "stopped@12000");
    // Each attempt: fast-path replace, then the slow path's read (which fails too).
    assert.deepEqual(store.calls, Array<string[]>(5).fill(["replace", "read"]).flat());
    await a.done;
  });

  test("healthz check fails once the record names us but was not renewed for leaseDuration + tolerance", async () => {
    const store = new MemoryLeases();
    const clock = new FakeClock();
    const a = candidate(store, clock, "a");
    const b = candidate(store, clock, "b");
    await settle();
    assert.equal(a.elector.check(5_000), undefined);
    store.mode = "fail";
    await advance(clock, LEASE + 5_000); // a lost leadership at 12 s but (wedged) did not exit
    assert.equal(a.elector.check(5_000), undefined);
    await advance(clock, 100);
    assert.match(
      a.elector.check(5_000)?.message ?? "",
      /failed election to renew leadership on lease default\/test/,
    );
    assert.equal(b.elector.check(5_000), undefined, "a standby is always healthy");
    b.stop();
    await Promise.all([a.done, b.done]);
  });

  test("counts transitions across takeover, release and re-acquisition", async () => {
    const store = new MemoryLeases();
    const clock = new FakeClock();
    const a = candidate(store, clock, "a");
    await settle();
    const b = candidate(store, clock, "b", { releaseOnCancel: true });
    await settle();
    assert.equal(a.elector.isLeader(), true);
    assert.equal(store.spec.leaseTransitions, 0);

    // a stops without releasing: b, which first saw a's record at 0 s, takes over when it expires at 15 s.
    a.stop();
    await a.done;
    assert.equal(store.spec.holderIdentity, "a");
    await advance(clock, LEASE + RETRY);
    assert.equal(b.elector.isLeader(), true);
    assert.equal(store.spec.leaseTransitions, 1);

    // b releases: empty holder, 1 s lease, transitions kept; a new candidate takes it at once.
    b.stop();
    await b.done;
    assert.deepEqual(
      { holder: store.spec.holderIdentity, seconds: store.spec.leaseDurationSeconds },
      { holder: "", seconds: 1 },
    );
    assert.equal(store.spec.leaseTransitions, 1);
    const c = candidate(store, clock, "c");
    await settle();
    assert.equal(c.elector.isLeader(), true);
    assert.equal(store.spec.leaseTransitions, 2);
    c.stop();
    await c.done;
  });

  test("of two candidates racing for a free lease, the stale write gets 409 and loses", async () => {
    const store = new MemoryLeases();
    store.write({ holderIdentity: "", leaseDurationSeconds: 1, leaseTransitions: 3 });
    const clock = new FakeClock();
    const a = candidate(store, clock, "a");
    const b = candidate(store, clock, "b");
    await settle();
    assert.deepEqual(
      [a.elector.isLeader(), b.elector.isLeader()],
      [true, false],
      "both read version 1, a's replace landed first",
    );
    assert.equal(store.spec.leaseTransitions, 4, "one transition, not two");
    await advance(clock, RETRY);
    assert.equal(b.elector.getLeader(), "a");
    assert.deepEqual(b.events, ["leader=a"]);
    a.stop();
    b.stop();
    await Promise.all([a.done, b.done]);
  });

  test("stopping aborts the leading signal, and release is skipped if someone else holds the lease", async () => {
    const store = new MemoryLeases();
    const clock = new FakeClock();
    const a = candidate(store, clock, "a", { releaseOnCancel: true });
    await settle();
    store.write({ holderIdentity: "intruder", leaseDurationSeconds: 15, leaseTransitions: 1 });
    a.stop();
    await a.done;
    assert.equal(a.leading?.aborted, true);
    assert.equal(store.spec.holderIdentity, "intruder");
  });
});

/** A stand-in for the Lease's informer: emit() delivers a record as its watch would, JSON times and all. */
function leaseWatch(): {
  watchLease: NonNullable<LeaderElectionConfig["watchLease"]>;
  emit: (spec: V1LeaseSpec | undefined) => void;
  /** Delivers to the last subscriber even after it unsubscribed, as a careless watch might. */
  emitLate: (spec: V1LeaseSpec | undefined) => void;
  readonly subscribed: boolean;
} {
  let listener: ((spec: V1LeaseSpec | undefined) => void) | undefined;
  let last: typeof listener;
  const wire = (spec: V1LeaseSpec | undefined) => spec && (JSON.parse(JSON.stringify(spec)) as V1LeaseSpec);
  return {
    watchLease: (onChange) => {
      listener = last = onChange;
      return () => {
        listener = undefined;
      };
    },
    emit: (spec) => listener?.(wire(spec)),
    emitLate: (spec) => last?.(wire(spec)),
    get subscribed() {
      return listener !== undefined;
    },
  };
}

describe("LeaderElector watching its Lease", () => {
  const held = (n: number): V1LeaseSpec => ({
    holderIdentity: "other",
    leaseDurationSeconds: 15,
    renewTime: `2000-01-01T00:00:${String(n).padStart(2, "0")}.000000Z` as unknown as V1MicroTime,
    leaseTransitions: 2,
  });
  const released: V1LeaseSpec = { holderIdentity: "", leaseDurationSeconds: 1, leaseTransitions: 2 };
  /** Candidate b watching a Lease other holds (renewed at 0 s), `ms` later. */
  async function watchingCandidate(ms: number) {
    const store = new MemoryLeases();
    store.write(held(0));
    const clock = new FakeClock();
    const watch = leaseWatch();
    const b = candidate(store, clock, "b", { watchLease: watch.watchLease });
    await advance(clock, ms);
    return { store, clock, watch, b };
  }

  test("takes over the moment a watched release arrives, not at its next attempt", async () => {
    const { store, watch, b } = await watchingCandidate(500);
    assert.equal(b.elector.isLeader(), false);
    store.write(released);
    watch.emit(store.spec);
    await settle();
    assert.deepEqual(b.events, ["leader=other", "leader=", "leader=b", "started@500"]);
    assert.equal(store.spec.leaseTransitions, 3);
    assert.equal(watch.subscribed, false, "a leader no longer watches");
    b.stop();
    await b.done;
  });

  test("a leader ignores a watched record delivered after it acquired", async () => {
    const { store, watch, b } = await watchingCandidate(500);
    store.write(released);
    watch.emit(store.spec);
    await settle();
    assert.equal(b.elector.isLeader(), true);
    watch.emitLate(held(0)); // other's old record, late
    assert.equal(b.elector.isLeader(), true);
    assert.equal(b.elector.getLeader(), "b");
    b.stop();
    await b.done;
  });

  test("a watched renewal restarts the expiry clock: takeover exactly a lease duration after it", async () => {
    const { store, clock, watch, b } = await watchingCandidate(1_000);
    // Renewed at 1 s and seen then by the watch; the next attempt (2 s) would have seen it a second later.
    store.write(held(1));
    watch.emit(store.spec);
    await advance(clock, 14_900);
    assert.equal(b.elector.isLeader(), false);
    await advance(clock, 100);
    assert.equal(b.elector.isLeader(), true);
    assert.ok(b.events.includes("started@16000"), b.events.join());
    b.stop();
    await b.done;
  });

  test("a watched record is only a reason to try: a stale release never takes a live lease", async () => {
    const { store, watch, b } = await watchingCandidate(1_000);
    watch.emit(released); // the store still holds other's record, renewed since
    store.write(held(1));
    await settle();
    assert.equal(b.elector.isLeader(), false);
    assert.equal(store.spec.holderIdentity, "other");
    assert.equal(b.elector.getLeader(), "other");
    b.stop();
    await b.done;
  });

  test("an attempt that fails on a released lease is retried after the jittered wait, not in a loop", async () => {
    const { store, clock, watch, b } = await watchingCandidate(500);
    store.write(released);
    store.mode = "fail";
    store.calls.length = 0;
    watch.emit(store.spec);
    await advance(clock, 10_000);
    // One attempt on the release (at 0.5 s), then one every retryPeriod from there.
    assert.deepEqual(store.calls, ["read", "read", "read", "read", "read", "read"]);
    b.stop();
    await b.done;
  });

  test("a watched delete lets a candidate create the Lease at once", async () => {
    const { store, watch, b } = await watchingCandidate(500);
    store.stored = undefined;
    watch.emit(undefined);
    await settle();
    assert.equal(b.elector.isLeader(), true);
    assert.equal(store.spec.holderIdentity, "b");
    b.stop();
    await b.done;
  });
});

describe("LeaderElector fencing", () => {
  test("a lost lease is not released, even with releaseOnCancel, so the process can exit at once", async () => {
    const store = new MemoryLeases();
    const clock = new FakeClock();
    const a = candidate(store, clock, "a", { releaseOnCancel: true });
    await settle();
    store.mode = "fail";
    store.calls.length = 0;
    await advance(clock, RETRY + RENEW);
    assert.equal(a.events.at(-1), "stopped@12000");
    await a.done;
    // The five failed renewals (fast-path replace, then read), and no release's read after them.
    assert.deepEqual(store.calls, Array<string[]>(5).fill(["replace", "read"]).flat());
  });

  test("a renewal that finds another holder stops leading at once, not at renewDeadline", async () => {
    const store = new MemoryLeases();
    const clock = new FakeClock();
    const renewals: number[] = [];
    const { logger, lines } = warnings();
    const a = candidate(store, clock, "a", { onRenewed: (at) => renewals.push(at), logger });
    await advance(clock, RETRY);
    // Acquire, the immediate first renewal, then one every retryPeriod: each reported when sent.
    assert.deepEqual(renewals, [0, 0, RETRY]);
    // Paused past the lease: another replica took it over meanwhile.
    store.write({ holderIdentity: "b", leaseDurationSeconds: 15, leaseTransitions: 1 });
    await advance(clock, RETRY);
    assert.equal(a.elector.isLeader(), false);
    assert.equal(a.events.at(-1), `stopped@${2 * RETRY}`);
    assert.deepEqual(renewals, [0, 0, RETRY]);
    assert.deepEqual(lines, ["lease is held by another replica: leadership lost (holder b)"]);
    await a.done;
  });

  test("a Lease it cannot access is reported once per cause, and cleared when it works again", async () => {
    const store = new MemoryLeases();
    const clock = new FakeClock();
    const reports: (string | undefined)[] = [];
    store.mode = "fail";
    const a = candidate(store, clock, "a", { onLeaseError: (err) => reports.push(err?.message) });
    await advance(clock, 5 * RETRY);
    assert.deepEqual(reports, ["lease default/test: error retrieving lease lock: InternalError"]);
    store.mode = "ok";
    await advance(clock, RETRY);
    assert.deepEqual(reports.slice(1), [undefined]);
    assert.equal(a.elector.isLeader(), true);
    a.stop();
    await a.done;
  });
});
