import { LRUCache } from "lru-cache";
import { realClock, type Clock } from "../clock.js";

/**
 * Upstream's webhook authorizer keeps at most 8192 decisions (cache.NewLRUExpireCache(8192)); the
 * same bound here keeps a client that sends many distinct tokens from growing memory without limit.
 */
export const DEFAULT_REVIEW_CACHE_SIZE = 8192;

export interface ReviewCacheOptions<V> {
  /** How long to keep a result, by its outcome (allowed and denied have their own TTLs upstream); 0: not kept. */
  ttlMs: (result: V) => number;
  max?: number | undefined;
  clock?: Clock | undefined;
}

/**
 * Results of TokenReviews or SubjectAccessReviews, kept briefly as upstream's delegating
 * authenticator and authorizer do: bounded (least recently used out first), each result for its own
 * TTL, and concurrent requests for one key share a single review.
 */
export class ReviewCache<V extends object> {
  readonly #cache: LRUCache<string, V>;
  readonly #inFlight = new Map<string, Promise<V>>();
  readonly #opts: ReviewCacheOptions<V>;

  constructor(opts: ReviewCacheOptions<V>) {
    this.#opts = opts;
    const clock = opts.clock ?? realClock;
    this.#cache = new LRUCache<string, V>({
      max: opts.max ?? DEFAULT_REVIEW_CACHE_SIZE,
      perf: { now: () => clock.now() },
      ttlResolution: 0, // read the clock on every check (its default memoizes "now" for a real 1 ms)
    });
  }

  get size(): number {
    return this.#cache.size;
  }

  /**
   * The result kept for `key`, else `review`'s (shared with concurrent callers of the same key). A
   * rejected review is passed on and not kept: the next request asks again.
   */
  async get(key: string, review: () => Promise<V>): Promise<V> {
    const cached = this.#cache.get(key);
    if (cached) return cached;
    let pending = this.#inFlight.get(key);
    if (!pending) {
      pending = review().then((result) => {
        const ttl = this.#opts.ttlMs(result);
        if (ttl > 0) this.#cache.set(key, result, { ttl });
        return result;
      });
      const settled = () => this.#inFlight.delete(key);
      pending.then(settled, settled);
      this.#inFlight.set(key, pending);
    }
    return pending;
  }
}
