import { sleep, type Clock } from "../runtime/clock.js";

export interface RetryOptions {
  /** Calls of `attempt` at most; at least one is made. */
  attempts: number;
  /** Wait on the Clock after each failure, the last one included. */
  intervalMs: number;
  clock: Clock;
  /** Ends a wait early: the retry then rejects with the signal's reason. */
  signal?: AbortSignal;
}

/**
 * Calls `attempt` until it resolves, at most `attempts` times, `intervalMs` apart; rejects with the
 * last failure. A fixed interval, and a wait after the last failure too, as the loops with
 * time.Sleep this replaces (upstream pv_controller.go provisionClaimOperation); for backoff between
 * whole operations see ExponentialBackoff.
 */
export async function retryWithInterval<T>(
  attempt: (n: number) => Promise<T>,
  { attempts, intervalMs, clock, signal }: RetryOptions,
): Promise<T> {
  for (let n = 1; ; n++) {
    try {
      return await attempt(n);
    } catch (err) {
      await sleep(clock, intervalMs, signal);
      if (n >= attempts) throw err;
    }
  }
}
