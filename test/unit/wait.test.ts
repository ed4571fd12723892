import assert from "node:assert/strict";
import { test } from "node:test";
import { FakeClock } from "../../src/runtime/clock.js";
import { abortedWhen, until, waitFor } from "../../src/util/wait.js";

test("waitFor returns the first truthy value the check produces", async () => {
  let calls = 0;
  const value = await waitFor(() => (++calls >= 3 ? "done" : undefined), {
    timeoutMs: 5_000,
    intervalMs: 1,
    what: "x",
  });
  assert.equal(value, "done");
  assert.equal(calls, 3);
});

test("waitFor fails at the deadline naming what it waited for and the last error", async () => {
  await assert.rejects(
    waitFor(
      () => {
        throw new Error("still 404");
      },
      { timeoutMs: 20, intervalMs: 1, what: "PVC default/a to be Bound" },
    ),
    /timed out after 20 ms waiting for PVC default\/a to be Bound: still 404/,
  );
});

test("waitFor stops when its signal aborts", async () => {
  const ac = new AbortController();
  const pending = waitFor(() => false, {
    timeoutMs: 60_000,
    intervalMs: 1,
    what: "never",
    signal: ac.signal,
  });
  ac.abort(new Error("cancelled"));
  await assert.rejects(pending, /cancelled/);
});

test("abortedWhen aborts with the reason built from the settled value, or without one on rejection", async () => {
  const resolved = abortedWhen(Promise.resolve(3), (code) => new Error(`exited ${String(code)}`));
  const rejected = abortedWhen(
    Promise.reject(new Error("spawn failed")),
    (code) => new Error(`exited ${String(code)}`),
  );
  const pending = abortedWhen(new Promise<number>(() => undefined), () => new Error("never"));
  await new Promise(setImmediate);
  assert.equal((resolved.reason as Error).message, "exited 3");
  assert.equal((rejected.reason as Error).message, "exited undefined");
  assert.equal(pending.aborted, false);
});

test("until runs at once, then a period after each run ends, and resolves when its signal aborts", async () => {
  const clock = new FakeClock();
  const ac = new AbortController();
  const runs: number[] = [];
  const done = until(
    () => {
      runs.push(clock.now());
    },
    100,
    { clock, signal: ac.signal },
  );
  const settle = () => new Promise((resolve) => setImmediate(resolve));
  await settle();
  assert.deepEqual(runs, [0]);
  clock.advance(99);
  await settle();
  assert.deepEqual(runs, [0], "not before the period");
  clock.advance(1);
  await settle();
  clock.advance(100);
  await settle();
  assert.deepEqual(runs, [0, 100, 200]);
  ac.abort();
  await done;
  clock.advance(1_000);
  await settle();
  assert.deepEqual(runs, [0, 100, 200], "no run after the abort");
  assert.equal(clock.pendingTimers, 0, "its timer is cancelled");
});

test("until ends with the error its function throws", async () => {
  const clock = new FakeClock();
  await assert.rejects(
    until(
      () => {
        throw new Error("broken");
      },
      100,
      { clock, signal: new AbortController().signal },
    ),
    /broken/,
  );
});

test("waitFor keeps its deadline on the clock it is given", async () => {
  const clock = new FakeClock();
  let checks = 0;
  const pending = waitFor(() => (++checks, false), { timeoutMs: 300, intervalMs: 100, what: "x", clock });
  const rejected = assert.rejects(pending, /timed out after 300 ms waiting for x/);
  for (let i = 0; i < 3; i++) {
    await new Promise((resolve) => setImmediate(resolve));
    clock.advance(100);
  }
  await rejected;
  assert.equal(checks, 4, "at 0, 100, 200 and 300 ms");
});
