import { setTimeout as sleep } from "node:timers/promises";

export interface WaitOptions {
  timeoutMs: number;
  intervalMs?: number;
  /** Named in the timeout error, e.g. "PVC default/a to be Bound". */
  what: string;
  signal?: AbortSignal;
}

/**
 * Polls `check` until it returns a value other than undefined/false, or fails after the deadline
 * with the last error `check` threw. Conditions with deadlines, never fixed sleeps, synchronise
 * tests and start-up.
 */
export async function waitFor<T>(
  check: () => Promise<T | undefined | false> | T | undefined | false,
  { timeoutMs, intervalMs = 100, what, signal }: WaitOptions,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let lastError: unknown;
  for (;;) {
    signal?.throwIfAborted();
    try {
      const value = await check();
      if (value !== undefined && value !== false) return value;
    } catch (err) {
      lastError = err;
    }
    if (Date.now() >= deadline) {
      const cause = lastError instanceof Error ? `: ${lastError.message}` : "";
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${cause}`, { cause: lastError });
    }
    try {
      await sleep(intervalMs, undefined, signal ? { signal } : {});
    } catch (err) {
      signal?.throwIfAborted(); // surface the abort reason rather than a generic AbortError
      throw err;
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
