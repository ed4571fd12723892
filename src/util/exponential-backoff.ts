/** The first wait after a failure, doubled per further failure ... */
const INITIAL_BACKOFF_MS = 500;
/** ... up to this (upstream's maxDurationBeforeRetry, 2m2s). */
const MAX_BACKOFF_MS = 122_000;

/**
 * The retry wait of one failing operation (upstream goroutinemap/exponentialbackoff), shared by the
 * PV binder's and the attach/detach controller's operation tables and the FlexVolume prober. Times are
 * Clock milliseconds. (The reflector's retry delays are runtime/informer's ExponentialBackoffManager.)
 */
export class ExponentialBackoff {
  #lastErrorAt = 0;
  /** 0 until the first failure. */
  #durationMs = 0;

  /** Records a failure at `now`: 500 ms the first time, then doubled, up to 2m2s. */
  update(now: number): void {
    this.#durationMs =
      this.#durationMs === 0 ? INITIAL_BACKOFF_MS : Math.min(this.#durationMs * 2, MAX_BACKOFF_MS);
    this.#lastErrorAt = now;
  }

  /** Whether the wait since the last failure has passed; always true before any failure. */
  safeToRetry(now: number): boolean {
    return this.#durationMs === 0 || now - this.#lastErrorAt > this.#durationMs;
  }

  get durationMs(): number {
    return this.#durationMs;
  }
}
