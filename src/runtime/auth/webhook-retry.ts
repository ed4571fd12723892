import { isInternalError, isTimeout, isTooManyRequests, suggestsClientDelay } from "../api-errors.js";
import { sleep, type Clock } from "../clock.js";
import { ExponentialBackoffManager } from "../informer/backoff-manager.js";

/** Upstream's DefaultAuthWebhookRetryBackoff (apiserver options): 500 ms, ×1.5, jitter 0.2, 5 attempts. */
const BACKOFF = { initialMs: 500, factor: 1.5, jitter: 0.2, steps: 5 };

/**
 * Upstream's webhook.DefaultShouldRetry: a reset connection, an internal error, a timeout, 429, or
 * a server asking to be asked again later. Anything else (a refused connection, 401, 403, a bad
 * answer) fails at once.
 */
export function shouldRetry(err: unknown): boolean {
  return (
    isConnectionReset(err) ||
    isInternalError(err) ||
    isTimeout(err) ||
    isTooManyRequests(err) ||
    suggestsClientDelay(err)
  );
}

/** utilnet.IsConnectionReset: ECONNRESET anywhere in the error's causes (undici wraps socket errors). */
function isConnectionReset(err: unknown): boolean {
  for (let e = err, depth = 0; e instanceof Error && depth < 5; e = e.cause, depth++) {
    if ((e as NodeJS.ErrnoException).code === "ECONNRESET") return true;
  }
  return false;
}

/**
 * Upstream's webhook.WithExponentialBackoff, as its delegating authenticator and authorizer send
 * TokenReviews and SubjectAccessReviews: `attempt` again after 500 ms, 750 ms, 1.125 s... (each +
 * up to 20 %) while it fails with an error shouldRetry() accepts, 5 attempts in all; the last error is
 * passed on. `signal` ends the waits (its reason is passed on, or the last error if there was one).
 */
export async function withWebhookBackoff<T>(
  attempt: () => Promise<T>,
  opts: { clock: Clock; signal?: AbortSignal | undefined; random?: () => number },
): Promise<T> {
  const backoff = new ExponentialBackoffManager({
    clock: opts.clock,
    initialMs: BACKOFF.initialMs,
    factor: BACKOFF.factor,
    jitter: BACKOFF.jitter,
    maxMs: Infinity,
    resetAfterMs: Infinity,
    ...(opts.random && { random: opts.random }),
  });
  for (let step = 1; ; step++) {
    try {
      return await attempt();
    } catch (err) {
      if (step >= BACKOFF.steps || !shouldRetry(err) || opts.signal?.aborted) throw err;
      await sleep(opts.clock, backoff.next(), opts.signal).catch(() => {
        throw err;
      });
    }
  }
}
