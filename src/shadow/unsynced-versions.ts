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
    this.#add(old, version);
  }

  /**
   * Keeps `synced`, a version the controller synced already, to be synced again when the informer
   * holds a newer one (`latest`): the world around it changed (a provisioned volume for the claim
   * appeared), and the newer version may be KCM's answer to that change, which kvc must decide too.
   */
  again(synced: T, latest: T | undefined): void {
    const version = resourceVersionOf(synced);
    const newest = resourceVersionOf(latest);
    if (version === undefined || newest === undefined || newest <= version) return;
    this.#add(synced, version);
  }

  /** Adds `o` in version order (oldest first), once, dropping the oldest beyond MAX_PER_KEY. */
  #add(o: T, version: bigint): void {
    const key = objectKey(o);
    const list = this.#byKey.get(key) ?? [];
    if (list.some((k) => resourceVersionOf(k) === version)) return;
    const at = list.findIndex((k) => (resourceVersionOf(k) ?? 0n) > version);
    list.splice(at === -1 ? list.length : at, 0, o);
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
