import assert from "node:assert/strict";
import { test } from "node:test";
import fc from "fast-check";
import { Queue, runWorkers } from "../../src/runtime/workqueue/index.js";

const keyArb = fc.constantFrom("ns/a", "ns/b", "ns/c", "ns/d", "ns/e");

/** Whether `p` is still pending once every callback already due has run (no timed wait). */
async function isPending(p: Promise<unknown>): Promise<boolean> {
  let settled = false;
  const mark = () => {
    settled = true;
  };
  void p.then(mark, mark);
  await new Promise<void>((resolve) => setImmediate(resolve));
  return !settled;
}

test("a key added again while queued is queued once, in first-add order", async () => {
  await fc.assert(
    fc.asyncProperty(fc.array(keyArb, { maxLength: 30 }), async (adds) => {
      const q = new Queue();
      for (const key of adds) q.add(key);
      const distinct = [...new Set(adds)];
      assert.equal(q.len(), distinct.length);
      const got: string[] = [];
      while (q.len() > 0) got.push((await q.get())!);
      assert.deepEqual(got, distinct);
    }),
  );
});

test("adds while a key is processing collapse into exactly one re-run after done()", async () => {
  await fc.assert(
    fc.asyncProperty(keyArb, fc.nat({ max: 10 }), async (key, addsDuringProcessing) => {
      const q = new Queue();
      q.add(key);
      assert.equal(await q.get(), key);
      for (let i = 0; i < addsDuringProcessing; i++) q.add(key);
      // Not handed out while it is being processed.
      assert.equal(q.len(), 0);
      const next = q.get();
      assert.ok(await isPending(next));
      q.done(key);
      if (addsDuringProcessing === 0) {
        assert.ok(await isPending(next));
        return;
      }
      assert.equal(await isPending(next), false, "the re-run was not handed out");
      assert.equal(await next, key);
      q.done(key);
      assert.equal(q.len(), 0);
      assert.ok(await isPending(q.get()));
    }),
  );
});

test("concurrent workers never hold the same key at once, and each key runs after its last add", async () => {
  await fc.assert(
    fc.asyncProperty(
      fc.scheduler(),
      fc.array(keyArb, { minLength: 1, maxLength: 25 }),
      fc.integer({ min: 1, max: 4 }),
      async (s, adds, concurrency) => {
        const q = new Queue();
        const active = new Set<string>();
        let overlaps = 0;
        let maxActive = 0;
        let step = 0;
        const lastAdd = new Map<string, number>();
        const lastStart = new Map<string, number>();
        const runs = new Map<string, number>();
        const ac = new AbortController();
        const workers = runWorkers(
          q,
          concurrency,
          async (key) => {
            if (active.has(key)) overlaps++;
            active.add(key);
            maxActive = Math.max(maxActive, active.size);
            lastStart.set(key, ++step);
            runs.set(key, (runs.get(key) ?? 0) + 1);
            await s.schedule(Promise.resolve(), `process ${key}`);
            active.delete(key);
          },
          ac.signal,
          (key, err) => assert.fail(`handler failed for ${key}: ${String(err)}`),
        );
        const sequence = s.scheduleSequence(
          adds.map((key) => ({
            label: `add ${key}`,
            builder: () => {
              lastAdd.set(key, ++step);
              q.add(key);
              return Promise.resolve();
            },
          })),
        );
        // Workers yield to the event loop between keys: settle until a yield schedules nothing more.
        do {
          await s.waitIdle();
          await new Promise(setImmediate);
        } while (s.count() > 0);

        assert.ok(sequence.done);
        assert.equal(overlaps, 0);
        assert.ok(maxActive <= concurrency, `${maxActive} keys in flight with ${concurrency} workers`);
        for (const [key, added] of lastAdd) {
          assert.ok((lastStart.get(key) ?? 0) > added, `${key} not processed after its last add`);
          const addCount = adds.filter((k) => k === key).length;
          assert.ok(runs.get(key)! <= addCount, `${key} ran more often than it was added`);
        }
        assert.equal(q.len(), 0);
        ac.abort();
        await workers;
      },
    ),
  );
});

test("shutDown wakes every waiting get() with undefined and rejects later adds", async () => {
  await fc.assert(
    fc.asyncProperty(fc.integer({ min: 1, max: 5 }), fc.array(keyArb), async (waiters, later) => {
      const q = new Queue();
      const gets = Array.from({ length: waiters }, () => q.get());
      for (const get of gets) assert.ok(await isPending(get));
      q.shutDown();
      assert.ok(q.shuttingDown());
      assert.deepEqual(await Promise.all(gets), Array<undefined>(waiters).fill(undefined));
      for (const key of later) q.add(key);
      assert.equal(q.len(), 0);
      assert.equal(await q.get(), undefined);
    }),
  );
});

test("after shutDown, get() no longer hands out queued keys", async () => {
  await fc.assert(
    fc.asyncProperty(fc.array(keyArb, { minLength: 1 }), async (adds) => {
      const q = new Queue();
      for (const key of adds) q.add(key);
      q.shutDown();
      assert.equal(await q.get(), undefined);
    }),
  );
});

test("shutDownWithDrain hands out queued keys and resolves only when none is queued or processing", async () => {
  await fc.assert(
    fc.asyncProperty(
      fc.uniqueArray(keyArb, { minLength: 1 }),
      fc.nat(),
      fc.infiniteStream(fc.nat()),
      async (keys, takenBefore, picks) => {
        const q = new Queue();
        for (const key of keys) q.add(key);
        const processing: string[] = [];
        for (let i = 0; i < takenBefore % (keys.length + 1); i++) processing.push((await q.get())!);

        const drained = q.shutDownWithDrain();
        q.add("ns/late");
        // Queued keys are still handed out while draining, and are waited for too.
        while (q.len() > 0) {
          assert.ok(await isPending(drained), "drain resolved while keys were still queued");
          processing.push((await q.get())!);
        }
        assert.deepEqual([...processing].sort(), [...keys].sort());
        assert.equal(await q.get(), undefined);

        const order = picks[Symbol.iterator]();
        while (processing.length > 0) {
          assert.ok(await isPending(drained), "drain resolved while keys were still processing");
          const [key] = processing.splice(order.next().value % processing.length, 1);
          q.done(key!);
        }
        await drained;
      },
    ),
  );
});

test("shutDown during a drain stops the drain from waiting", async () => {
  const q = new Queue();
  q.add("ns/a");
  await q.get();
  const drained = q.shutDownWithDrain();
  assert.ok(await isPending(drained));
  q.shutDown();
  await drained;
});
