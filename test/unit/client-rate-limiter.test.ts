import assert from "node:assert/strict";
import { test } from "node:test";
import fc from "fast-check";
import { deadline, FakeClock, realClock } from "../../src/runtime/clock.js";
import { ClientRateLimiter, RateLimiterError } from "../../src/runtime/client.js";

/** Issues n requests at once and returns the fake time (ms) at which each was let through. */
async function admissionTimes(qps: number, burst: number, n: number): Promise<number[]> {
  const clock = new FakeClock();
  const limiter = new ClientRateLimiter(qps, burst, clock);
  const times: number[] = [];
  const all = Promise.all(
    Array.from({ length: n }, () =>
      limiter.wait().then(() => {
        times.push(clock.now());
      }),
    ),
  );
  const step = 1000 / (qps || 5); // 0 means the default of 5
  while (times.length < n) {
    await Promise.resolve(); // let resolved waits record their time before the clock moves on
    await Promise.resolve();
    if (times.length < n) clock.advance(step);
  }
  await all;
  return times;
}

test("N requests at QPS q with burst b take at least (N - b) / q seconds", async () => {
  await fc.assert(
    fc.asyncProperty(
      fc.integer({ min: 1, max: 50 }),
      fc.integer({ min: 1, max: 20 }),
      fc.integer({ min: 1, max: 120 }),
      async (qps, burst, requests) => {
        const n = Math.min(requests, burst + 60 * qps); // within the 60 s floor (tested below)
        const times = await admissionTimes(qps, burst, n);
        const last = Math.max(...times);
        const bound = (Math.max(0, n - burst) / qps) * 1000;
        assert.ok(last >= bound - 1e-6, `last admission at ${last} ms, bound ${bound} ms`);
        // and no slower than needed: the k-th request waits for exactly (k - b) refills
        assert.ok(last <= bound + 1000 / qps + 1e-6, `last admission at ${last} ms, bound ${bound} ms`);
        assert.equal(
          times.filter((t) => t === 0).length,
          Math.min(n, burst),
          "the burst goes through at once",
        );
      },
    ),
    { numRuns: 60 },
  );
});

test("KCM's defaults: 20 qps, burst 30 — 100 requests need 3.5 s", async () => {
  const times = await admissionTimes(20, 30, 100);
  assert.equal(Math.max(...times), 3500);
});

test("a negative qps disables limiting; 0 means client-go's default of 5", async () => {
  const clock = new FakeClock();
  const unlimited = new ClientRateLimiter(-1, 1, clock);
  await Promise.all(Array.from({ length: 1000 }, () => unlimited.wait()));
  const times = await admissionTimes(0, 1, 3);
  assert.deepEqual(times, [0, 200, 400]);
});

const expired = () => new Error("deadline exceeded");

