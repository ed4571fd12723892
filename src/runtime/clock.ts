import { onAbort } from "./abort-listeners.js";

/**
 * Time as the runtime sees it. Everything that waits (workqueue delays, rate limiters, leader
 * election, resync, stall timeouts) takes a Clock, so tests drive time by hand instead of sleeping.
 */
export interface Clock {
  /** Milliseconds, monotonic for RealClock. */
  now(): number;
  /**
   * Runs `fn` after `ms`; the returned function cancels it. Real timers keep the process alive, as a
   * standby replica may have nothing else pending between attempts; stop what you start.
   */
  setTimer(fn: () => void, ms: number): () => void;
}

export const realClock: Clock = {
  now: () => performance.now(),
  setTimer(fn, ms) {
    const t = setTimeout(fn, Math.max(0, ms));
    return () => {
      clearTimeout(t);
    };
  },
};

/** Resolves after `ms` on `clock`; rejects with the signal's reason when aborted. */
export function sleep(clock: Clock, ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(signal.reason as Error);
      return;
    }
    const cancel = clock.setTimer(() => {
      forget?.();
      resolve();
    }, ms);
    const forget =
      signal &&
      onAbort(signal, () => {
        cancel();
        reject(signal.reason as Error);
      });
  });
}

/**
 * A sleep its owner can cut short. until() resolves after `ms` on the clock (never, without `ms`), or
 * as soon as wake() is called; it rejects with the signal's reason when `signal` aborts. A wake() while
 * nothing waits is dropped: callers check their condition before they wait.
 */
export class Wakeup {
  #wake: (() => void) | undefined;

  constructor(private readonly clock: Clock = realClock) {}

  wake(): void {
    this.#wake?.();
  }

  until(signal: AbortSignal, ms?: number): Promise<void> {
    if (signal.aborted) return Promise.reject(signal.reason as Error);
    return new Promise((resolve, reject) => {
      const done = () => {
        this.#wake = undefined;
        cancel();
        forget();
      };
      const cancel =
        ms === undefined
          ? () => {}
          : this.clock.setTimer(() => {
              done();
              resolve();
            }, ms);
      this.#wake = () => {
        done();
        resolve();
      };
      const forget = onAbort(signal, () => {
        done();
        reject(signal.reason as Error);
      });
    });
  }
}

/** When each signal made by deadline() aborts by itself, on its clock. */
const deadlines = new WeakMap<AbortSignal, number>();

/**
 * A signal that aborts with `reason()` once `ms` have passed on `clock`, or when `parent` aborts;
 * cancel() stops the timer (call it when the guarded work ends). Unlike AbortSignal.timeout() it
 * tells when it will abort (deadlineOf), as a Go context tells its Deadline().
 */
export function deadline(
  clock: Clock,
  ms: number,
  reason: () => Error,
  parent?: AbortSignal,
): { signal: AbortSignal; cancel: () => void } {
  const timeout = new AbortController();
  const cancel = clock.setTimer(() => {
    timeout.abort(reason());
  }, ms);
  const signal = parent ? AbortSignal.any([parent, timeout.signal]) : timeout.signal;
  deadlines.set(signal, Math.min(clock.now() + ms, deadlineOf(parent) ?? Infinity));
  return { signal, cancel };
}

/** When `signal` (made by deadline()) aborts by itself, in its clock's ms; undefined: no deadline known. */
export function deadlineOf(signal: AbortSignal | undefined): number | undefined {
  return signal && deadlines.get(signal);
}

/** A clock that moves only when told to: `advance(ms)` fires due timers in time order. */
export class FakeClock implements Clock {
  #now: number;
  #seq = 0;
  readonly #timers = new Map<number, { at: number; fn: () => void }>();

  constructor(start = 0) {
    this.#now = start;
  }

  now(): number {
    return this.#now;
  }

  setTimer(fn: () => void, ms: number): () => void {
    const id = ++this.#seq;
    this.#timers.set(id, { at: this.#now + Math.max(0, ms), fn });
    return () => this.#timers.delete(id);
  }

  /** Number of timers not yet fired. */
  get pendingTimers(): number {
    return this.#timers.size;
  }

  /** Moves time forward, firing every timer that falls due (including ones set by fired timers). */
  advance(ms: number): void {
    const target = this.#now + ms;
    for (;;) {
      let next: [number, { at: number; fn: () => void }] | undefined;
      for (const entry of this.#timers) {
        if (entry[1].at <= target && (!next || entry[1].at < next[1].at)) next = entry;
      }
      if (!next) break;
      this.#timers.delete(next[0]);
      this.#now = next[1].at;
      next[1].fn();
    }
    this.#now = target;
  }
}
