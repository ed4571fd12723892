import assert from "node:assert/strict";
import { test } from "node:test";
import fc from "fast-check";
import { FakeClock } from "../../src/runtime/clock.js";
import { DelayingQueue } from "../../src/runtime/workqueue/index.js";

const keyArb = fc.constantFrom("ns/a", "ns/b", "ns/c", "ns/d");

type Op = { kind: "addAfter"; item: string; ms: number } | { kind: "advance"; ms: number };

const opArb: fc.Arbitrary<Op> = fc.oneof(
  fc.record({ kind: fc.constant("addAfter" as const), item: keyArb, ms: fc.integer({ min: -5, max: 60 }) }),
  fc.record({ kind: fc.constant("advance" as const), ms: fc.integer({ min: 0, max: 40 }) }),
);

/** Takes (and finishes) everything queued now. */
async function drain(q: DelayingQueue): Promise<Set<string>> {
  const got = new Set<string>();
  while (q.len() > 0) {
    const item = (await q.get())!;
    got.add(item);
    q.done(item);
  }
  return got;
}

test("addAfter makes an item ready at the earliest time asked for while it waited", async () => {
  await fc.assert(
    fc.asyncProperty(fc.array(opArb, { maxLength: 40 }), async (ops) => {
      const clock = new FakeClock(1_000);
      const q = new DelayingQueue({ clock });
      // Model: ready time per waiting item, and the items that became ready since the last check.
      const waiting = new Map<string, number>();
      let ready = new Set<string>();
      for (const op of ops) {
        if (op.kind === "addAfter") {
          q.addAfter(op.item, op.ms);
          const at = clock.now() + op.ms;
          if (op.ms <= 0) ready.add(op.item);
          else if (!(at >= (waiting.get(op.item) ?? Infinity))) waiting.set(op.item, at);
        } else {
          clock.advance(op.ms);
          for (const [item, at] of waiting) {
            if (at > clock.now()) continue;
            waiting.delete(item);
            ready.add(item);
          }
        }
        assert.deepEqual(await drain(q), ready, `after ${JSON.stringify(op)} at ${clock.now()}`);
        ready = new Set();
        assert.ok(clock.pendingTimers <= 1, "one timer, for the earliest item");
      }
    }),
  );
});

test("a later addAfter does not postpone a waiting item; an earlier one moves it up", async () => {
  const clock = new FakeClock();
  const q = new DelayingQueue({ clock });
  q.addAfter("ns/a", 100);
  q.addAfter("ns/a", 500);
  q.addAfter("ns/b", 100);
  q.addAfter("ns/b", 10);
  clock.advance(10);
  assert.deepEqual(await drain(q), new Set(["ns/b"]));
  clock.advance(90);
  assert.deepEqual(await drain(q), new Set(["ns/a"]));
  clock.advance(1_000);
  assert.equal(q.len(), 0);
});

test("shutdown cancels the delay timer and drops waiting items", async () => {
  await fc.assert(
    fc.asyncProperty(
      fc.array(fc.tuple(keyArb, fc.integer({ min: 1, max: 100 })), { minLength: 1 }),
      fc.boolean(),
      async (adds, withDrain) => {
        const clock = new FakeClock();
        const q = new DelayingQueue({ clock });
        for (const [item, ms] of adds) q.addAfter(item, ms);
        assert.equal(clock.pendingTimers, 1);
        if (withDrain) await q.shutDownWithDrain();
        else q.shutDown();
        assert.equal(clock.pendingTimers, 0);
        clock.advance(1_000);
        q.addAfter("ns/late", 0);
        assert.equal(q.len(), 0);
        assert.equal(await q.get(), undefined);
      },
    ),
  );
});
