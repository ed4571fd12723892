import assert from "node:assert/strict";
import { test } from "node:test";
import type { Clock } from "../../src/runtime/clock.js";
import { retryWithInterval } from "../../src/util/retry.js";
import { recordingClock } from "../support/recording-clock.js";

test("retryWithInterval resolves with the first success, waiting the interval after each failure", async () => {
  const clock = recordingClock();
  const calls: number[] = [];
  const value = await retryWithInterval(
    (n) => {
      calls.push(n);
      return n < 3 ? Promise.reject(new Error(`fail ${n}`)) : Promise.resolve("ok");
    },
    { attempts: 5, intervalMs: 10_000, clock },
  );
  assert.equal(value, "ok");
  assert.deepEqual(calls, [1, 2, 3]);
  assert.deepEqual(clock.waits, [10_000, 10_000]);
});

test("retryWithInterval rejects with the last failure after `attempts` calls, waiting after the last too", async () => {
  const clock = recordingClock();
  let calls = 0;
  await assert.rejects(
    retryWithInterval(() => Promise.reject(new Error(`fail ${++calls}`)), {
      attempts: 3,
      intervalMs: 7,
      clock,
    }),
    /fail 3/,
  );
  assert.equal(calls, 3);
  assert.deepEqual(clock.waits, [7, 7, 7]);
});

test("retryWithInterval stops waiting when its signal aborts, with the signal's reason", async () => {
  const clock: Clock = { now: () => 0, setTimer: () => () => {} }; // a wait that never ends by itself
  const ac = new AbortController();
  let calls = 0;
  const pending = retryWithInterval(() => Promise.reject(new Error(`fail ${++calls}`)), {
    attempts: 5,
    intervalMs: 10_000,
    clock,
    signal: ac.signal,
  });
  ac.abort(new Error("shutting down"));
  await assert.rejects(pending, /shutting down/);
  assert.equal(calls, 1);
});
