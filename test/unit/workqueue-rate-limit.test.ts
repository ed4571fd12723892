import assert from "node:assert/strict";
import { test } from "node:test";
import fc from "fast-check";
import { FakeClock } from "../../src/runtime/clock.js";
import {
  defaultControllerRateLimiter,
  ItemExponentialFailureRateLimiter,
  RateLimitingQueue,
  TokenBucket,
} from "../../src/runtime/workqueue/index.js";

const keyArb = fc.constantFrom("ns/a", "ns/b", "ns/c");
const backoff = (failures: number) => Math.min(5 * 2 ** failures, 1_000_000);
function close(actual: number, expected: number): void {
  assert.ok(Math.abs(actual - expected) <= 1e-6 * Math.max(1, expected), `${actual} != ${expected}`);
}

test("per-item backoff is 5 ms * 2^failures capped at 1000 s; forget resets it; numRequeues counts", () => {
  fc.assert(
    fc.property(fc.array(fc.tuple(fc.constantFrom("when", "forget"), keyArb), { maxLength: 60 }), (ops) => {
      const limiter = new ItemExponentialFailureRateLimiter();
      const failures = new Map<string, number>();
      for (const [op, item] of ops) {
        const n = failures.get(item) ?? 0;
        if (op === "when") {
          assert.equal(limiter.when(item), backoff(n));
          failures.set(item, n + 1);
        } else {
          limiter.forget(item);
          failures.delete(item);
        }
        for (const key of ["ns/a", "ns/b", "ns/c"]) {
          assert.equal(limiter.numRequeues(key), failures.get(key) ?? 0);
        }
      }
    }),
  );
});

test("token bucket: a burst is free, then each reservation waits 1/qps more", () => {
  fc.assert(
    fc.property(
      fc.integer({ min: 1, max: 1_000 }),
      fc.integer({ min: 1, max: 300 }),
      fc.integer({ min: 1, max: 600 }),
      (qps, burst, n) => {
        const bucket = new TokenBucket(qps, burst, new FakeClock());
        for (let k = 0; k < n; k++) close(bucket.reserve(), (Math.max(0, k + 1 - burst) * 1000) / qps);
      },
    ),
  );
});

test("token bucket: reservations never exceed burst + qps * window, and keep their order", () => {
  fc.assert(
    fc.property(
      fc.integer({ min: 1, max: 100 }),
      fc.integer({ min: 1, max: 20 }),
      fc.array(fc.oneof(fc.constant(-1), fc.integer({ min: 0, max: 300 })), { maxLength: 150 }),
      (qps, burst, ops) => {
        const clock = new FakeClock();
        const bucket = new TokenBucket(qps, burst, clock);
        const readyAt: number[] = [];
        for (const op of ops) {
          if (op < 0) readyAt.push(clock.now() + bucket.reserve());
          else clock.advance(op);
        }
        for (let i = 0; i < readyAt.length; i++) {
          for (let j = i; j < readyAt.length; j++) {
            const window = readyAt[j]! - readyAt[i]!;
            assert.ok(window >= -1e-6, "a later reservation became ready earlier");
            assert.ok(
              j - i + 1 <= burst + (qps * window) / 1000 + 1e-6,
              "took more tokens than the rate allows",
            );
          }
        }
      },
    ),
  );
});

test("token bucket: a refused reservation takes nothing; a cancelled one gives back only what no later one counts on", () => {
  const clock = new FakeClock();
  const bucket = new TokenBucket(1, 1, clock);
  assert.equal(bucket.reserveWithin(0)?.delayMs, 0);
  assert.equal(bucket.reserveWithin(999), undefined, "a 1 s wait does not fit 999 ms");
  const a = bucket.reserveWithin(1_000);
  const b = bucket.reserveWithin(Infinity);
  assert.deepEqual([a?.delayMs, b?.delayMs], [1_000, 2_000]);
  a?.cancel(); // b, reserved after a, keeps its place: a's token is not handed back
  b?.cancel(); // the last one: its token comes back
  assert.equal(bucket.reserve(), 2_000);
  clock.advance(3_000);
  const late = bucket.reserveWithin(Infinity);
  assert.equal(late?.delayMs, 0);
  late?.cancel(); // nothing to give back once it acted
  assert.equal(bucket.reserve(), 1_000);
});

