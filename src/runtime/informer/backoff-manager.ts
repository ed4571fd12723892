import type { Clock } from "../clock.js";

export interface ExponentialBackoffManagerOptions {
  clock: Clock;
  initialMs?: number;
  /** Cap of the base delay; jitter comes on top, so a delay is at most maxMs * (1 + jitter). */
  maxMs?: number;
  factor?: number;
  /** Each delay is base * (1 + random() * jitter): reconnecting clients spread out instead of stampeding. */
  jitter?: number;
  /** With no backoff asked for in this long, the next one starts again from initialMs. */
  resetAfterMs?: number;
  random?: () => number;
}

/**
 * client-go's wait.NewExponentialBackoffManager as the reflector uses it: 800 ms doubling to a 30 s
 * cap, jitter 1.0, reset after 2 minutes without a failure. It has no step limit: a reflector never
 * stops retrying. (Not util/exponential-backoff's ExponentialBackoff, which is goroutinemap's
 * per-operation "no retries permitted until".)
 */
export class ExponentialBackoffManager {
  readonly #clock: Clock;
  readonly #initialMs: number;
  readonly #maxMs: number;
  readonly #factor: number;
  readonly #jitter: number;
  readonly #resetAfterMs: number;
  readonly #random: () => number;
  #baseMs: number;
  #lastAt: number | undefined;

  constructor({
    clock,
    initialMs = 800,
    maxMs = 30_000,
    factor = 2,
    jitter = 1,
    resetAfterMs = 120_000,
    random = Math.random,
  }: ExponentialBackoffManagerOptions) {
    this.#clock = clock;
    this.#initialMs = initialMs;
    this.#maxMs = maxMs;
    this.#factor = factor;
    this.#jitter = jitter;
    this.#resetAfterMs = resetAfterMs;
    this.#random = random;
    this.#baseMs = initialMs;
  }

  /** The delay before the next retry, in milliseconds. */
  next(): number {
    const now = this.#clock.now();
    if (this.#lastAt !== undefined && now - this.#lastAt > this.#resetAfterMs) this.#baseMs = this.#initialMs;
    this.#lastAt = now;
    const base = this.#baseMs;
    this.#baseMs = Math.min(base * this.#factor, this.#maxMs);
    return base * (1 + this.#random() * this.#jitter);
  }
}
