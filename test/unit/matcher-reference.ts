import type { V1PersistentVolume, V1PersistentVolumeClaim } from "@kubernetes/client-node";
import { compareQuantities, ZERO_QUANTITY, type Quantity } from "../../src/util/quantity.js";
import {
  accessModesKey,
  claimRequest,
  compileLabelSelector,
  getClaimClass,
  getVolumeClass,
  isVolumeBoundToClaim,
  unknownAccessModes,
  volumeCapacity,
  volumeModeMismatch,
  type LabelMatcher,
} from "../../src/persistentvolume/pv-helpers.js";

/**
 * The oracle for VolumeIndex: a literal, linear port of upstream's index.go findByClaim and
 * FindMatchingVolume on the controller path (node nil, nothing excluded, VAC gate on). Volumes are
 * visited in bucket order as given; buckets with the same number of modes in ascending key order (the
 * VolumeIndex tie rule; upstream's order there is map order). Bad input the index refuses (invalid
 * selector, unknown claim modes, missing/unparsable request) is an error here too; a PV without a
 * valid capacity never matches.
 */
export function findBestMatchLinear(
  claim: V1PersistentVolumeClaim,
  buckets: AccessModeBuckets,
  delayBinding: boolean,
): { volume?: V1PersistentVolume; error?: string } {
  const selector = compileLabelSelector(claim.spec?.selector);
  if (selector instanceof Error) return { error: selector.message };
  if (unknownAccessModes(claim.spec?.accessModes).length) return { error: "unknown access mode" };
  const request = claimRequest(claim);
  if (request === undefined) return { error: "bad request" };
  const requested = accessModesKey(claim.spec?.accessModes).split(",").filter(Boolean);
  const keys = [...buckets.keys()]
    .filter((key) => requested.every((mode) => key.split(",").includes(mode)))
    .sort((a, b) => modeCount(a) - modeCount(b) || (a < b ? -1 : a > b ? 1 : 0));
  for (const key of keys) {
    const volume = findMatchingVolume(claim, buckets.get(key) ?? [], delayBinding, request, selector);
    if (volume) return { volume };
  }
  return {};
}

/** upstream's "accessmodes" indexer: PVs by accessModesKey, each bucket in the order given. */
export type AccessModeBuckets = ReadonlyMap<string, readonly V1PersistentVolume[]>;

export function bucketByAccessModes(volumes: Iterable<V1PersistentVolume>): AccessModeBuckets {
  const buckets = new Map<string, V1PersistentVolume[]>();
  for (const pv of volumes) {
    const key = accessModesKey(pv.spec?.accessModes);
    const bucket = buckets.get(key);
    if (bucket) bucket.push(pv);
    else buckets.set(key, [pv]);
  }
  return buckets;
}

/** Go holds quantities parsed; memoizing keeps the benchmark's linear baseline from timing the parser. */
const capacities = new WeakMap<V1PersistentVolume, Quantity | undefined>();
function capacityOf(pv: V1PersistentVolume): Quantity | undefined {
  if (!capacities.has(pv)) capacities.set(pv, volumeCapacity(pv));
  return capacities.get(pv);
}

const modeCount = (key: string): number => (key === "" ? 0 : key.split(",").length);

function findMatchingVolume(
  claim: V1PersistentVolumeClaim,
  volumes: readonly V1PersistentVolume[],
  delayBinding: boolean,
  request: Quantity,
  selector: LabelMatcher,
): V1PersistentVolume | undefined {
  let smallest: V1PersistentVolume | undefined;
  let smallestCapacity = ZERO_QUANTITY;
  const requestedClass = getClaimClass(claim);
  for (const volume of volumes) {
    if (volume.spec?.claimRef != null && !isVolumeBoundToClaim(volume, claim)) continue;
    const capacity = capacityOf(volume);
    if (capacity === undefined || compareQuantities(capacity, request) < 0) continue;
    if (volumeModeMismatch(claim.spec, volume.spec)) continue;
    if ((claim.spec?.volumeAttributesClassName ?? "") !== (volume.spec?.volumeAttributesClassName ?? ""))
      continue;
    if (volume.metadata?.deletionTimestamp != null) continue;
    if (isVolumeBoundToClaim(volume, claim)) return volume;
    if (delayBinding) continue;
    if (volume.status?.phase !== "Available") continue;
    if (!selector(volume.metadata?.labels)) continue;
    if (getVolumeClass(volume) !== requestedClass) continue;
    if (smallest === undefined || compareQuantities(smallestCapacity, capacity) > 0) {
      smallest = volume;
      smallestCapacity = capacity;
    }
  }
  return smallest;
}
