import { LRUCache } from "lru-cache";
import type { ControllerName } from "../app/controller-names.js";
import type { Clock } from "../runtime/clock.js";
import { tieConsequences, type Decision, type DecisionKind } from "./decisions.js";

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

const MAX_PENDING_PER_KEY = 8;

/** A condition's window: the value each side wrote last since it opened. */
interface Settling {
  kvc?: Decision;
  upstream?: Decision;
  cancel: () => void;
}

interface Pending {
  decision: Decision;
  side: "kvc" | "upstream";
  cancel: () => void;
  /** A consequence of a tie (tieConsequences): one-sided, it is part of that tie. */
  tie?: boolean;
}

/**
 * Matches kvc's intended decisions with KCM's observed ones by key. A decision waits up to the grace
 * window for the other side's; unmatched, it is kvc-only or upstream-only. Both sides repeat
 * themselves: in shadow mode kvc's writes never land, so its syncs retry the same decision, and one
 * binding shows in both the PV and the claim. A side's decision equal to the last it made for the
 * same key is therefore not counted again (for kvc: until the observed state of that key changes other
 * than in answer to it), nor is one equal to the other side's settled decision. Memory is bounded:
 * pending decisions are at most MAX_PENDING_PER_KEY per key, and the remembered last decisions an LRU
 * of `maxKeys`.
 */
export class Comparator {
  readonly #o: ComparatorOptions;
  /** Per key, the decisions of one side waiting for the other's, oldest first. */
  readonly #pending = new Map<string, Pending[]>();
  readonly #last: { kvc: LRUCache<string, string>; upstream: LRUCache<string, string> };
  /**
   * Per side and key ("kvc phase pv pv-1"), the value a tie implies that side decides alone and that
   * has not come yet; forgotten when it comes or a grace window after the tie. A tie excuses only the
   * decisions of that one binding, not what later happens to its volumes.
   */
  readonly #implied = new Map<string, { value: string; cancel: () => void }>();
  /**
   * Per key of a condition (level state, not a decision of one write), the value each side last
   * wrote since the key's window opened; compared when it closes, a grace window later.
   */
  readonly #settling = new Map<string, Settling>();

  constructor(o: ComparatorOptions) {
    this.#o = o;
    const max = o.maxKeys ?? 50_000;
    this.#last = { kvc: new LRUCache({ max }), upstream: new LRUCache({ max }) };
  }

  /** A write kvc would have sent. */
  intended(decision: Decision): void {
    this.#add("kvc", decision);
  }

