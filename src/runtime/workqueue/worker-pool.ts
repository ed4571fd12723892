import type { Queue } from "./queue.js";

export type WorkHandler = (key: string) => Promise<void>;
export type WorkErrorHandler = (key: string, err: unknown) => void;

/**
 * Runs `concurrency` workers, each looping get() -> handler(key) -> done(key), until the queue is
 * shut down; aborting `signal` shuts it down. Resolves when every worker has finished its current key
 * and left, so `queue.shutDownWithDrain()` followed by awaiting this lets queued keys finish too.
 * A handler's error goes to `onError` (typically addRateLimited) and never stops its worker.
 *
 * After each key a worker yields to the event loop. get() on a non-empty queue resolves as a
 * microtask, so without the yield a worker whose syncs need no I/O (a claim with no volume yet)
 * drains its whole queue before any response, watch event or timer is handled: the volume worker's
 * writes, lease renewals and health probes would wait for the whole pass, where Go's goroutines run
 * side by side.
 *
 * Why no p-queue here: p-queue gives bounded concurrency and idle/drain promises over tasks it is
 * handed, but no dedup, no per-key exclusion, no dirty/processing semantics and no rate-limited
 * requeue, which is why the queue is our own. What is left for it would be the concurrency bound, and
 * feeding it means taking a key from get() before a slot is free, holding that key in `processing`
 * while it waits in p-queue. N plain loops over get() bound concurrency exactly, and awaiting all of
 * them is the drain promise.
 */
export async function runWorkers(
  queue: Pick<Queue, "get" | "done" | "shutDown">,
  concurrency: number,
  handler: WorkHandler,
  signal: AbortSignal,
  onError: WorkErrorHandler,
): Promise<void> {
  const stop = () => {
    queue.shutDown();
  };
  if (signal.aborted) stop();
  else signal.addEventListener("abort", stop, { once: true });

  const worker = async () => {
    for (let key = await queue.get(); key !== undefined; key = await queue.get()) {
      try {
        await handler(key);
      } catch (err) {
        try {
          onError(key, err);
        } catch {
          // onError is the last resort for this key; its own failure must not stop the worker.
        }
      } finally {
        queue.done(key);
      }
      await new Promise(setImmediate);
    }
  };
  try {
    await Promise.all(Array.from({ length: concurrency }, worker));
  } finally {
    signal.removeEventListener("abort", stop);
  }
}
