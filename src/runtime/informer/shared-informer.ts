import type { KubernetesObject } from "@kubernetes/client-node";
import Fifo from "yocto-queue";
import { realClock, type Clock } from "../clock.js";
import type { ListerWatcher } from "./list-watch.js";
import { silentLogger, type LogSink } from "../logger.js";
import { Reflector, type ReflectorOptions, type ReflectorStats } from "./reflector.js";
import { deepFreeze, objectKey, Store, type Change, type Indexer, type Indexers } from "./store.js";

/**
 * Callbacks for one consumer. They run one at a time, in the order the changes happened, and should
 * only note the change (typically: enqueue a key) — objects are frozen and shared, copy before
 * changing. Return values are ignored, but an exception or a rejected promise is logged and delivery
 * goes on.
 */
export interface EventHandler<T> {
  onAdd?(obj: T): unknown;
  onUpdate?(oldObj: T, newObj: T): unknown;
  /** finalStateUnknown: the delete was noticed by a relist, `obj` is the last state seen. */
  onDelete?(obj: T, info: { finalStateUnknown: boolean }): unknown;
}

export interface HandlerOptions {
  /** Re-deliver every cached object as onUpdate(obj, obj) this often; 0 for never. */
  resyncPeriodMs?: number;
}

export interface HandlerRegistration {
  /** True once the informer has synced and this handler has received everything cached before it was added. */
  hasSynced(): boolean;
  remove(): void;
}

export interface SharedInformerOptions<T> {
  /** For logs, e.g. "persistentvolumes". */
  name: string;
  listerWatcher: ListerWatcher<T>;
  clock?: Clock;
  logger?: LogSink;
  /** Default resync period of handlers that do not set their own; 0 (the default) for none. */
  resyncPeriodMs?: number;
  reflector?: Pick<ReflectorOptions<T>, "pageSize" | "stallTimeoutMs" | "minWatchTimeoutMs" | "random">;
}

class Listener<T> {
  removed = false;
  /** Its synthetic adds (for everything cached when it was added) have been delivered. */
  caughtUp = false;
  cancelResync = () => {};

  constructor(
    readonly handler: EventHandler<T>,
    readonly resyncPeriodMs: number,
  ) {}
}

/**
 * Deliveries per turn of the event loop. A relist or a resync of 100,000 objects delivered in one go
 * blocks the loop for seconds (issue 30 goal 4), while the leader must renew its Lease and every other
 * informer waits; between turns timers and I/O run. The order of deliveries is kept.
 */
const DELIVERIES_PER_TURN = 1_000;

/** A change for one listener, or (listener undefined) the marker that the first list has been delivered. */
type Delivery<T> = [Listener<T>, Change<T> | "caught-up"] | [undefined, "synced"];

/**
 * One reflector and cache for a resource, shared by every consumer (client-go's SharedIndexInformer).
 * The cache is updated as events arrive; handlers are called afterwards from a single FIFO delivery
 * loop, so each handler sees the changes in order and a handler added late first gets synthetic adds
 * for what is already cached, then everything after — no gap, no duplicate.
 */
export class SharedInformer<T extends KubernetesObject> {
  readonly #store: Store<T>;
  readonly #reflector: Reflector<T>;
  readonly #name: string;
  readonly #clock: Clock;
  readonly #log: LogSink;
  readonly #defaultResyncMs: number;
  readonly #listeners = new Set<Listener<T>>();
  readonly #queue = new Fifo<Delivery<T>>();
  #draining = false;
  #running = false;
  #started = false;
  #syncQueued = false;
  #synced = false;
  readonly #syncWaiters = new Set<() => void>();

