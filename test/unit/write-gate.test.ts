import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { FakeClock } from "../../src/runtime/clock.js";
import { FencedError, WriteGate } from "../../src/runtime/write-gate.js";

const RENEW = 10_000;

/** Whether `p` has settled, after letting pending continuations run. */
async function state(p: Promise<unknown>): Promise<"pending" | "resolved" | "rejected"> {
  let s: "pending" | "resolved" | "rejected" = "pending";
  p.then(
    () => (s = "resolved"),
    () => (s = "rejected"),
  );
  await new Promise((resolve) => setImmediate(resolve));
  return s;
}

describe("WriteGate", () => {
  test("refuses writes before a term and after it, admits them during it", async () => {
    const clock = new FakeClock(1_000);
    const gate = new WriteGate(clock, RENEW);
    await assert.rejects(gate.admit(), FencedError);
    gate.renewed(clock.now());
    await assert.rejects(gate.admit(), /not leading/, "a renewal alone is no term");
    const term = new AbortController();
    gate.lead(term.signal);
    const inFlight = await gate.admit();
    assert.equal(inFlight.aborted, false);
    term.abort(new Error("lease lost"));
    assert.equal(inFlight.aborted, true, "a write in flight is aborted when the term ends");
    await assert.rejects(gate.admit(), /no longer leading \(lease lost\)/);
  });

  test("admits only while the last renewal was sent less than renewDeadline ago", async () => {
    const clock = new FakeClock();
    const gate = new WriteGate(clock, RENEW);
    const term = new AbortController();
    gate.renewed(0);
    gate.lead(term.signal);
    clock.advance(RENEW - 1);
    const inFlight = await gate.admit();
    gate.renewed(2_000); // a renewal sent at 2 s answered late: it counts from when it was sent
    clock.advance(2_000);
    assert.equal(inFlight.aborted, false, "renewals keep writes in flight alive");
    assert.equal(await state(gate.admit()), "resolved");
    clock.advance(1);
    assert.equal(inFlight.aborted, true, "a write in flight when the renewal goes stale is aborted");
    assert.match((inFlight.reason as Error).message, /last renewed more than 10000 ms ago/);
    const waiting = gate.admit();
    assert.equal(await state(waiting), "pending", "a stale leader's writes wait for a renewal");
    gate.renewed(clock.now());
    assert.equal(await state(waiting), "resolved");
    assert.equal((await waiting).aborted, false);
  });

  test("a leader resumed after a pause writes nothing before a renewal, and nothing if the term ends", async () => {
    // A paused process's timers all fire late: model it by moving the clock without running them.
    let now = 0;
    const timers: (() => void)[] = [];
    const clock = {
      now: () => now,
      setTimer: (fn: () => void) => {
        timers.push(fn);
        return () => {};
      },
    };
    const gate = new WriteGate(clock, RENEW);
    const term = new AbortController();
    gate.renewed(0);
    gate.lead(term.signal);
    const before = await gate.admit();
    now = 20_000; // SIGSTOP for 20 s, then SIGCONT: the stale timer has not run yet
    const waiting = gate.admit();
    assert.equal(await state(waiting), "pending");
    assert.equal(before.aborted, true, "admit aborts writes still in flight from before the pause");
    term.abort(new Error("another holder"));
    await assert.rejects(waiting, /no longer leading \(another holder\)/);
  });
});

describe("WriteGate.runSideEffect (side effects outside the API)", () => {
  test("starts nothing outside a term; while fresh starts it with a signal that aborts when the gate closes", async () => {
    const clock = new FakeClock();
    const gate = new WriteGate(clock, RENEW);
    let started = 0;
    const effect = (signal: AbortSignal) => {
      started++;
      return Promise.resolve(signal);
    };
    await assert.rejects(gate.runSideEffect(effect), /not leading/);
    const term = new AbortController();
    gate.renewed(0);
    gate.lead(term.signal);
    const signal = await gate.runSideEffect(effect);
    assert.equal(started, 1);
    assert.equal(signal.aborted, false);
    clock.advance(RENEW);
    assert.equal(signal.aborted, true, "an effect in flight when the renewal goes stale is told to stop");
  });

  test("a stale leader's side effect waits for a renewal, and never starts if the term ends", async () => {
    const clock = new FakeClock();
    const gate = new WriteGate(clock, RENEW);
    const term = new AbortController();
    gate.renewed(0);
    gate.lead(term.signal);
    clock.advance(RENEW);
    let started = 0;
    const effect = () => (started++, Promise.resolve());
    const waiting = gate.runSideEffect(effect);
    assert.equal(await state(waiting), "pending");
    gate.renewed(clock.now());
    assert.equal(await state(waiting), "resolved");
    assert.equal(started, 1);
    clock.advance(RENEW);
    const refused = gate.runSideEffect(effect);
    assert.equal(await state(refused), "pending");
    term.abort(new Error("another holder"));
    await assert.rejects(refused, /no longer leading \(another holder\)/);
    assert.equal(started, 1);
  });

  test("a process stopped between admission and the start starts nothing on resuming", async () => {
    // The clock jumps (SIGSTOP past the renew deadline) after the admission's look and before the
    // effect's start; no timer has run.
    let now = 0;
    let looks = 0;
    const clock = {
      now: () => (looks++ === 0 ? now : (now = 20_000)),
      setTimer: () => () => {},
    };
    const gate = new WriteGate(clock, RENEW);
    const term = new AbortController();
    gate.renewed(0);
    gate.lead(term.signal);
    looks = 0;
    let started = 0;
    const effect = gate.runSideEffect(() => (started++, Promise.resolve()));
    assert.equal(await state(effect), "pending", "it waits for a renewal instead");
    assert.equal(started, 0);
    term.abort(new Error("lease lost"));
    await assert.rejects(effect, FencedError);
    assert.equal(started, 0);
  });
});