test(
  "qps 1: 100 requests with a 50 ms deadline all reject within about 50 ms, leaving no debt",
  { timeout: 20_000 },
  async () => {
    const limiter = new ClientRateLimiter(1, 1);
    await limiter.wait(); // the burst: every later token is a second away
    const started = performance.now();
    const deadlines = Array.from({ length: 100 }, () => deadline(realClock, 50, expired));
    const outcomes = await Promise.allSettled(deadlines.map((d) => limiter.wait(d.signal)));
    const elapsed = performance.now() - started;
    for (const d of deadlines) d.cancel();
    assert.deepEqual(
      outcomes.map((o) => o.status),
      Array<string>(100).fill("rejected"),
    );
    // At once, in fact: a 1 s wait cannot fit a 50 ms deadline. Unbounded, the last would wait 100 s.
    assert.ok(elapsed < 1_000, `took ${elapsed} ms`);
    const [first] = outcomes;
    assert.ok(first?.status === "rejected" && first.reason instanceof RateLimiterError);
    assert.match(String(first.reason), /would exceed the request's deadline/);
  },
);

test(
  "a wait whose signal has no known deadline ends when the signal aborts",
  { timeout: 20_000 },
  async () => {
    const limiter = new ClientRateLimiter(1, 1);
    await limiter.wait();
    const started = performance.now();
    const outcomes = await Promise.allSettled(
      Array.from({ length: 100 }, () => limiter.wait(AbortSignal.timeout(50))),
    );
    const elapsed = performance.now() - started;
    // Those within the 60 s floor end when their signal aborts; the rest are refused at once.
    assert.ok(outcomes.every((o) => o.status === "rejected"));
    assert.equal(outcomes.filter((o) => (o.reason as Error).name === "TimeoutError").length, 60);
    assert.ok(elapsed < 1_000, `took ${elapsed} ms`);
  },
);

/** Lets the microtasks of settled waits run (FakeClock timers resolve promises synchronously). */
const settle = async () => {
  for (let i = 0; i < 5; i++) await Promise.resolve();
};

test("refused and abandoned waits give their tokens back: the next request waits only for its own", async () => {
  const clock = new FakeClock();
  const limiter = new ClientRateLimiter(1, 1, clock);
  await limiter.wait();
  const refused = await Promise.allSettled(
    Array.from({ length: 100 }, () => limiter.wait(deadline(clock, 50, expired).signal)),
  );
  assert.ok(refused.every((o) => o.status === "rejected"));
  const abandoned = new AbortController();
  const gaveUp = limiter.wait(abandoned.signal);
  clock.advance(500);
  abandoned.abort(new Error("caller gone"));
  await assert.rejects(gaveUp, /caller gone/);
  let at: number | undefined;
  void limiter.wait().then(() => (at = clock.now()));
  clock.advance(499);
  await settle();
  assert.equal(at, undefined);
  clock.advance(1);
  await settle();
  assert.equal(
    at,
    1_000,
    "one token a second from the start: neither the refused nor the abandoned wait took one",
  );
});

test("the debt has a floor: without a deadline a request waits at most 60 s, beyond that it is refused at once", async () => {
  const clock = new FakeClock();
  const limiter = new ClientRateLimiter(1, 1, clock);
  const outcomes: unknown[] = [];
  const waits = Array.from({ length: 100 }, () =>
    limiter.wait().then(
      () => void outcomes.push(clock.now()),
      (err: unknown) => void outcomes.push(err),
    ),
  );
  await settle();
  const refused = outcomes.filter((o) => o instanceof RateLimiterError);
  assert.equal(
    refused.length,
    39,
    "the burst and 60 s of tokens are granted, the rest refused before any time passes",
  );
  assert.match(String(refused[0]), /would take longer than 60 s/);
  clock.advance(60_000);
  await Promise.all(waits);
  assert.equal(Math.max(...outcomes.filter((o) => typeof o === "number")), 60_000);
});

test("driven at 1,000 requests/s, a 200 qps limiter admits 200/s within each request's 10 s deadline and refuses the rest at once", async () => {
  const clock = new FakeClock();
  const limiter = new ClientRateLimiter(200, 400, clock);
  let admitted = 0;
  let refused = 0;
  let pending = 0;
  let maxPending = 0;
  let longestWait = 0;
  for (let ms = 0; ms < 15_000; ms++) {
    if (ms >= 5_000) {
      // The flood is over: time passes for the waits still queued.
      await settle();
      clock.advance(1);
      continue;
    }
    const sentAt = clock.now();
    const d = deadline(clock, 10_000, expired);
    pending++;
    void limiter.wait(d.signal).then(
      () => {
        d.cancel();
        pending--;
        admitted++;
        longestWait = Math.max(longestWait, clock.now() - sentAt);
      },
      () => {
        pending--;
        refused++;
      },
    );
    await settle();
    maxPending = Math.max(maxPending, pending);
    clock.advance(1);
  }
  await settle();
  assert.equal(pending, 0);
  assert.ok(longestWait <= 10_000, `a request waited ${longestWait} ms, past its deadline`);
  // 400 at once, then 200 a second for the 5 s of sending and the 10 s the last ones may wait.
  assert.ok(admitted <= 400 + 200 * 15 + 1 && admitted >= 400 + 200 * 14, `admitted ${admitted}`);
  assert.equal(admitted + refused, 5_000);
  assert.ok(maxPending <= 200 * 10 + 1, `${maxPending} requests waiting at once`);
  // Refusals took no token: the moment the flood's waits have drained, a request passes at once.
  let at: number | undefined;
  void limiter.wait().then(() => (at = clock.now()));
  await settle();
  assert.equal(at, clock.now());
});