  constructor(opts: SharedInformerOptions<T>) {
    this.#name = opts.name;
    this.#clock = opts.clock ?? realClock;
    this.#log = opts.logger ?? silentLogger;
    this.#defaultResyncMs = opts.resyncPeriodMs ?? 0;
    this.#store = new Store(this.#log);
    this.#reflector = new Reflector({
      ...opts.reflector,
      name: opts.name,
      listerWatcher: opts.listerWatcher,
      clock: this.#clock,
      logger: this.#log,
      sink: {
        replace: (items) => {
          this.#deliver(this.#store.replace(items));
          if (!this.#syncQueued) {
            this.#syncQueued = true;
            this.#push([undefined, "synced"]);
          }
        },
        apply: (type, obj) => {
          if (type === "DELETED") {
            this.#store.delete(objectKey(obj));
            this.#deliver([{ type: "delete", obj: deepFreeze(obj), finalStateUnknown: false }]);
          } else {
            const old = this.#store.upsert(obj);
            this.#deliver([old ? { type: "update", old, obj } : { type: "add", obj }]);
          }
        },
      },
    });
  }

  get name(): string {
    return this.#name;
  }

  /** The cache. Its objects are deep-frozen and shared: deepCopy one (util/deep-copy.ts) before changing it. */
  get store(): Indexer<T> {
    return this.#store;
  }

  get stats(): Readonly<ReflectorStats> {
    return this.#reflector.stats;
  }

  /** Registers indexes on the cache; objects already cached are filed at once. */
  addIndexers(indexers: Indexers<T>): void {
    this.#store.addIndexers(indexers);
  }

  addEventHandler(handler: EventHandler<T>, opts: HandlerOptions = {}): HandlerRegistration {
    const listener = new Listener(handler, opts.resyncPeriodMs ?? this.#defaultResyncMs);
    this.#listeners.add(listener);
    for (const obj of this.#store.list()) this.#push([listener, { type: "add", obj }]);
    this.#push([listener, "caught-up"]);
    if (this.#running) this.#scheduleResync(listener);
    return {
      hasSynced: () => this.#synced && listener.caughtUp,
      remove: () => {
        listener.removed = true;
        listener.cancelResync();
        this.#listeners.delete(listener);
      },
    };
  }

  /** True once the first full list has been delivered to the handlers. */
  hasSynced(): boolean {
    return this.#synced;
  }

  /** Resolves once hasSynced(); rejects with the signal's reason if it is aborted first. */
  waitForCacheSync(signal?: AbortSignal): Promise<void> {
    return new Promise((resolve, reject) => {
      if (this.#synced) {
        resolve();
        return;
      }
      const onAbort = () => {
        this.#syncWaiters.delete(done);
        reject(signal?.reason as Error);
      };
      const done = () => {
        signal?.removeEventListener("abort", onAbort);
        resolve();
      };
      if (signal?.aborted) {
        onAbort();
        return;
      }
      this.#syncWaiters.add(done);
      signal?.addEventListener("abort", onAbort, { once: true });
    });
  }

  /**
   * Lists, watches and delivers until `signal` is aborted; resolves once stopped. An informer runs
   * once. After it stops, undelivered changes are dropped: its consumers are stopping too.
   */
  async run(signal: AbortSignal): Promise<void> {
    if (this.#started) throw new Error(`informer ${this.#name} was already started`);
    this.#started = true;
    this.#running = true;
    for (const listener of this.#listeners) this.#scheduleResync(listener);
    try {
      await this.#reflector.run(signal);
    } finally {
      this.#running = false;
      for (const listener of this.#listeners) listener.cancelResync();
      this.#queue.clear();
    }
  }

  #deliver(changes: readonly Change<T>[]): void {
    for (const change of changes) {
      for (const listener of this.#listeners) this.#push([listener, change]);
    }
  }

  #push(delivery: Delivery<T>): void {
    this.#queue.enqueue(delivery);
    if (!this.#draining) {
      this.#draining = true;
      queueMicrotask(() => {
        this.#drain();
      });
    }
  }

  /**
   * The delivery loop, DELIVERIES_PER_TURN at a time. Handlers may add handlers or cause deliveries:
   * those queue behind.
   */
  #drain(): void {
    for (let delivered = 0; this.#queue.size > 0; delivered++) {
      if (delivered === DELIVERIES_PER_TURN) {
        setImmediate(() => {
          this.#drain();
        });
        return;
      }
      const [listener, what] = this.#queue.dequeue() as Delivery<T>;
      if (!listener) {
        this.#markSynced();
      } else if (listener.removed) {
        continue;
      } else if (what === "caught-up") {
        listener.caughtUp = true;
      } else {
        this.#call(listener.handler, what);
      }
    }
    this.#draining = false;
  }

  #markSynced(): void {
    this.#synced = true;
    for (const done of this.#syncWaiters) done();
    this.#syncWaiters.clear();
    this.#log.info({ resource: this.#name, objects: this.#store.size }, "informer synced");
  }

  #call(handler: EventHandler<T>, change: Change<T>): void {
    const fail = (err: unknown) => {
      this.#log.error({ err, resource: this.#name, event: change.type }, "event handler failed");
    };
    try {
      let result: unknown;
      if (change.type === "add") result = handler.onAdd?.(change.obj);
      else if (change.type === "update") result = handler.onUpdate?.(change.old, change.obj);
      else result = handler.onDelete?.(change.obj, { finalStateUnknown: change.finalStateUnknown });
      if (result instanceof Promise) result.catch(fail);
    } catch (err) {
      fail(err);
    }
  }

  /** Resync: every cached object again as onUpdate(obj, obj), queued behind the changes before it. */
  #scheduleResync(listener: Listener<T>): void {
    if (listener.resyncPeriodMs <= 0) return;
    listener.cancelResync = this.#clock.setTimer(() => {
      for (const obj of this.#store.list()) this.#push([listener, { type: "update", old: obj, obj }]);
      this.#scheduleResync(listener);
    }, listener.resyncPeriodMs);
  }
}
