import type { Clock } from "../runtime/clock.js";
import type { LogSink } from "../runtime/logger.js";
import { ExponentialBackoff } from "../util/exponential-backoff.js";

interface OperationState {
  running: boolean;
  readonly backoff: ExponentialBackoff;
}

/**
 * Long-running provision/delete/recycle operations, one per name at a time, as upstream's
 * goroutinemap with exponential backoff on error. A name stays known after a failure so the next
 * schedule within the backoff is skipped; a success forgets it. Syncs never wait for an operation:
 * they schedule it and return, and the operation's writes trigger the next sync.
 *
 * Concurrency is not bounded, as upstream's one goroutine per operation: operations spend their time
 * waiting on the apiserver or a plugin, not on this process. A bound (p-queue) would make a
 * provisioning wait behind unrelated slow deletions or recycler pods, which upstream never does.
 */
export class OperationScheduler {
  readonly #clock: Clock;
  readonly #log: LogSink;
  readonly #ops = new Map<string, OperationState>();
  readonly #running = new Set<Promise<void>>();

  constructor(clock: Clock, log: LogSink) {
    this.#clock = clock;
    this.#log = log;
  }

  /** Starts `operation` under `name` unless one is running or failed within its backoff. */
  schedule(name: string, operation: () => Promise<void>): void {
    const state = this.#ops.get(name);
    if (state?.running) {
      this.#log.debug({ operationName: name }, "Operation is already running, skipping");
      return;
    }
    if (state && !state.backoff.safeToRetry(this.#clock.now())) {
      this.#log.debug({ operationName: name }, "Operation postponed due to exponential backoff");
      return;
    }
    const backoff = state?.backoff ?? new ExponentialBackoff();
    this.#ops.set(name, { running: true, backoff });
    // Asynchronous, like upstream's goroutine: schedule() returns before any of the operation runs.
    const run = Promise.resolve()
      .then(operation)
      .then(
        () => {
          this.#ops.delete(name);
        },
        (err: unknown) => {
          backoff.update(this.#clock.now());
          this.#ops.set(name, { running: false, backoff });
          this.#log.error(
            { operationName: name, err, retryAfterMs: backoff.durationMs },
            "Operation failed; no retries permitted until the backoff has passed",
          );
        },
      )
      .finally(() => {
        this.#running.delete(run);
      });
    this.#running.add(run);
  }

  /** Resolves once no operation is running, including ones started meanwhile. */
  async waitForCompletion(): Promise<void> {
    while (this.#running.size > 0) await Promise.all(this.#running);
  }
}
