import type { KubernetesObject } from "@kubernetes/client-node";
import { isGone } from "../api-errors.js";
import { sleep, type Clock } from "../clock.js";
import { ExponentialBackoffManager } from "./backoff-manager.js";
import type { ListerWatcher, WatchStatus } from "./list-watch.js";
import type { LogSink as LogSink } from "../logger.js";

/** Where a reflector puts what it reads. Both calls are synchronous and in server order. */
export interface ReflectorSink<T> {
  /** A complete, consistent list: the cache must become exactly this. */
  replace(items: T[]): void;
  apply(type: "ADDED" | "MODIFIED" | "DELETED", obj: T): void;
}

/** Counters for logs, metrics and tests. */
export interface ReflectorStats {
  /** Completed full lists; every one after the first is a relist. */
  lists: number;
  watches: number;
  /** 410 Gone answers (list continue token or watch resourceVersion compacted away). */
  expired: number;
  /** Watches given up because nothing, not even a bookmark, arrived for stallTimeoutMs. */
  stalls: number;
  /** Other failed lists and watches, each followed by a backoff. */
  failures: number;
}

export interface ReflectorOptions<T> {
  /** For logs, e.g. "persistentvolumes". */
  name: string;
  listerWatcher: ListerWatcher<T>;
  sink: ReflectorSink<T>;
  clock: Clock;
  logger: LogSink;
  pageSize?: number;
  /**
   * A list page or watch that receives nothing for this long is abandoned and retried. The apiserver
   * sends a bookmark about every minute on an idle watch, so the default of three minutes means
   * several were lost: a half-open connection or a hung proxy.
   */
  stallTimeoutMs?: number;
  /** Server-side watch timeouts are spread over [min, 2·min), like client-go's, so watches do not all end together. */
  minWatchTimeoutMs?: number;
  random?: () => number;
}

/** A watch that ends this soon without any event is treated as a failure, so it cannot spin. */
const SHORT_WATCH_MS = 1000;

/**
 * Keeps a sink in step with the apiserver, like client-go's Reflector: a paginated LIST, then a WATCH
 * from the list's resourceVersion with bookmarks. A watch that ends cleanly is resumed at once from
 * the last resourceVersion seen; 410 Gone relists; any other failure is retried after a jittered
 * exponential backoff. It stops only when its signal is aborted.
 */
export class Reflector<T extends KubernetesObject> {
  readonly stats: ReflectorStats = { lists: 0, watches: 0, expired: 0, stalls: 0, failures: 0 };
  readonly #name: string;
  readonly #lw: ListerWatcher<T>;
  readonly #sink: ReflectorSink<T>;
  readonly #clock: Clock;
  readonly #log: LogSink;
  readonly #pageSize: number;
  readonly #stallTimeoutMs: number;
  readonly #minWatchTimeoutMs: number;
  readonly #random: () => number;
  readonly #backoff: ExponentialBackoffManager;
  #resourceVersion = "";
  /** Whether a watch made progress since the last list began: a 410 before that waits out a backoff. */
  #progressed = false;

  constructor(opts: ReflectorOptions<T>) {
    this.#name = opts.name;
    this.#lw = opts.listerWatcher;
    this.#sink = opts.sink;
    this.#clock = opts.clock;
    this.#log = opts.logger;
    this.#pageSize = opts.pageSize ?? 500;
    this.#stallTimeoutMs = opts.stallTimeoutMs ?? 180_000;
    this.#minWatchTimeoutMs = opts.minWatchTimeoutMs ?? 300_000;
    this.#random = opts.random ?? Math.random;
    this.#backoff = new ExponentialBackoffManager({ clock: opts.clock, random: this.#random });
  }

  /** The resourceVersion the next watch starts from. */
  get resourceVersion(): string {
    return this.#resourceVersion;
  }

