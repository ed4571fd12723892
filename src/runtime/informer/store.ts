import type { KubernetesObject } from "@kubernetes/client-node";
import { silentLogger, type LogSink } from "../logger.js";

/** Values an object is filed under in one index, e.g. the claim names a pod mounts. */
export type IndexFunc<T> = (obj: T) => readonly string[];

export type Indexers<T> = Readonly<Record<string, IndexFunc<T>>>;

/** "namespace/name", or "name" for cluster-scoped objects (client-go's MetaNamespaceKeyFunc). */
export function objectKey(obj: KubernetesObject): string {
  const name = obj.metadata?.name;
  if (!name) throw new Error("object has no metadata.name");
  const ns = obj.metadata?.namespace;
  return ns ? `${ns}/${name}` : name;
}

/**
 * Freezes `obj` and everything reachable from it, in place. Cached objects are shared by every
 * consumer of an informer, so a change by one would silently corrupt what the others see; frozen,
 * such a change throws instead (ES modules run in strict mode). Date fields stay mutable through their
 * setters: freezing does not reach a Date's internal time.
 */
export function deepFreeze<T>(obj: T): T {
  if (obj !== null && typeof obj === "object" && !Object.isFrozen(obj)) {
    Object.freeze(obj);
    for (const value of Object.values(obj)) deepFreeze(value);
  }
  return obj;
}

/** What a store change means to event handlers. */
export type Change<T> =
  | { type: "add"; obj: T }
  | { type: "update"; old: T; obj: T }
  /** finalStateUnknown: the delete was inferred by a relist, `obj` is the last state seen (a tombstone). */
  | { type: "delete"; obj: T; finalStateUnknown: boolean };

/**
 * The read side of an informer's cache. Objects are deep-frozen and shared: a controller that wants to
 * change one works on a copy (`deepCopy(obj)`, util/deep-copy.ts) and writes that to the apiserver.
 */
export interface Indexer<T> {
  get(key: string): T | undefined;
  list(): T[];
  listKeys(): string[];
  /** Objects whose index function returned `value`; throws for an index never registered. */
  byIndex(indexName: string, value: string): T[];
  readonly size: number;
}

/** A keyed object cache with secondary indexes, like client-go's thread-safe store + indexer. */
export class Store<T extends KubernetesObject> implements Indexer<T> {
  readonly #items = new Map<string, T>();
  /** index name → its function and, per indexed value, the keys of the objects filed under it */
  readonly #indexes = new Map<string, Index<T>>();
  readonly #log: LogSink;

  constructor(logger: LogSink = silentLogger) {
    this.#log = logger;
  }

  /** Registers indexes, filing the objects already cached. Re-registering a name is an error. */
  addIndexers(indexers: Indexers<T>): void {
    for (const [name, fn] of Object.entries(indexers)) {
      // Controllers sharing an index (e.g. pods by claim) register the same function: a no-op, like
      // client-go's AddIndexerIfNotPresent. A different function under a taken name is a bug.
      const existing = this.#indexes.get(name);
      if (existing?.fn === fn) continue;
      if (existing) throw new Error(`index ${name} is already registered with another function`);
      const index = { name, fn, byValue: new Map<string, Set<string>>() };
      this.#indexes.set(name, index);
      for (const [key, obj] of this.#items) this.#file(index, key, obj);
    }
  }

  get size(): number {
    return this.#items.size;
  }

  get(key: string): T | undefined {
    return this.#items.get(key);
  }

  list(): T[] {
    return [...this.#items.values()];
  }

  listKeys(): string[] {
    return [...this.#items.keys()];
  }

  byIndex(indexName: string, value: string): T[] {
    const index = this.#indexes.get(indexName);
    if (!index) throw new Error(`index ${indexName} is not registered`);
    return [...(index.byValue.get(value) ?? [])]
      .map((key) => this.#items.get(key))
      .filter((o) => o !== undefined);
  }

  /** Adds or replaces the object under its key; returns the one it replaced. */
  upsert(obj: T): T | undefined {
    const key = objectKey(obj);
    const old = this.#items.get(key);
    if (old) this.#unindex(key, old);
    this.#items.set(key, deepFreeze(obj));
    this.#index(key, obj);
    return old;
  }

  /** Removes the object under `key`; returns it. */
  delete(key: string): T | undefined {
    const old = this.#items.get(key);
    if (old) {
      this.#unindex(key, old);
      this.#items.delete(key);
    }
    return old;
  }

  /**
   * Makes the cache equal to a full list, returning what changed so handlers converge too: objects
   * missing from the list are deleted (as tombstones), new ones added, ones with another
   * resourceVersion updated. An object deleted and re-created under the same name while we were not
   * watching (another uid) is a delete plus an add, not an update, so no handler mistakes the new
   * object for the old one.
   */
  replace(objs: readonly T[]): Change<T>[] {
    const next = new Map(objs.map((o) => [objectKey(o), o]));
    const changes: Change<T>[] = [];
    for (const [key, old] of this.#items) {
      const obj = next.get(key);
      if (!obj || obj.metadata?.uid !== old.metadata?.uid) {
        this.delete(key);
        changes.push({ type: "delete", obj: old, finalStateUnknown: true });
      }
    }
    for (const obj of next.values()) {
      const old = this.get(objectKey(obj));
      if (!old) changes.push({ type: "add", obj });
      else if (old.metadata?.resourceVersion !== obj.metadata?.resourceVersion)
        changes.push({ type: "update", old, obj });
      else continue;
      this.upsert(obj);
    }
    return changes;
  }

  #index(key: string, obj: T): void {
    for (const index of this.#indexes.values()) this.#file(index, key, obj);
  }

  #file(index: Index<T>, key: string, obj: T): void {
    for (const value of this.#values(index, key, obj)) {
      let keys = index.byValue.get(value);
      if (!keys) index.byValue.set(value, (keys = new Set()));
      keys.add(key);
    }
  }

  #unindex(key: string, obj: T): void {
    for (const index of this.#indexes.values()) {
      for (const value of this.#values(index, key, obj)) {
        const keys = index.byValue.get(value);
        keys?.delete(key);
        if (keys?.size === 0) index.byValue.delete(value);
      }
    }
  }

  /** A throwing index function must not keep an object out of the cache: it is logged and unfiled. */
  #values(index: Index<T>, key: string, obj: T): readonly string[] {
    try {
      return index.fn(obj);
    } catch (err) {
      this.#log.error({ err, index: index.name, key }, "index function failed; object not indexed");
      return [];
    }
  }
}

interface Index<T> {
  name: string;
  fn: IndexFunc<T>;
  byValue: Map<string, Set<string>>;
}
