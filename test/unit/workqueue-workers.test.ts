import assert from "node:assert/strict";
import { test } from "node:test";
import fc from "fast-check";
import { Queue, runWorkers } from "../../src/runtime/workqueue/index.js";

async function isPending(p: Promise<unknown>): Promise<boolean> {
  let settled = false;
  const mark = () => {
    settled = true;
  };
  void p.then(mark, mark);
  await new Promise<void>((resolve) => setImmediate(resolve));
  return !settled;
}

test("runWorkers hands handler errors to onError and keeps every worker going", async () => {
  await fc.assert(
    fc.asyncProperty(
      fc.uniqueArray(fc.tuple(fc.string({ minLength: 1 }), fc.boolean()), {
        minLength: 1,
        selector: ([key]) => key,
      }),
      fc.integer({ min: 1, max: 4 }),
      fc.boolean(),
      async (items, concurrency, onErrorThrows) => {
        const q = new Queue();
        const failing = new Set(items.filter(([, fails]) => fails).map(([key]) => key));
        const errors: string[] = [];
        const handled: string[] = [];
        const allHandled = Promise.withResolvers<undefined>();
        const ac = new AbortController();
        const run = runWorkers(
          q,
          concurrency,
          (key) => {
            handled.push(key);
            if (handled.length === items.length) allHandled.resolve(undefined);
            return failing.has(key) ? Promise.reject(new Error(key)) : Promise.resolve();
          },
          ac.signal,
          (key, err) => {
            errors.push(`${key}: ${(err as Error).message}`);
            if (onErrorThrows) throw new Error("onError failed too");
          },
        );
        for (const [key] of items) q.add(key);
        await allHandled.promise;
        await q.shutDownWithDrain();
        await run;
        assert.deepEqual(handled.sort(), items.map(([key]) => key).sort());
        assert.deepEqual(errors.sort(), [...failing].map((key) => `${key}: ${key}`).sort());
      },
    ),
  );
});

test("runWorkers runs exactly `concurrency` keys at once; abort waits for them and drops the rest", async () => {
  const q = new Queue();
  const started: string[] = [];
  const release = Promise.withResolvers<undefined>();
  const ac = new AbortController();
  const run = runWorkers(
    q,
    3,
    async (key) => {
      started.push(key);
      await release.promise;
    },
    ac.signal,
    () => assert.fail("no handler fails"),
  );
  for (const key of ["ns/a", "ns/b", "ns/c", "ns/d", "ns/e"]) q.add(key);
  assert.ok(await isPending(run));
  assert.deepEqual(started, ["ns/a", "ns/b", "ns/c"]);

  ac.abort();
  assert.ok(q.shuttingDown());
  assert.ok(await isPending(run), "returned before the running handlers finished");
  release.resolve(undefined);
  await run;
  assert.deepEqual(started, ["ns/a", "ns/b", "ns/c"]);
});

test("a worker draining a queue of keys that need no I/O lets I/O callbacks and timers run between keys", async () => {
  const q = new Queue();
  const keys = Array.from({ length: 1000 }, (_, i) => `ns/claim-${i}`);
  for (const key of keys) q.add(key);
  let handled = 0;
  const ac = new AbortController();
  const run = runWorkers(
    q,
    1,
    () => {
      handled++;
      return Promise.resolve();
    },
    ac.signal,
    () => assert.fail("no handler fails"),
  );
  // An immediate stands for a response or watch event that arrives while the worker is busy.
  const seenAtImmediate = await new Promise<number>((resolve) =>
    setImmediate(() => {
      resolve(handled);
    }),
  );
  assert.ok(seenAtImmediate < keys.length, `the worker ran all ${keys.length} keys before any I/O`);
  await q.shutDownWithDrain();
  await run;
  assert.equal(handled, keys.length);
});
