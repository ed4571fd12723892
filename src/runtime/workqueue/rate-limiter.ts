import { realClock, type Clock } from "../clock.js";

/** client-go's workqueue.RateLimiter; delays are in milliseconds. */
export interface RateLimiter {
  /** How long to wait before retrying `item`; counts as one more failure of it. */
  when(item: string): number;
  /** Clears the failure history of `item` (call after it succeeds). */
  forget(item: string): void;
  /** Failures recorded for `item` since it was last forgotten. */
  numRequeues(item: string): number;
}

/** Per item: base * 2^failures, capped at max. */
export class ItemExponentialFailureRateLimiter implements RateLimiter {
  readonly #failures = new Map<string, number>();

  constructor(
    readonly baseDelayMs = 5,
    readonly maxDelayMs = 1_000_000,
  ) {}

  when(item: string): number {
    const failures = this.#failures.get(item) ?? 0;
    this.#failures.set(item, failures + 1);
    return Math.min(this.baseDelayMs * 2 ** failures, this.maxDelayMs);
  }

  forget(item: string): void {
    this.#failures.delete(item);
  }

  numRequeues(item: string): number {
    return this.#failures.get(item) ?? 0;
  }
}

/** A token taken ahead of time (x/time/rate's Reservation). */
export interface Reservation {
  /** Milliseconds until the token is really available; 0: now. */
  readonly delayMs: number;
  /**
   * The wait was abandoned: gives the token back, less what reservations made after this one already
   * counted on (x/time/rate's Reservation.Cancel). Nothing to give back once the delay has passed.
   */
  cancel(): void;
}

/**
 * A token bucket like golang.org/x/time/rate.Limiter: `qps` tokens a second, at most `burst` saved,
 * starting full. Shared by the workqueue's global limiter and the API client's QPS/burst limiter.
 */
export class TokenBucket {
  readonly #clock: Clock;
  #tokens: number;
  #last: number;
  /** When the latest reservation acts (x/time/rate's lastEvent). */
  #lastEvent = -Infinity;

  constructor(
    readonly qps: number,
    readonly burst: number,
    clock: Clock = realClock,
  ) {
    if (!(qps > 0 && Number.isFinite(qps) && burst >= 1)) {
      throw new RangeError(`token bucket needs a finite qps > 0 and burst >= 1, got ${qps}/${burst}`);
    }
    this.#clock = clock;
    this.#tokens = burst;
    this.#last = clock.now();
  }

  /**
   * Takes a token, going into debt if none is left, and returns the ms until it is really available
   * (0 if now); like Reserve().Delay(). The caller must wait that long, as later reservations queue
   * behind it.
   */
  reserve(): number {
    return (this.reserveWithin(Infinity) as Reservation).delayMs;
  }

  /**
   * As reserve(), but only when the token is available within `maxWaitMs`; otherwise takes nothing
   * and returns undefined, so refused waits leave no debt (x/time/rate's ReserveN with maxFutureReserve,
   * which Wait(ctx) uses with the context's deadline).
   */
  reserveWithin(maxWaitMs: number): Reservation | undefined {
    this.#refill();
    const tokens = this.#tokens - 1;
    const delayMs = tokens >= 0 ? 0 : (-tokens * 1000) / this.qps;
    if (delayMs > maxWaitMs) return undefined;
    this.#tokens = tokens;
    const actAt = this.#last + delayMs;
    this.#lastEvent = actAt;
    return {
      delayMs,
      cancel: () => {
        this.#cancel(actAt);
      },
    };
  }

  /** Takes a token only if one is available now; like Allow(). */
  tryAccept(): boolean {
    this.#refill();
    if (this.#tokens < 1) return false;
    this.#tokens -= 1;
    return true;
  }

  #cancel(actAt: number): void {
    const now = this.#clock.now();
    if (actAt <= now) return;
    // Tokens reserved after this one keep their place: they are not handed back.
    const restore = 1 - ((this.#lastEvent - actAt) * this.qps) / 1000;
    if (restore <= 0) return;
    this.#refill();
    this.#tokens = Math.min(this.burst, this.#tokens + restore);
    if (actAt === this.#lastEvent) {
      const previous = actAt - 1000 / this.qps;
      if (previous >= now) this.#lastEvent = previous;
    }
  }

  #refill(): void {
    const now = this.#clock.now();
    const elapsed = Math.max(0, now - this.#last);
    this.#tokens = Math.min(this.burst, this.#tokens + (elapsed * this.qps) / 1000);
    this.#last = now;
  }
}

/** One global bucket for all items (client-go's BucketRateLimiter); it keeps no per-item state. */
export class BucketRateLimiter implements RateLimiter {
  constructor(readonly bucket: TokenBucket) {}

  when(): number {
    return this.bucket.reserve();
  }

  forget(): void {
    // No per-item state.
  }

  numRequeues(): number {
    return 0;
  }
}

/** The longest delay of several limiters, each of which records the failure. */
export class MaxOfRateLimiter implements RateLimiter {
  readonly #limiters: readonly RateLimiter[];

  constructor(...limiters: RateLimiter[]) {
    this.#limiters = limiters;
  }

  when(item: string): number {
    return Math.max(0, ...this.#limiters.map((l) => l.when(item)));
  }

  forget(item: string): void {
    for (const l of this.#limiters) l.forget(item);
  }

  numRequeues(item: string): number {
    return Math.max(0, ...this.#limiters.map((l) => l.numRequeues(item)));
  }
}

/** client-go's DefaultControllerRateLimiter: max(per-item 5 ms·2^n capped at 1000 s, 10 qps burst 100). */
export function defaultControllerRateLimiter(clock: Clock = realClock): RateLimiter {
  return new MaxOfRateLimiter(
    new ItemExponentialFailureRateLimiter(5, 1_000_000),
    new BucketRateLimiter(new TokenBucket(10, 100, clock)),
  );
}
