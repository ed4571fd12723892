import type { V1LabelSelector } from "@kubernetes/client-node";
import { CapacityOrder, compareSized, type Sized } from "./capacity-order.js";
import type { Labels } from "./pv-helpers.js";

/** What a VolumeGroup holds: a sized item and the labels a claim's selector reads. */
export interface Labelled extends Sized {
  /** The PV's labels as they were when it was added (entries are snapshots). */
  readonly labels: Labels;
}

/**
 * A requirement of a selector that only volumes carrying one of `values` under `key` satisfy
 * (matchLabels, and matchExpressions with In; Exists: any value): every volume the selector takes
 * is in one of the postings (key, value), so a lookup can walk those instead of the whole group.
 */
export interface SelectorAnchor {
  readonly key: string;
  /** Undefined: any value (Exists). */
  readonly values: readonly string[] | undefined;
}

/** An Exists anchor is walked only over a key with this many values at most (not a hostname). */
const MAX_EXISTS_VALUES = 16;

/** The anchors of a selector compileLabelSelector accepted; none: the selector narrows nothing cheaply. */
export function selectorAnchors(selector: V1LabelSelector | undefined): SelectorAnchor[] {
  const anchors: SelectorAnchor[] = [];
  for (const [key, value] of Object.entries(selector?.matchLabels ?? {}))
    anchors.push({ key, values: [value] });
  for (const expr of selector?.matchExpressions ?? []) {
    if (expr.operator === "In" && expr.values?.length) anchors.push({ key: expr.key, values: expr.values });
    if (expr.operator === "Exists") anchors.push({ key: expr.key, values: undefined });
  }
  return anchors;
}

/**
 * Volumes that differ only in capacity and labels (one VolumeIndex group), in (capacity, name)
 * order, and the same order per label (key, value): a selective claim (app=db among a million PVs)
 * walks the few volumes carrying its label, not every bigger volume of the group.
 */
export class VolumeGroup<T extends Labelled> {
  readonly #all = new CapacityOrder<T>();
  /** key → value → the group's volumes with that label. Own string-valued labels, as selectors read them. */
  readonly #postings = new Map<string, Map<string, CapacityOrder<T>>>();

  get isEmpty(): boolean {
    return this.#all.size === 0;
  }

  insert(item: T): void {
    this.#all.insert(item);
    forEachLabel(item.labels, (key, value) => {
      let byValue = this.#postings.get(key);
      if (!byValue) this.#postings.set(key, (byValue = new Map<string, CapacityOrder<T>>()));
      let posting = byValue.get(value);
      if (!posting) byValue.set(value, (posting = new CapacityOrder()));
      posting.insert(item);
    });
  }

  /** Sorts the pending inserts of the group and of its postings (CapacityOrder.settle). */
  settle(): void {
    this.#all.settle();
    for (const byValue of this.#postings.values()) for (const posting of byValue.values()) posting.settle();
  }

  remove(item: T): void {
    if (!this.#all.remove(item)) return;
    forEachLabel(item.labels, (key, value) => {
      const byValue = this.#postings.get(key);
      const posting = byValue?.get(value);
      if (!byValue || !posting) return;
      posting.remove(item);
      if (posting.size === 0) byValue.delete(value);
      if (byValue.size === 0) this.#postings.delete(key);
    });
  }

  /**
   * The smallest item (capacity, then name) with capacity ≥ min that `accept` takes. `accept` must
   * apply the whole selector: the anchors only choose where to look. With anchors, the one with the
   * fewest volumes is walked: the first accepted item of each of its postings, the smallest of those.
   */
  first(min: Sized, anchors: readonly SelectorAnchor[], accept: (item: T) => boolean): T | undefined {
    let postings: CapacityOrder<T>[] | undefined;
    let fewest = this.#all.size;
    for (const { key, values } of anchors) {
      const byValue = this.#postings.get(key);
      if (values === undefined && (byValue?.size ?? 0) > MAX_EXISTS_VALUES) continue;
      const lists: CapacityOrder<T>[] = [];
      let size = 0;
      for (const value of values ?? byValue?.keys() ?? []) {
        const posting = byValue?.get(value);
        if (posting) {
          lists.push(posting);
          size += posting.size;
        }
      }
      if (size <= fewest) {
        postings = lists;
        fewest = size;
      }
    }
    if (!postings) return this.#all.first(min, accept);
    let best: T | undefined;
    for (const posting of postings) {
      const found = posting.first(min, accept);
      if (found && (!best || compareSized(found, best) < 0)) best = found;
    }
    return best;
  }
}

/** Own, string-valued labels: the ones a label selector can match (labelValue in pv-helpers). */
function forEachLabel(labels: Labels, visit: (key: string, value: string) => void): void {
  if (labels == null || typeof labels !== "object") return;
  for (const key of Object.keys(labels)) {
    const value = labels[key];
    if (typeof value === "string") visit(key, value);
  }
}
