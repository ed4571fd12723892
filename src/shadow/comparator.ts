import { LRUCache } from "lru-cache";
import type { ControllerName } from "../controller-names.js";
import type { Clock } from "../runtime/clock.js";
import type { Decision, DecisionKind } from "./decisions.js";

export type Outcome = "agree" | "differ" | "kvc-only" | "upstream-only" | "tie";

export const OUTCOMES: readonly Outcome[] = ["agree", "differ", "kvc-only", "upstream-only", "tie"];

/** One compared decision; `kvc` or `upstream` is absent when only one side decided. */
export interface Comparison {
  outcome: Outcome;
  controller: ControllerName;
  kind: DecisionKind;
  key: string;
  kvc?: string;
  upstream?: string;
  /** Wall-clock time of the comparison (ISO 8601). */
  at: string;
}

export interface ComparatorOptions {
  clock: Clock;
  /** How long one side's decision waits for the other's before it is counted as one-sided. */
  graceMs: number;
  /** Called once per compared decision. */
  onComparison: (c: Comparison) => void;
  /** Wall-clock time for reports (tests pass a fixed one). */
  now?: () => Date;
  /** How many keys' last decisions are remembered for deduplication (oldest forgotten first). */
  maxKeys?: number;
}

interface Pending {
  decision: Decision;
  side: "kvc" | "upstream";
  cancel: () => void;
}

/**
 * Matches kvc's intended decisions with KCM's observed ones by key. A decision waits up to the grace
 * window for the other side's; unmatched, it is kvc-only or upstream-only. Both sides repeat
 * themselves: in shadow mode kvc's writes never land, so its syncs retry the same decision, and one
 * binding shows in both the PV and the claim. A side's decision equal to the last it made for the
 * same key is therefore not counted again (for kvc: until the observed state of that key changes), nor
 * is one equal to the other side's settled decision. Memory is bounded: pending decisions are at most one per key and side, and the
 * remembered last decisions an LRU of `maxKeys`.
 */
export class Comparator {
  readonly #o: ComparatorOptions;
  readonly #pending = new Map<string, Pending>();
  readonly #last: { kvc: LRUCache<string, string>; upstream: LRUCache<string, string> };
  /** Volumes of recent ties: their phase changes, on one side only, follow from the tie. */
  readonly #tied: LRUCache<string, true>;

  constructor(o: ComparatorOptions) {
    this.#o = o;
    const max = o.maxKeys ?? 50_000;
    this.#last = { kvc: new LRUCache({ max }), upstream: new LRUCache({ max }) };
    this.#tied = new LRUCache({ max });
  }

  /** A write kvc would have sent. */
  intended(decision: Decision): void {
    this.#add("kvc", decision);
  }

  /**
   * A write kvc would have sent whose effect the observed state already shows (KCM was first and
   * kvc's cache lagged): agrees with upstream's pending decision, else is no decision.
   */
  confirmed(decision: Decision): void {
    const waiting = this.#pending.get(decision.key);
    if (waiting?.side !== "upstream" || waiting.decision.value !== decision.value) return;
    this.#add("kvc", decision);
  }

  /** A change KCM made, seen through the informers. */
  observed(decision: Decision): void {
    this.#add("upstream", decision);
  }

  /** Decisions still waiting for the other side. */
  get pending(): number {
    return this.#pending.size;
  }

  /** Stops the grace timers (pending decisions are dropped, not counted). */
  stop(): void {
    for (const p of this.#pending.values()) p.cancel();
    this.#pending.clear();
  }

  #add(side: "kvc" | "upstream", d: Decision): void {
    const other = side === "kvc" ? "upstream" : "kvc";
    if (this.#last[side].get(d.key) === d.value) return;
    this.#last[side].set(d.key, d.value);
    // The observed state changed: kvc's next decision on this key counts again, even if it repeats.
    if (side === "upstream" && this.#last.kvc.get(d.key) !== d.value) this.#last.kvc.delete(d.key);
    const waiting = this.#pending.get(d.key);
    // Already what the other side decided, its decision settled: a late repeat, not a new decision.
    if (!waiting && this.#last[other].get(d.key) === d.value) return;
    if (waiting?.side === other) {
      waiting.cancel();
      this.#pending.delete(d.key);
      const [kvc, upstream] = side === "kvc" ? [d, waiting.decision] : [waiting.decision, d];
      const outcome = matchOutcome(kvc, upstream);
      if (outcome === "tie") for (const v of [kvc.value, upstream.value]) this.#tied.set(v, true);
      this.#report(outcome, kvc, kvc.value, upstream.value);
      return;
    }
    // A newer decision of the same side replaces its pending one, whose grace window restarts.
    waiting?.cancel();
    const cancel = this.#o.clock.setTimer(() => {
      if (this.#pending.get(d.key)?.decision !== d) return;
      this.#pending.delete(d.key);
      if (d.volume !== undefined && this.#tied.has(d.volume)) {
        this.#report(
          "tie",
          d,
          side === "kvc" ? d.value : undefined,
          side === "upstream" ? d.value : undefined,
        );
      } else if (side === "kvc") this.#report("kvc-only", d, d.value, undefined);
      else this.#report("upstream-only", d, undefined, d.value);
    }, this.#o.graceMs);
    this.#pending.set(d.key, { decision: d, side, cancel });
  }

  #report(outcome: Outcome, d: Decision, kvc: string | undefined, upstream: string | undefined): void {
    this.#o.onComparison({
      outcome,
      controller: d.controller,
      kind: d.kind,
      key: d.key,
      ...(kvc !== undefined && { kvc }),
      ...(upstream !== undefined && { upstream }),
      at: (this.#o.now?.() ?? new Date()).toISOString(),
    });
  }
}

/** Same value: agree; upstream's among kvc's equally good choices: tie; else differ. */
export function matchOutcome(kvc: Decision, upstream: Decision): Outcome {
  if (kvc.value === upstream.value) return "agree";
  if (kvc.equivalents?.includes(upstream.value)) return "tie";
  return "differ";
}
