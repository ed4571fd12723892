import type { KubernetesObject, V1PersistentVolume, V1PersistentVolumeClaim } from "@kubernetes/client-node";
import { deepFreeze, objectKey } from "../runtime/informer/store.js";
import type { LogSink } from "../runtime/logger.js";
import { VolumeIndex, type MatchResult } from "./volume-index.js";

/**
 * The controller's own view of PVs and PVCs: the last version it saw from the informers or wrote
 * itself. Binding makes four writes whose watch events arrive later; without this cache a sync in
 * between would see the informer's stale copies and try to redo (and conflict on) what was just
 * written. Objects are frozen: copy before changing. It holds the informers' own frozen objects, not
 * copies (upstream's cache holds the lister's pointers too): a copy of each would double the binder's
 * memory.
 *
 * It also holds reservations: a volume a bind is in progress for, from before its first write until
 * its last, is reserved for that bind's claim. Several claim syncs may run at once (not upstream:
 * --concurrent-pvclaimbinder-syncs); matching passes over reserved volumes, and the choice and the
 * reservation are one synchronous step, so two syncs never choose one volume. The apiserver's
 * resourceVersion check stays the last guard (against other writers).
 */
export class ControllerCache {
  /** PVs, indexed for matching. */
  readonly #volumes = new VolumeIndex();
  readonly #claims = new Map<string, V1PersistentVolumeClaim>();
  /** Volume name → key of the claim a bind in progress is binding it to. */
  readonly #reserved = new Map<string, string>();
  readonly #isReserved = (name: string) => this.#reserved.has(name);
  /** Volumes whose last sync failed: they may never turn Available (see findTurningAvailable). */
  readonly #failedSyncs = new Set<string>();
  readonly #log: LogSink;

  constructor(log: LogSink) {
    this.#log = log;
  }

  /**
   * Stores `volume` unless the cache holds a newer version (storeObjectUpdate). Returns whether it
   * was stored; throws when a resourceVersion is not an integer.
   */
  storeVolume(volume: V1PersistentVolume): boolean {
    const name = objectKey(volume);
    if (!isNewer(volume, this.#volumes.get(name), "volume")) return false;
    const warning = this.#volumes.add(deepFreeze(volume));
    if (warning) this.#log.warn({ volumeName: name }, warning);
    return true;
  }

  /** Sorts the volumes a bulk load stored into the index now, not at the first claim's lookup. */
  settleVolumes(): void {
    this.#volumes.settle();
  }

  /** As storeVolume, for claims. */
  storeClaim(claim: V1PersistentVolumeClaim): boolean {
    const key = objectKey(claim);
    if (!isNewer(claim, this.#claims.get(key), "claim")) return false;
    this.#claims.set(key, deepFreeze(claim));
    return true;
  }

  /**
   * The volume to bind the claim to, from the cached volumes (upstream findBestMatchForClaim),
   * passing over reserved volumes and those `excluded` names.
   */
  findBestMatch(
    claim: V1PersistentVolumeClaim,
    delayBinding: boolean,
    excluded?: (name: string) => boolean,
  ): MatchResult {
    const passedOver = excluded
      ? (name: string) => this.#isReserved(name) || excluded(name)
      : this.#isReserved;
    return this.#volumes.findBestMatch(claim, delayBinding, passedOver);
  }

  /**
   * A volume that fits the claim and that its pending sync will make Available (VolumeIndex), one
   * whose last sync failed excepted. Not upstream: the claim may wait for it without an event.
   */
  findTurningAvailable(claim: V1PersistentVolumeClaim): V1PersistentVolume | undefined {
    return this.#volumes.findTurningAvailable(
      claim,
      (name) => this.#isReserved(name) || this.#failedSyncs.has(name),
    );
  }

  /** How the volume's last sync ended. */
  volumeSynced(name: string, ok: boolean): void {
    if (ok) this.#failedSyncs.delete(name);
    else this.#failedSyncs.add(name);
  }

  /**
   * Reserves the volume for the claim until the returned release is called; throws, reserving
   * nothing, when a bind to another claim holds it.
   */
  reserveVolume(name: string, claim: string): () => void {
    const holder = this.#reserved.get(name);
    if (holder !== undefined && holder !== claim) {
      throw new Error(`volume "${name}" is being bound to claim "${holder}"`);
    }
    if (holder !== undefined) return () => {};
    this.#reserved.set(name, claim);
    return () => {
      this.#reserved.delete(name);
    };
  }

  getVolume(name: string): V1PersistentVolume | undefined {
    return this.#volumes.get(name);
  }

  /** The claim under "namespace/name". */
  getClaim(key: string): V1PersistentVolumeClaim | undefined {
    return this.#claims.get(key);
  }

  /** Every cached volume, for the pv_collector gauges. */
  listVolumes(): V1PersistentVolume[] {
    return this.#volumes.list();
  }

  /** Every cached claim, for the pv_collector gauges. */
  listClaims(): V1PersistentVolumeClaim[] {
    return [...this.#claims.values()];
  }

  deleteVolume(name: string): void {
    this.#volumes.delete(name);
    this.#failedSyncs.delete(name);
  }

  deleteClaim(key: string): void {
    this.#claims.delete(key);
  }
}

/**
 * Whether `obj` may replace `old`: yes when there is none or its resourceVersion is not older. Equal
 * versions pass so that periodic resyncs are processed. resourceVersions are compared as integers,
 * as upstream does ("10" is newer than "9"), although the API calls them opaque.
 */
function isNewer(obj: KubernetesObject, old: KubernetesObject | undefined, kind: string): boolean {
  if (!old) return true;
  const name = objectKey(obj);
  const version = parseVersion(obj, `${kind} "${name}"`);
  const oldVersion = parseVersion(old, `old ${kind} "${name}"`);
  return version >= oldVersion;
}

const INT64 = /^[+-]?\d{1,19}$/;
const INT64_MAX = 2n ** 63n - 1n;

function parseVersion(obj: KubernetesObject, what: string): bigint {
  const text = obj.metadata?.resourceVersion ?? "";
  const value = INT64.test(text) ? BigInt(text) : undefined;
  if (value === undefined || value > INT64_MAX || value < -INT64_MAX - 1n) {
    throw new Error(`error parsing ResourceVersion "${text}" of ${what}`);
  }
  return value;
}
