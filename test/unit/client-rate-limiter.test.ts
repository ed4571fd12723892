import assert from "node:assert/strict";
import { test } from "node:test";
import fc from "fast-check";
import { FakeClock } from "../../src/runtime/clock.js";
import { ClientRateLimiter } from "../../src/runtime/client.js";

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
      async (qps, burst, n) => {
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
