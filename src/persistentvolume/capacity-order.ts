import { compareQuantities, tryParseQuantity, type Quantity } from "../util/quantity.js";

/** What a CapacityOrder holds: a named item with a parsed capacity. */
export interface Sized {
  readonly name: string;
  readonly capacity: Quantity;
  /** capacityKey(capacity), computed once: most comparisons need no Quantity arithmetic. */
  readonly capacityKey: number;
}

/**
 * The capacity as a number when the number is exact (a whole value below 10^15, which covers bytes
 * up to 888 TiB), else NaN: two exact keys compare as the quantities do; any other pair goes
 * through compareQuantities.
 */
export function capacityKey(q: Quantity): number {
  if (q.sign === 0) return 0;
  if (q.exponent < 0 || q.digits.length + q.exponent > 15) return NaN;
  return q.sign * Number(q.digits) * 10 ** q.exponent;
}

/** A parsed capacity and its key, shared by every PV whose capacity has the same text. */
export interface Capacity {
  readonly quantity: Quantity;
  readonly key: number;
}

/** Capacity texts seen lately; cleared when full. Most clusters use few distinct sizes. */
const parsed = new Map<string, Capacity | undefined>();
const PARSED_MAX = 10_000;

/**
 * tryParseQuantity and capacityKey of a capacity text, memoized: at a million PVs, parsing is a
 * fifth of the index's build, and PVs of one size share one Quantity instead of a copy each.
 */
export function parseCapacity(text: string | undefined): Capacity | undefined {
  if (typeof text !== "string" || text.length > 64) return capacityOf(tryParseQuantity(text));
  if (parsed.has(text)) return parsed.get(text);
  if (parsed.size >= PARSED_MAX) parsed.clear();
  const capacity = capacityOf(tryParseQuantity(text));
  parsed.set(text, capacity);
  return capacity;
}

function capacityOf(quantity: Quantity | undefined): Capacity | undefined {
  return quantity === undefined ? undefined : { quantity, key: capacityKey(quantity) };
}

/** (capacity, name) ascending; names are unique, so this is a total order. */
export function compareSized(a: Sized, b: Sized): number {
  const byKey = a.capacityKey - b.capacityKey;
  if (byKey !== 0) return byKey === byKey ? byKey : compareQuantities(a.capacity, b.capacity) || byName(a, b);
  return byName(a, b);
}

const byName = (a: Sized, b: Sized): number => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0);

/** A capacity to search from: a Sized without a name. */
export function capacityProbe(capacity: Quantity): Sized {
  return { name: "", capacity, capacityKey: capacityKey(capacity) };
}

/**
 * Chunks of at most 2·CHUNK items keep an insert or removal from moving a whole 100k-PV group; small
 * ones keep the shift of an insert short (measured at a million PVs: 64 builds faster than 512).
 */
const CHUNK = 64;

/** Pending inserts go in one by one while the sorted items outnumber them this many times over. */
const BULK_RATIO = 16;

/**
 * A run of items in order, with their capacity keys alongside: at a million PVs a binary search
 * that reads an item's key from the item misses the cache at every step; the keys array is
 * contiguous. Items are read only when keys tie (then by name) or are not exact.
 */
interface Chunk<T> {
  readonly items: T[];
  readonly keys: number[];
}

/** Whether the chunk's item at i comes at or after `item`. */
function atOrAfter<T extends Sized>(chunk: Chunk<T>, i: number, item: T): boolean {
  const byKey = (chunk.keys[i] as number) - item.capacityKey;
  if (byKey > 0) return true;
  if (byKey < 0) return false;
  return compareSized(chunk.items[i] as T, item) >= 0;
}

/** Whether the chunk's item at i has capacity ≥ min. */
function fitsAt<T extends Sized>(chunk: Chunk<T>, i: number, min: Sized): boolean {
  const byKey = (chunk.keys[i] as number) - min.capacityKey;
  if (byKey === byKey) return byKey >= 0;
  return compareQuantities((chunk.items[i] as T).capacity, min.capacity) >= 0;
}

/**
 * Items in (capacity, name) order, as a list of sorted chunks. Inserts wait in a pending list until
 * the order is read (first, remove) or settled: a bulk load (the informers' initial list, a million
 * PVs) is then one sort and one merge instead of a binary insertion per item (issue 30 goal 3).
 */
export class CapacityOrder<T extends Sized> {
  readonly #chunks: Chunk<T>[] = [];
  /** The key of each chunk's last item: the search for a chunk reads this one array. */
  readonly #lastKeys: number[] = [];
  /** Items in the chunks. */
  #sorted = 0;
  #pending: T[] = [];

  get size(): number {
    return this.#sorted + this.#pending.length;
  }

  insert(item: T): void {
    this.#pending.push(item);
  }