  /**
   * A write kvc would have sent from an older version than the informers hold, or of what KCM already
   * did (KCM was first and kvc's cache lagged): agrees with upstream's pending decision of the same
   * value; differs from its pending decision of `upstream`, what was decided for the key from that
   * same version. Else it is no decision: kvc decides again from the version the informers hold.
   */
  confirmed(decision: Decision, upstream?: string): void {
    if (decision.kind === "condition") {
      if (this.#settling.has(decision.key)) this.#settle("kvc", decision);
      return;
    }
    const waiting = this.#pending.get(decision.key) ?? [];
    const pending = (value: string | undefined) =>
      waiting.some((p) => p.side === "upstream" && p.decision.value === value);
    if (pending(decision.value)) this.#add("kvc", decision);
    else if (upstream !== undefined && pending(upstream)) this.#add("kvc", decision, upstream);
  }

  /** A change KCM made, seen through the informers. */
  observed(decision: Decision): void {
    this.#add("upstream", decision);
  }

  /** Decisions still waiting for the other side. */
  get pending(): number {
    let n = this.#settling.size;
    for (const list of this.#pending.values()) n += list.length;
    return n;
  }

  /** The decisions waiting for the other side (at most `max`). */
  waiting(max: number): { side: "kvc" | "upstream"; key: string; value: string }[] {
    const settling = [...this.#settling.values()].flatMap((w) =>
      (["kvc", "upstream"] as const).flatMap((side) => {
        const d = w[side];
        return d ? [{ side, decision: d }] : [];
      }),
    );
    return [...[...this.#pending.values()].flat(), ...settling]
      .slice(0, max)
      .map((p) => ({ side: p.side, key: p.decision.key, value: p.decision.value }));
  }

  /**
   * Drops the pending decisions whose key starts with `prefix`, uncounted: their subject is gone, and
   * whether a side's write about it came before or after is a race (KCM's write to it fails).
   */
  forget(prefix: string): void {
    for (const [key, list] of this.#pending) {
      if (!key.startsWith(prefix)) continue;
      for (const p of list) p.cancel();
      this.#pending.delete(key);
    }
  }

  /**
   * The object a condition is about began deleting, or is gone, and neither side keeps the condition
   * of such an object: a window only one side wrote in is dropped, uncounted (the other side may have
   * met the deleting version first, e.g. a claim deleted the moment it was Bound); one both sides
   * wrote in is compared now.
   */
  conditionEnded(key: string): void {
    const window = this.#settling.get(key);
    if (!window) return;
    window.cancel();
    if (window.kvc && window.upstream) this.#close(key, window);
    else this.#settling.delete(key);
  }

  /** Stops the grace timers (pending decisions are dropped, not counted). */
  stop(): void {
    for (const list of this.#pending.values()) for (const p of list) p.cancel();
    this.#pending.clear();
    for (const { cancel } of this.#implied.values()) cancel();
    this.#implied.clear();
    for (const { cancel } of this.#settling.values()) cancel();
    this.#settling.clear();
  }

  /** `counterpart`: the other side's pending value `d` answers when none has the same value. */
  #add(side: "kvc" | "upstream", d: Decision, counterpart?: string): void {
    if (d.kind === "condition") {
      this.#settle(side, d);
      return;
    }
    const other = side === "kvc" ? "upstream" : "kvc";
    if (this.#last[side].get(d.key) === d.value) return;
    this.#last[side].set(d.key, d.value);
    const waiting = this.#pending.get(d.key) ?? [];
    // Already what the other side decided, its decision settled: a late repeat, not a new decision.
    if (waiting.length === 0 && this.#last[other].get(d.key) === d.value) return;
    if (waiting[0]?.side === other) {
      // One side may be a few steps ahead (a PV Available, then Bound): the same value matches first.
      const same = waiting.findIndex((p) => p.decision.value === d.value);
      const answered = waiting.findIndex((p) => p.decision.value === counterpart);
      const [match] = waiting.splice(same >= 0 ? same : Math.max(answered, 0), 1);
      if (waiting.length === 0) this.#pending.delete(d.key);
      if (!match) return;
      match.cancel();
      const [kvc, upstream] = side === "kvc" ? [d, match.decision] : [match.decision, d];
      const outcome = matchOutcome(kvc, upstream);
      if (outcome === "tie") this.#expectConsequences(kvc, upstream);
      this.#report(outcome, kvc, kvc.value, upstream.value);
      return;
    }
    // The observed state changed, not in answer to a decision of kvc's: kvc's next decision on this
    // key counts again, even if it repeats. An answer (matched above) is no such change: kvc's next
    // write of the same binding (the claim after the PV) may follow it, from a cache that lags.
    if (side === "upstream" && this.#last.kvc.get(d.key) !== d.value) this.#last.kvc.delete(d.key);
    const entry: Pending = {
      decision: d,
      side,
      cancel: this.#o.clock.setTimer(() => {
        this.#expire(d.key, entry);
      }, this.#o.graceMs),
    };
    const implied = this.#implied.get(`${side} ${d.key}`);
    if (implied?.value === d.value) {
      entry.tie = true;
      implied.cancel();
      this.#implied.delete(`${side} ${d.key}`);
    }
    waiting.push(entry);
    this.#pending.set(d.key, waiting);
    // Bounded: a key that changes faster than the other side follows settles its oldest at once.
    const oldest = waiting[0];
    if (waiting.length > MAX_PENDING_PER_KEY && oldest) {
      oldest.cancel();
      this.#expire(d.key, oldest);
    }
  }

  /**
   * A condition follows pods, which each side's cache sees at its own time: one may pass through a
   * value the other never writes (Unused=True from a claim version synced before the pod showed), so
   * conditions are compared by the value each side settles on within a grace window, not write by
   * write. A side repeating the value it settled on, with no window open, decides nothing new.
   */
  #settle(side: "kvc" | "upstream", d: Decision): void {
    let window = this.#settling.get(d.key);
    if (!window) {
      if (this.#last[side].get(d.key) === d.value) return;
      const opened: Settling = { cancel: () => {} };
      opened.cancel = this.#o.clock.setTimer(() => {
        this.#close(d.key, opened);
      }, this.#o.graceMs);
      window = opened;
      this.#settling.set(d.key, window);
    }
    window[side] = d;
  }

  /** A condition's window closed: the values each side settled on, compared. */
  #close(key: string, { kvc, upstream }: Settling): void {
    this.#settling.delete(key);
    if (kvc) this.#last.kvc.set(key, kvc.value);
    if (upstream) this.#last.upstream.set(key, upstream.value);
    const outcome = kvc && upstream ? matchOutcome(kvc, upstream) : kvc ? "kvc-only" : "upstream-only";
    const d = kvc ?? upstream;
    if (d) this.#report(outcome, d, kvc?.value, upstream?.value);
  }

  /** `entry` waited in vain: one-sided, or a tie's consequence. */
  #expire(key: string, entry: Pending): void {
    const list = this.#pending.get(key) ?? [];
    const i = list.indexOf(entry);
    if (i < 0) return;
    list.splice(i, 1);
    if (list.length === 0) this.#pending.delete(key);
    const { decision: d, side } = entry;
    const [kvc, upstream] = side === "kvc" ? [d.value, undefined] : [undefined, d.value];
    if (entry.tie) this.#report("tie", d, kvc, upstream);
    else this.#report(side === "kvc" ? "kvc-only" : "upstream-only", d, kvc, upstream);
  }

  /**
   * A tie's consequences: each marks its pending decision, or waits a grace window for it (one-sided
   * decisions wait as long for the other side's).
   */
  #expectConsequences(kvc: Decision, upstream: Decision): void {
    for (const c of tieConsequences(kvc, upstream)) {
      const entry = this.#pending
        .get(c.key)
        ?.find((p) => p.side === c.side && p.decision.value === c.value && !p.tie);
      if (entry) {
        entry.tie = true;
        continue;
      }
      const id = `${c.side} ${c.key}`;
      this.#implied.get(id)?.cancel();
      const cancel = this.#o.clock.setTimer(() => {
        if (this.#implied.get(id)?.cancel === cancel) this.#implied.delete(id);
      }, this.#o.graceMs);
      this.#implied.set(id, { value: c.value, cancel });
    }
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
