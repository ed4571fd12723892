import { type Clock } from "./clock.js";

/** A write refused because this replica is not (or may no longer be) the leader. */
export class FencedError extends Error {
  override readonly name = "FencedError";
}

/**
 * Fences a leader's API writes in one place, under the client (ApiClients) rather than in each
 * controller, and its side effects outside the API where they happen (runSideEffect: FlexVolume
 * drivers, hostPath directories). Stricter than client-go, which only cancels the leader's context
 * when renewal fails:
 *
 * - Outside a term (before leading, after the term's signal aborted) every write is refused.
 * - A write is admitted only while the last successful renewal was sent less than renewDeadline ago
 *   (monotonic clock). Another replica takes over no sooner than leaseDuration (> renewDeadline) after
 *   it saw that renewal, so an admitted write cannot race a new leader's. A leader whose timers all
 *   fired late (resumed after SIGSTOP, a long GC or event-loop stall) therefore writes nothing until
 *   its elector has re-checked the Lease: writes wait for a fresh renewal, or fail when the term ends.
 * - Writes in flight when the renewal goes stale, or when the term ends, are aborted (the signal
 *   admit() returns): the apiserver may still apply one already sent, but none is sent afterwards.
 * - The client asks again (refusal()) the moment undici writes a request to its socket: a process
 *   stopped between admit() and that write (SIGSTOP, a paused VM) would otherwise send it on resume,
 *   before the timer that aborts stale writes has run. The chaos suite saw it: an Event created 1.1 s
 *   into the next leader's term.
 */
export class WriteGate {
  readonly #clock: Clock;
  readonly #renewDeadlineMs: number;
  #term: AbortSignal | undefined;
  /** Clock time at which the last successful renewal was sent. */
  #renewedAt = -Infinity;
  /** Aborted once the renewal goes stale; replaced by the next renewal. */
  #fresh = new AbortController();
  #cancelStaleTimer = () => {};
  readonly #waiters = new Set<() => void>();

  constructor(clock: Clock, renewDeadlineMs: number) {
    this.#clock = clock;
    this.#renewDeadlineMs = renewDeadlineMs;
  }

  /** A term begins (the acquiring write was reported to renewed()); it ends when `term` aborts. */
  lead(term: AbortSignal): void {
    this.#term = term;
    term.addEventListener(
      "abort",
      () => {
        this.#wake();
      },
      { once: true },
    );
    this.#wake();
  }

  /** A write to the Lease naming us, sent at `at` (clock time), succeeded. */
  renewed(at: number): void {
    if (at <= this.#renewedAt) return;
    this.#renewedAt = at;
    if (this.#fresh.signal.aborted) this.#fresh = new AbortController();
    this.#cancelStaleTimer();
    const fresh = this.#fresh;
    this.#cancelStaleTimer = this.#clock.setTimer(
      () => {
        fresh.abort(this.#staleError());
      },
      at + this.#renewDeadlineMs - this.#clock.now(),
    );
    this.#wake();
  }

  /**
   * Resolves when a write may be sent, with a signal that aborts the write if the gate closes while it
   * is in flight; rejects with FencedError once the term is over (or before one began).
   */
  async admit(): Promise<AbortSignal> {
    for (;;) {
      const refusal = this.refusal();
      const term = this.#term;
      if (!term || term.aborted) throw refusal ?? new FencedError("not leading");
      if (!refusal) return AbortSignal.any([term, this.#fresh.signal]);
      // Stale: wait for the elector to renew or give up.
      await new Promise<void>((resolve) => this.#waiters.add(resolve));
    }
  }

  /**
   * Runs a side effect outside the API (a FlexVolume driver's attach or detach, a hostPath directory
   * made or removed) under the same rule as an API write: admitted as admit() admits, then asked again
   * (refusal()) in the synchronous step that starts it, as the client asks when its request reaches
   * the socket, so a process stopped between the two starts nothing on resuming. `start` must begin
   * the effect before it first awaits; its signal aborts once the gate closes (a driver call in flight
   * is killed). Rejects with FencedError once the term is over.
   */
  async runSideEffect<T>(start: (signal: AbortSignal) => Promise<T>): Promise<T> {
    for (;;) {
      const signal = await this.admit();
      if (!this.refusal()) return start(signal);
    }
  }

  /**
   * Why a write may not be sent at this moment; undefined when it may. admit() asks it, and the client
   * asks it again the moment its HTTP library writes the request (see ApiClients).
   */
  refusal(): FencedError | undefined {
    const term = this.#term;
    if (!term) return new FencedError("not leading: API writes are refused");
    if (term.aborted) return new FencedError(`no longer leading (${reasonOf(term)}): API writes are refused`);
    if (this.#clock.now() - this.#renewedAt < this.#renewDeadlineMs && !this.#fresh.signal.aborted) {
      return undefined;
    }
    // Stale, timers not yet run (or the stale timer fired before the event loop got here): abort what
    // is in flight too.
    this.#fresh.abort(this.#staleError());
    return this.#staleError();
  }

  #wake(): void {
    const waiters = [...this.#waiters];
    this.#waiters.clear();
    for (const w of waiters) w();
    if (this.#term?.aborted) this.#cancelStaleTimer();
  }

  #staleError(): FencedError {
    return new FencedError(
      `the lease was last renewed more than ${this.#renewDeadlineMs} ms ago: API writes wait for a renewal`,
    );
  }
}

function reasonOf(signal: AbortSignal): string {
  const r: unknown = signal.reason;
  return r instanceof Error ? r.message : String(r);
}

/** What a side effect outside the API needs of the gate (the plugins take this much of it). */
export type SideEffectGate = Pick<WriteGate, "runSideEffect">;
