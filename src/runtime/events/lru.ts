/**
 * A map holding at most `size` entries that forgets the least recently used one, as the
 * groupcache/lru caches behind client-go's event correlation: a long-running controller sees
 * unboundedly many objects, so its per-object state must not grow with them.
 */
export class Lru<K, V> {
  readonly #entries = new Map<K, V>();

  constructor(readonly size: number) {}

  get(key: K): V | undefined {
    const value = this.#entries.get(key);
    if (value !== undefined) {
      // Map iterates in insertion order: re-inserting makes the key the most recent.
      this.#entries.delete(key);
      this.#entries.set(key, value);
    }
    return value;
  }

  set(key: K, value: V): void {
    this.#entries.delete(key);
    this.#entries.set(key, value);
    if (this.#entries.size > this.size) {
      const oldest = this.#entries.keys().next();
      if (!oldest.done) this.#entries.delete(oldest.value);
    }
  }
}
