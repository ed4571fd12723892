import { isConflict, isNotFound } from "../runtime/api-errors.js";
import type { LogSink } from "../runtime/logger.js";
import type { RateLimitingQueue } from "../runtime/workqueue/index.js";

/**
 * What both protection controllers do after a key's failed turn. NotFound on a write: the object was
 * deleted after the cache's copy was read (often by the controller's own finalizer removal, the cache
 * not yet showing it), so nothing is left to protect and the key is done; upstream logs an error and
 * retries. Anything else is retried rate-limited; a conflict only means the cache was behind, so it is
 * no error: the retry reads the newer object.
 */
export function handleSyncError(
  queue: Pick<RateLimitingQueue, "forget" | "addRateLimited">,
  log: LogSink,
  kind: "PV" | "PVC",
  key: string,
  err: unknown,
): void {
  const subject = kind === "PV" ? { pv: key } : { pvc: key };
  if (isNotFound(err)) {
    queue.forget(key);
    log.debug(subject, `${kind} is gone; nothing to do`);
    return;
  }
  queue.addRateLimited(key);
  log[isConflict(err) ? "debug" : "error"]({ ...subject, err }, `processing ${kind} failed; will retry`);
}
