import assert from "node:assert/strict";
import { test } from "node:test";
import { abortedWhen, waitFor } from "../../src/util/wait.js";

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
