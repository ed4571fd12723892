import Fifo from "yocto-queue";
import type { QueueMetrics } from "./metrics.js";

export interface QueueOptions {
  metrics?: QueueMetrics | undefined;
}

/**
 * client-go's basic workqueue: a FIFO of keys plus a `dirty` set (keys waiting to be processed) and a
 * `processing` set (keys handed out by get() and not yet done()). Because a key in `processing` is
 * only marked dirty by add() and is pushed again at done(), no two workers ever hold the same key, and
 * any number of adds while it is processed collapse into one re-run.
 */
export class Queue {
  /** A linked list: an array's shift() copies what is left once it is large (a resync of 100,000 keys). */
  readonly #queue = new Fifo<string>();
  readonly #dirty = new Set<string>();
  readonly #processing = new Set<string>();
  /** get() callers waiting for a key; only non-empty while #queue is empty. */
  readonly #waiters: ((item: string | undefined) => void)[] = [];
  readonly #metrics: QueueMetrics | undefined;
  #shuttingDown = false;
  #drain = false;
  #drained: PromiseWithResolvers<undefined> | undefined;

  constructor(options: QueueOptions = {}) {
    this.#metrics = options.metrics;
  }

  /** Marks `item` as needing processing; ignored while shutting down or if it is already waiting. */
  add(item: string): void {
    if (this.#shuttingDown || this.#dirty.has(item)) return;
    this.#metrics?.add(item);
    this.#dirty.add(item);
    if (!this.#processing.has(item)) this.#push(item);
  }

  /**
   * The next key to process, waiting while the queue is empty; `undefined` once shut down (after
   * shutDownWithDrain, only when no queued key is left). The caller must call done(key) afterwards.
   */
  get(): Promise<string | undefined> {
    if (this.#shuttingDown && !this.#drain) return Promise.resolve(undefined);
    const item = this.#queue.dequeue();
    if (item !== undefined) {
      this.#take(item);
      return Promise.resolve(item);
    }
    if (this.#shuttingDown) return Promise.resolve(undefined);
    return new Promise((resolve) => this.#waiters.push(resolve));
  }

  /** Ends processing of `item`; if it was added meanwhile, it goes back on the queue. */
  done(item: string): void {
    if (!this.#processing.delete(item)) return;
    this.#metrics?.done(item);
    if (this.#dirty.has(item)) this.#push(item);
    if (this.#drain && this.#idle()) this.#drained?.resolve(undefined);
  }

  /** Number of keys waiting to be handed out (not counting keys being processed). */
  len(): number {
    return this.#queue.size;
  }

  shuttingDown(): boolean {
    return this.#shuttingDown;
  }

  /**
   * Stops accepting adds; waiting and later get() calls resolve `undefined`, dropping queued keys
   * (client-go's ShutDown still hands those out; shutDownWithDrain is the way to finish them).
   */
  shutDown(): void {
    this.#shuttingDown = true;
    this.#drain = false;
    this.#wakeAll();
    // A shutDownWithDrain() in progress stops waiting, as in client-go.
    this.#drained?.resolve(undefined);
  }

  /**
   * Stops accepting adds but keeps handing out queued keys; resolves once none is left queued or
   * processing. client-go's ShutDownWithDrain waits only for keys already taken; since get() keeps
   * handing out queued keys, this waits for them too, so it settles when the workers run out of work.
   */
  shutDownWithDrain(): Promise<void> {
    if (this.#drained) return this.#drained.promise;
    const drained = Promise.withResolvers<undefined>();
    this.#drained = drained;
    if (!this.#shuttingDown) this.#drain = true;
    this.#shuttingDown = true;
    this.#wakeAll();
    if (!this.#drain || this.#idle()) drained.resolve(undefined);
    return drained.promise;
  }

  #idle(): boolean {
    return this.#queue.size === 0 && this.#processing.size === 0;
  }

  #push(item: string): void {
    const waiter = this.#waiters.shift();
    if (waiter) {
      this.#take(item);
      waiter(item);
    } else {
      this.#queue.enqueue(item);
    }
  }

  #take(item: string): void {
    this.#metrics?.get(item);
    this.#processing.add(item);
    this.#dirty.delete(item);
  }

  /** Waiters exist only while the queue is empty, so on shutdown they all get `undefined`. */
  #wakeAll(): void {
    for (const waiter of this.#waiters.splice(0)) waiter(undefined);
  }
}
