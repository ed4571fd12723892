import type { KubernetesObject } from "@kubernetes/client-node";
import { objectKey } from "../runtime/informer/store.js";

/** At most this many versions kept per object (the oldest dropped first). */
const MAX_PER_KEY = 4;

/**
 * Shadow mode: versions an informer replaced before a controller's worker synced them. KCM acts on
 * the same objects; when its write reaches the informer before our worker synced the version it acted
 * on, syncing only the result finds nothing to do and never says what kvc would have decided. The
 * worker syncs these first (oldest first), then the informer's latest: it asks exactly that. With
 * `againWhenReplaced`, the version the worker synced last is kept too: KCM may have acted on it
 * because the world around it changed (a PV's claim deleted: KCM releases the PV the worker found
 * bound).
 */
export class UnsyncedVersions<T extends KubernetesObject> {
  readonly #byKey = new Map<string, T[]>();
  readonly #againWhenReplaced: boolean;

  constructor({ againWhenReplaced = false }: { againWhenReplaced?: boolean } = {}) {
    this.#againWhenReplaced = againWhenReplaced;
  }

  /** Keeps `old`, unless `synced` (the version the controller last synced) is newer, or as new. */
  keep(old: T, synced?: T): void {
    const version = resourceVersionOf(old);
    const seen = resourceVersionOf(synced);
    if (version === undefined) return;
    // Synced already (with againWhenReplaced, the version synced last is still kept).
    if (seen !== undefined && (this.#againWhenReplaced ? seen > version : seen >= version)) return;
    const key = objectKey(old);
    const list = this.#byKey.get(key) ?? [];
    if (list.some((o) => resourceVersionOf(o) === version)) return;
    list.push(old);
    if (list.length > MAX_PER_KEY) list.shift();
    this.#byKey.set(key, list);
  }

  /** The key's kept versions, oldest first; forgotten here. */
  take(key: string): T[] {
    const list = this.#byKey.get(key) ?? [];
    this.#byKey.delete(key);
    return list;
  }
}

/** A resourceVersion as a number, as the binder's cache compares them; undefined if it is none. */
export function resourceVersionOf(o: KubernetesObject | undefined): bigint | undefined {
  const text = o?.metadata?.resourceVersion ?? "";
  return /^\d{1,19}$/.test(text) ? BigInt(text) : undefined;
}
