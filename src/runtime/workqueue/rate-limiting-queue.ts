import { DelayingQueue, type DelayingQueueOptions } from "./delaying-queue.js";
import { defaultControllerRateLimiter, type RateLimiter } from "./rate-limiter.js";

export interface RateLimitingQueueOptions extends DelayingQueueOptions {
  /** Defaults to defaultControllerRateLimiter() on the queue's clock. */
  rateLimiter?: RateLimiter | undefined;
}

/** client-go's rate-limiting queue: failed items come back after the limiter's delay. */
export class RateLimitingQueue extends DelayingQueue {
  readonly #limiter: RateLimiter;

  constructor(options: RateLimitingQueueOptions = {}) {
    super(options);
    this.#limiter = options.rateLimiter ?? defaultControllerRateLimiter(options.clock);
  }

  /** Re-adds `item` after the limiter's delay for it (call when processing it failed). */
  addRateLimited(item: string): void {
    this.addAfter(item, this.#limiter.when(item));
  }

  /** Resets the item's backoff (call when processing it succeeded). */
  forget(item: string): void {
    this.#limiter.forget(item);
  }

  numRequeues(item: string): number {
    return this.#limiter.numRequeues(item);
  }
}
