import type { V1PersistentVolume, V1PersistentVolumeClaim } from "@kubernetes/client-node";
import { claimQuery, volumeMatches, type ClaimQuery } from "./volume-index.js";

/**
 * Claims whose last sync found no volume and can only wait for one to turn Available (no storage
 * class: nothing will provision one). Not upstream: upstream's claim waits for the periodic resync
 * (--pvclaimbinder-sync-period, 15 s) however soon a volume that fits it turns Available; kvc syncs
 * the longest-waiting claim a volume matches as soon as it does. The resync stays the fallback: a
 * woken claim that finds another volume, or none, waits as upstream's does.
 */
export class WaitingClaims {
  /** By claim key, oldest first; a claim that waits again keeps its place. */
  readonly #queries = new Map<string, ClaimQuery>();

  /** The claim found no volume. A claim that cannot be matched at all (bad request) is not kept. */
  wait(claim: V1PersistentVolumeClaim): void {
    const query = claimQuery(claim);
    if (!(query instanceof Error)) this.#queries.set(query.key, query);
  }

  /** The claim found a volume, or is gone. */
  forget(key: string): void {
    this.#queries.delete(key);
  }

  /** The longest-waiting claim `volume` matches as its version stands, forgotten here. */
  takeMatch(volume: V1PersistentVolume): V1PersistentVolumeClaim | undefined {
    for (const [key, query] of this.#queries) {
      if (!volumeMatches(query, volume)) continue;
      this.#queries.delete(key);
      return query.claim;
    }
    return undefined;
  }
}