  /** Lists and watches until `signal` is aborted; never rejects. */
  async run(signal: AbortSignal): Promise<void> {
    // A function, not the property: TypeScript would take `aborted` as still false after an await.
    const stopped = () => signal.aborted;
    let listed = false;
    while (!stopped()) {
      try {
        if (!listed) {
          await this.#list(signal);
          listed = true;
        }
        await this.#watch(signal);
      } catch (err) {
        if (stopped()) break;
        const gone = isGone(err);
        if (gone) {
          this.stats.expired++;
          listed = false;
          if (this.#progressed) {
            this.#log.info({ resource: this.#name, err }, "resourceVersion expired; relisting");
            continue;
          }
        } else {
          this.stats.failures++;
        }
        const delayMs = Math.round(this.#backoff.next());
        this.#log.warn(
          { resource: this.#name, err, delayMs, resourceVersion: this.#resourceVersion },
          gone
            ? "resourceVersion expired right after a list; relisting after a backoff"
            : "list/watch failed",
        );
        try {
          await sleep(this.#clock, delayMs, signal);
        } catch {
          break; // aborted
        }
      }
    }
  }

  /**
   * Reads every page, then replaces the sink's contents in one step. The list asks for the most recent
   * state (no resourceVersion): a quorum read, never older than anything already seen. Lists served
   * from a lagging cache (resourceVersion "0") could go back in time after an apiserver restart.
   */
  async #list(signal: AbortSignal): Promise<void> {
    this.#progressed = false;
    const items: T[] = [];
    let resourceVersion: string;
    let cont: string | undefined;
    do {
      const opts = { limit: this.#pageSize, ...(cont && { continue: cont }) };
      const page = await this.#once(signal, (s) => this.#lw.list(opts, s));
      for (const item of page.items) items.push(item);
      ({ resourceVersion, continue: cont } = page);
    } while (cont);
    this.#sink.replace(items);
    this.#resourceVersion = resourceVersion;
    this.stats.lists++;
    this.#log.debug({ resource: this.#name, items: items.length, resourceVersion }, "listed");
  }

  /** One watch. Returns when it ended cleanly or stalled (watch again at once); throws otherwise. */
  async #watch(signal: AbortSignal): Promise<void> {
    const opts = {
      resourceVersion: this.#resourceVersion,
      timeoutSeconds: Math.floor((this.#minWatchTimeoutMs / 1000) * (1 + this.#random())),
      allowWatchBookmarks: true,
    };
    const req = new Request(signal, this.#clock, this.#stallTimeoutMs);
    const started = this.#clock.now();
    let events = 0;
    this.stats.watches++;
    try {
      await req.settle(
        this.#lw.watch(
          opts,
          (event) => {
            if (req.signal.aborted) return; // late events of a watch already given up
            if (event.type === "ERROR") {
              req.abort(new WatchError(event.object));
              return;
            }
            req.touch();
            events++;
            this.#progressed = true;
            if (event.type !== "BOOKMARK") this.#sink.apply(event.type, event.object);
            const rv = event.object.metadata?.resourceVersion;
            if (rv) this.#resourceVersion = rv;
          },
          req.signal,
        ),
      );
    } catch (err) {
      if (!(err instanceof StallError)) throw err;
      this.stats.stalls++;
      this.#log.warn({ resource: this.#name, resourceVersion: this.#resourceVersion }, err.message);
      return;
    } finally {
      req.dispose();
    }
    if (events === 0 && this.#clock.now() - started < SHORT_WATCH_MS)
      throw new Error("watch closed at once without any event");
    this.#progressed = true;
    this.#log.debug({ resource: this.#name, events, resourceVersion: this.#resourceVersion }, "watch closed");
  }

  async #once<R>(signal: AbortSignal, call: (signal: AbortSignal) => Promise<R>): Promise<R> {
    const req = new Request(signal, this.#clock, this.#stallTimeoutMs);
    try {
      return await req.settle(call(req.signal));
    } finally {
      req.dispose();
    }
  }
}

/** An ERROR watch event; `statusCode` makes it readable by api-errors (isGone). */
class WatchError extends Error {
  readonly statusCode: number | undefined;

  constructor(status: WatchStatus) {
    super(`watch error: ${status.code ?? "?"} ${status.reason ?? ""} ${status.message ?? ""}`.trim());
    this.statusCode = status.code;
  }
}

class StallError extends Error {}

/**
 * One request's lifetime: ended by the caller's signal, by abort(), or by the stall timer, which
 * every touch() restarts.
 */
class Request {
  readonly #ac = new AbortController();
  readonly #parent: AbortSignal;
  readonly #clock: Clock;
  readonly #stallTimeoutMs: number;
  readonly #onParentAbort = () => {
    this.abort(this.#parent.reason);
  };
  #cancelTimer = () => {};

  constructor(parent: AbortSignal, clock: Clock, stallTimeoutMs: number) {
    this.#parent = parent;
    this.#clock = clock;
    this.#stallTimeoutMs = stallTimeoutMs;
    parent.addEventListener("abort", this.#onParentAbort, { once: true });
    this.touch();
  }

  get signal(): AbortSignal {
    return this.#ac.signal;
  }

  touch(): void {
    this.#cancelTimer();
    this.#cancelTimer = this.#clock.setTimer(() => {
      this.abort(new StallError(`nothing received for ${this.#stallTimeoutMs} ms; giving up on the request`));
    }, this.#stallTimeoutMs);
  }

  abort(reason: unknown): void {
    if (!this.#ac.signal.aborted) this.#ac.abort(reason);
  }

  /** Settles like `p`, or rejects with the abort reason as soon as aborted: a transport may ignore its signal. */
  settle<R>(p: Promise<R>): Promise<R> {
    const signal = this.#ac.signal;
    const aborted = new Promise<never>((_, reject) => {
      const fail = () => {
        reject(signal.reason as Error);
      };
      if (signal.aborted) fail();
      else signal.addEventListener("abort", fail, { once: true });
    });
    return Promise.race([p, aborted]);
  }

  dispose(): void {
    this.#cancelTimer();
    this.#parent.removeEventListener("abort", this.#onParentAbort);
  }
}
