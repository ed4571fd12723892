import assert from "node:assert/strict";
import { getEventListeners } from "node:events";
import { test } from "node:test";
import { onAbort } from "../../src/runtime/abort-listeners.js";
import { FakeClock, sleep, Wakeup } from "../../src/runtime/clock.js";

test("onAbort calls every callback still registered when the signal aborts, once", () => {
  const controller = new AbortController();
  const calls: string[] = [];
  const log = (name: string) => () => calls.push(name);
  onAbort(controller.signal, log("a"));
  const forgetB = onAbort(controller.signal, log("b"));
  const same = log("c");
  onAbort(controller.signal, same);
  const forgetSecondC = onAbort(controller.signal, same);
  forgetB();
  forgetSecondC();
  controller.abort();
  controller.abort();
  assert.deepEqual(calls, ["a", "c"]);
});

test("sleeps and wakeups on one signal add one listener to it, not one each (issue 30 goal 4)", async () => {
  const clock = new FakeClock();
  const controller = new AbortController();
  const sleeps = Array.from({ length: 3 }, () => sleep(clock, 1_000, controller.signal));
  const wakeup = new Wakeup(clock);
  const woken = wakeup.until(controller.signal, 5_000);
  assert.equal(getEventListeners(controller.signal, "abort").length, 1);
  clock.advance(1_000);
  await Promise.all(sleeps);
  controller.abort(new Error("stopped"));
  await assert.rejects(woken, /stopped/);
});

test("a sleep ended by its timer is not rejected by a later abort, and one aborted rejects", async () => {
  const clock = new FakeClock();
  const controller = new AbortController();
  const done = sleep(clock, 10, controller.signal);
  const pending = sleep(clock, 1_000, controller.signal);
  clock.advance(10);
  await done;
  controller.abort(new Error("stopped"));
  await assert.rejects(pending, /stopped/);
  assert.equal(clock.pendingTimers, 0);
});