  /** Sorts the pending inserts into the chunks: one by one when few, else by one merge. */
  settle(): void {
    const pending = this.#pending;
    if (pending.length === 0) return;
    this.#pending = [];
    if (pending.length * BULK_RATIO <= this.#sorted) {
      for (const item of pending) this.#insertOne(item);
      return;
    }
    pending.sort(compareSized);
    const merged = mergeSorted(
      this.#chunks.flatMap((chunk) => chunk.items),
      pending,
    );
    this.#chunks.length = 0;
    this.#lastKeys.length = 0;
    for (let i = 0; i < merged.length; i += CHUNK) {
      const items = merged.slice(i, i + CHUNK);
      const chunk = { items, keys: items.map((item) => item.capacityKey) };
      this.#chunks.push(chunk);
      this.#lastKeys.push(lastKey(chunk));
    }
    this.#sorted = merged.length;
  }

  #insertOne(item: T): void {
    const chunks = this.#chunks;
    this.#sorted++;
    const c = Math.min(this.#chunkOf(item), chunks.length - 1);
    const chunk = chunks[c];
    if (!chunk) {
      chunks.push({ items: [item], keys: [item.capacityKey] });
      this.#lastKeys.push(item.capacityKey);
      return;
    }
    const { items, keys } = chunk;
    const at = indexIn(chunk, item);
    // Shifting by hand: Array.prototype.splice costs more than the move itself.
    items.push(item);
    keys.push(item.capacityKey);
    for (let j = items.length - 1; j > at; j--) {
      items[j] = items[j - 1] as T;
      keys[j] = keys[j - 1] as number;
    }
    items[at] = item;
    keys[at] = item.capacityKey;
    if (items.length > 2 * CHUNK) {
      const split = { items: items.splice(CHUNK), keys: keys.splice(CHUNK) };
      chunks.splice(c + 1, 0, split);
      this.#lastKeys.splice(c + 1, 0, lastKey(split));
    }
    this.#lastKeys[c] = lastKey(chunk);
  }

  remove(item: T): boolean {
    this.settle();
    const chunks = this.#chunks;
    const c = this.#chunkOf(item);
    const chunk = chunks[c];
    if (!chunk) return false;
    const i = indexIn(chunk, item);
    if (chunk.items[i] !== item) return false;
    this.#sorted--;
    chunk.items.splice(i, 1);
    chunk.keys.splice(i, 1);
    const next = chunks[c + 1];
    if (chunk.items.length === 0) {
      chunks.splice(c, 1);
      this.#lastKeys.splice(c, 1);
      return true;
    }
    if (next && chunk.items.length + next.items.length <= CHUNK) {
      chunk.items.push(...next.items);
      chunk.keys.push(...next.keys);
      chunks.splice(c + 1, 1);
      this.#lastKeys.splice(c + 1, 1);
    }
    this.#lastKeys[c] = lastKey(chunk);
    return true;
  }

  /** The smallest item with capacity ≥ min.capacity that `accept` takes. */
  first(min: Sized, accept: (item: T) => boolean): T | undefined {
    this.settle();
    const chunks = this.#chunks;
    // The first chunk whose last item fits, then the first fitting item in it.
    let lo = 0;
    let hi = chunks.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      const byKey = (this.#lastKeys[mid] as number) - min.capacityKey;
      const chunk = byKey === byKey ? undefined : (chunks[mid] as Chunk<T>);
      if (chunk ? fitsAt(chunk, chunk.items.length - 1, min) : byKey >= 0) hi = mid;
      else lo = mid + 1;
    }
    for (let c = lo; c < chunks.length; c++) {
      const chunk = chunks[c] as Chunk<T>;
      const items = chunk.items;
      let i = 0;
      if (c === lo) {
        let end = items.length;
        while (i < end) {
          const mid = (i + end) >>> 1;
          if (fitsAt(chunk, mid, min)) end = mid;
          else i = mid + 1;
        }
      }
      for (; i < items.length; i++) {
        const item = items[i] as T;
        if (accept(item)) return item;
      }
    }
    return undefined;
  }

  /** The first chunk whose last item is ≥ item (chunks.length if none). */
  #chunkOf(item: T): number {
    const chunks = this.#chunks;
    let lo = 0;
    let hi = chunks.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      const byKey = (this.#lastKeys[mid] as number) - item.capacityKey;
      let after = byKey > 0;
      if (!after && !(byKey < 0)) {
        const chunk = chunks[mid] as Chunk<T>;
        after = atOrAfter(chunk, chunk.items.length - 1, item);
      }
      if (after) hi = mid;
      else lo = mid + 1;
    }
    return lo;
  }
}

const lastKey = <T>(chunk: Chunk<T>): number => chunk.keys[chunk.keys.length - 1] as number;

/** The first index in a sorted chunk whose item is ≥ item. */
function indexIn<T extends Sized>(chunk: Chunk<T>, item: T): number {
  let lo = 0;
  let hi = chunk.items.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (atOrAfter(chunk, mid, item)) hi = mid;
    else lo = mid + 1;
  }
  return lo;
}

/** The items of two sorted arrays in one sorted array. */
function mergeSorted<T extends Sized>(a: readonly T[], b: readonly T[]): T[] {
  const out = new Array<T>(a.length + b.length);
  let i = 0;
  let j = 0;
  let k = 0;
  while (i < a.length && j < b.length)
    out[k++] = compareSized(a[i] as T, b[j] as T) <= 0 ? (a[i++] as T) : (b[j++] as T);
  while (i < a.length) out[k++] = a[i++] as T;
  while (j < b.length) out[k++] = b[j++] as T;
  return out;
}
