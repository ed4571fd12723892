import { realClock, sleep, type Clock } from "../runtime/clock.js";

export interface WaitOptions {
  timeoutMs: number;
  intervalMs?: number;
  /** Named in the timeout error, e.g. "PVC default/a to be Bound". */
  what: string;
  signal?: AbortSignal;
  /** Real time unless a test drives it. */
  clock?: Clock;
}

/**
 * Polls `check` until it returns a value other than undefined/false, or fails after the deadline
 * with the last error `check` threw. Conditions with deadlines, never fixed sleeps, synchronise
 * tests and start-up.
 */
export async function waitFor<T>(
  check: () => Promise<T | undefined | false> | T | undefined | false,
  { timeoutMs, intervalMs = 100, what, signal, clock = realClock }: WaitOptions,
): Promise<T> {
  const deadline = clock.now() + timeoutMs;
  let lastError: unknown;
  for (;;) {
    signal?.throwIfAborted();
    try {
      const value = await check();
      if (value !== undefined && value !== false) return value;
    } catch (err) {
      lastError = err;
    }
    if (clock.now() >= deadline) {
      const cause = lastError instanceof Error ? `: ${lastError.message}` : "";
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${cause}`, { cause: lastError });
    }
    await sleep(clock, intervalMs, signal); // rejects with the abort reason
  }
}

/**
 * Upstream wait.Until: runs `fn`, then again `periodMs` after each run ends, until `signal` aborts.
 * Resolves on the abort; an error `fn` throws ends the loop with it.
 */
export async function until(
  fn: () => unknown,
  periodMs: number,
  { clock, signal }: { clock: Clock; signal: AbortSignal },
): Promise<void> {
  while (!signal.aborted) {
    await fn();
    try {
      await sleep(clock, periodMs, signal);
    } catch {
      return; // aborted
    }
  }
}

/**
 * A signal aborted with `reason(value)` once `settled` settles, resolved or rejected (then without a
 * value): handed to waitFor, it ends a wait on a process the moment the process exits, where a check
 * that throws would only be retried until the deadline.
 */
export function abortedWhen<T>(settled: Promise<T>, reason: (value?: T) => Error): AbortSignal {
  const ac = new AbortController();
  settled.then(
    (value) => {
      ac.abort(reason(value));
    },
    () => {
      ac.abort(reason());
    },
  );
  return ac.signal;
}