test("token bucket: tryAccept takes only available tokens, which refill at qps", () => {
  fc.assert(
    fc.property(fc.integer({ min: 1, max: 100 }), fc.integer({ min: 1, max: 50 }), (qps, burst) => {
      const clock = new FakeClock();
      const bucket = new TokenBucket(qps, burst, clock);
      for (let i = 0; i < burst; i++) assert.ok(bucket.tryAccept());
      assert.equal(bucket.tryAccept(), false);
      // Whole milliseconds: at least one token's worth, less than two.
      clock.advance(Math.ceil(1000 / qps));
      assert.ok(bucket.tryAccept());
      assert.equal(bucket.tryAccept(), false);
      clock.advance(1_000_000);
      for (let i = 0; i < burst; i++) assert.ok(bucket.tryAccept());
      assert.equal(bucket.tryAccept(), false);
    }),
  );
});

test("the default controller limiter is the max of per-item backoff and a 10 qps / burst 100 bucket", () => {
  fc.assert(
    fc.property(
      fc.array(fc.oneof(fc.tuple(fc.constantFrom("when", "forget"), keyArb), fc.nat({ max: 500 })), {
        maxLength: 300,
      }),
      (ops) => {
        const clock = new FakeClock();
        const limiter = defaultControllerRateLimiter(clock);
        const perItem = new ItemExponentialFailureRateLimiter(5, 1_000_000);
        const bucket = new TokenBucket(10, 100, clock);
        for (const op of ops) {
          if (typeof op === "number") {
            clock.advance(op);
          } else if (op[0] === "when") {
            close(limiter.when(op[1]), Math.max(perItem.when(op[1]), bucket.reserve()));
          } else {
            limiter.forget(op[1]);
            perItem.forget(op[1]);
          }
          assert.equal(limiter.numRequeues("ns/a"), perItem.numRequeues("ns/a"));
        }
      },
    ),
  );
});

test("addRateLimited re-adds after 5 ms, 10 ms, 20 ms... capped at 1000 s; forget starts over", async () => {
  await fc.assert(
    fc.asyncProperty(fc.integer({ min: 1, max: 24 }), async (failures) => {
      const clock = new FakeClock();
      const q = new RateLimitingQueue({ clock });
      const fail = async (expectedDelay: number) => {
        q.addRateLimited("ns/a");
        clock.advance(expectedDelay - 1);
        assert.equal(q.len(), 0, `ready before ${expectedDelay} ms`);
        clock.advance(1);
        assert.equal(q.len(), 1, `not ready after ${expectedDelay} ms`);
        q.done((await q.get())!);
      };
      for (let i = 0; i < failures; i++) {
        await fail(backoff(i));
        assert.equal(q.numRequeues("ns/a"), i + 1);
      }
      q.forget("ns/a");
      assert.equal(q.numRequeues("ns/a"), 0);
      await fail(5);
    }),
  );
});

test("addRateLimited of many items at once is paced by the global bucket after the burst", () => {
  fc.assert(
    fc.property(fc.integer({ min: 1, max: 250 }), (n) => {
      const clock = new FakeClock();
      const q = new RateLimitingQueue({ clock });
      for (let i = 0; i < n; i++) q.addRateLimited(`ns/item-${i}`);
      // Item i (first failure) is ready at max(5 ms, its bucket slot): slots are free for the first
      // 100, then one every 100 ms.
      const readyAt = Array.from({ length: n }, (_, i) => Math.max(5, (i + 1 - 100) * 100));
      for (const t of new Set(readyAt)) {
        clock.advance(t - 1 - clock.now());
        assert.equal(q.len(), readyAt.filter((r) => r < t).length, `at ${clock.now()} ms`);
        clock.advance(1);
        assert.equal(q.len(), readyAt.filter((r) => r <= t).length, `at ${clock.now()} ms`);
      }
    }),
  );
});
