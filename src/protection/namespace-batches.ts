import { Queue } from "../runtime/workqueue/index.js";

/**
 * Upstream pvcProcessingStore: claim keys taken off the controller's queue, grouped by namespace so
 * one worker handles a namespace's claims together and shares one live pod list among them. A
 * namespace is queued once while it has keys waiting; keys arriving while it is being worked on
 * queue it again.
 */
export class NamespaceBatches {
  readonly #keys = new Map<string, string[]>();
  readonly namespaces = new Queue();

  add(namespace: string, key: string): void {
    const keys = this.#keys.get(namespace);
    if (keys) {
      keys.push(key);
      return;
    }
    this.#keys.set(namespace, [key]);
    this.namespaces.add(namespace);
  }

  /** The keys waiting in `namespace`, now owned by the caller. */
  take(namespace: string): string[] {
    const keys = this.#keys.get(namespace) ?? [];
    this.#keys.delete(namespace);
    return keys;
  }
}
