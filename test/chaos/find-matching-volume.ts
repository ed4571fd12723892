import type { V1PersistentVolume, V1PersistentVolumeClaim, V1StorageClass } from "@kubernetes/client-node";

/*
 * Which volume upstream's PV controller binds a Pending claim to, written again for the chaos
 * suite's settled check from upstream's code alone (k8s.io/component-helpers@v0.37.2
 * storage/volume/pv_helpers.go FindMatchingVolume, IsVolumeBoundToClaim, IsDelayBindingMode;
 * k8s.io/kubernetes@v1.37.2 pkg/controller/volume/persistentvolume/index.go findByClaim,
 * pv_controller.go checkVolumeSatisfyClaim). It imports nothing from src/, so a bug of kvc's matcher
 * cannot hide in it.
 *
 * Scoped to the PV controller's path and to what the chaos workload creates: no node (node affinity
 * is the scheduler's check), no excluded volumes, VolumeAttributesClass on (GA in v1.37). A claim
 * with a selector, or a quantity other than an integer with an optional suffix, is outside the
 * workload and is refused (OutOfScope), never guessed: the workload sets neither.
 */

export class OutOfScope extends Error {}

const ANN_BETA_CLASS = "volume.beta.kubernetes.io/storage-class";

/** index.go findByClaim: per access-mode set holding every requested mode, fewest modes first. */
export function findMatchingVolume(
  claim: V1PersistentVolumeClaim,
  volumes: readonly V1PersistentVolume[],
  classes: ReadonlyMap<string, V1StorageClass>,
): V1PersistentVolume | undefined {
  if (claim.spec?.selector) throw new OutOfScope(`claim ${claimKey(claim)} has a selector`);
  const delayBinding = isDelayBindingMode(claim, classes);
  const requested = claim.spec?.accessModes ?? [];
  const bySet = new Map<string, V1PersistentVolume[]>();
  for (const v of volumes) {
    const key = modeSet(v.spec?.accessModes ?? []).join(",");
    bySet.set(key, [...(bySet.get(key) ?? []), v]);
  }
  const sets = [...bySet.keys()]
    .map((k) => (k === "" ? [] : k.split(",")))
    .filter((modes) => requested.every((m) => modes.includes(m)))
    .sort((a, b) => a.length - b.length);
  for (const modes of sets) {
    const found = findMatchingVolumeIn(claim, bySet.get(modes.join(",")) ?? [], delayBinding);
    if (found) return found;
  }
  return undefined;
}

/** pv_helpers.go FindMatchingVolume with node nil and no excluded volumes. */
function findMatchingVolumeIn(
  claim: V1PersistentVolumeClaim,
  volumes: readonly V1PersistentVolume[],
  delayBinding: boolean,
): V1PersistentVolume | undefined {
  const requested = quantity(claim.spec?.resources?.requests?.storage);
  const requestedClass = claimClass(claim);
  let smallest: { volume: V1PersistentVolume; size: bigint } | undefined;
  for (const volume of volumes) {
    if (volume.spec?.claimRef && !isVolumeBoundToClaim(volume, claim)) continue;
    const size = quantity(volume.spec?.capacity?.storage);
    if (size < requested) continue;
    if (volumeModeMismatch(claim, volume)) continue;
    if ((claim.spec?.volumeAttributesClassName ?? "") !== (volume.spec?.volumeAttributesClassName ?? ""))
      continue;
    if (volume.metadata?.deletionTimestamp) continue;
    if (isVolumeBoundToClaim(volume, claim)) return volume;
    if (delayBinding) continue;
    if (volume.status?.phase !== "Available") continue;
    if (volumeClass(volume) !== requestedClass) continue;
    if (!smallest || smallest.size > size) smallest = { volume, size };
  }
  return smallest?.volume;
}

/**
 * pv_controller.go checkVolumeSatisfyClaim: why a volume a claim names (spec.volumeName) cannot be
 * bound to it, or undefined when it can.
 */
export function checkVolumeSatisfyClaim(
  volume: V1PersistentVolume,
  claim: V1PersistentVolumeClaim,
): string | undefined {
  if (volume.metadata?.deletionTimestamp) return "the volume is marked for deletion";
  if (quantity(volume.spec?.capacity?.storage) < quantity(claim.spec?.resources?.requests?.storage))
    return "requested PV is too small";
  if (volumeClass(volume) !== claimClass(claim)) return "storageClassName does not match";
  if ((claim.spec?.volumeAttributesClassName ?? "") !== (volume.spec?.volumeAttributesClassName ?? ""))
    return "volumeAttributesClassName does not match";
  if (volumeModeMismatch(claim, volume)) return "incompatible volumeMode";
  const modes = volume.spec?.accessModes ?? [];
  if (!(claim.spec?.accessModes ?? []).every((m) => modes.includes(m))) return "incompatible accessMode";
  return undefined;
}

/** pv_helpers.go IsVolumeBoundToClaim: pre-bound or bound to this claim (by name, and uid if set). */
export function isVolumeBoundToClaim(volume: V1PersistentVolume, claim: V1PersistentVolumeClaim): boolean {
  const ref = volume.spec?.claimRef;
  if (!ref) return false;
  if (ref.name !== claim.metadata?.name || ref.namespace !== claim.metadata?.namespace) return false;
  return !ref.uid || ref.uid === claim.metadata?.uid;
}

/** pv_helpers.go IsDelayBindingMode: the claim's class (found) binds WaitForFirstConsumer. */
function isDelayBindingMode(
  claim: V1PersistentVolumeClaim,
  classes: ReadonlyMap<string, V1StorageClass>,
): boolean {
  const name = claimClass(claim);
  if (name === "") return false;
  const cls = classes.get(name);
  if (!cls) return false;
  if (!cls.volumeBindingMode) throw new OutOfScope(`StorageClass ${name} has no volumeBindingMode`);
  return cls.volumeBindingMode === "WaitForFirstConsumer";
}

/** helpers.go GetPersistentVolumeClaimClass: the beta annotation first. */
function claimClass(claim: V1PersistentVolumeClaim): string {
  return claim.metadata?.annotations?.[ANN_BETA_CLASS] ?? claim.spec?.storageClassName ?? "";
}

/** helpers.go GetPersistentVolumeClass: the beta annotation first. */
function volumeClass(volume: V1PersistentVolume): string {
  return volume.metadata?.annotations?.[ANN_BETA_CLASS] ?? volume.spec?.storageClassName ?? "";
}

/** pv_helpers.go CheckVolumeModeMismatches: an unset mode is Filesystem on either side. */
function volumeModeMismatch(claim: V1PersistentVolumeClaim, volume: V1PersistentVolume): boolean {
  return (claim.spec?.volumeMode ?? "Filesystem") !== (volume.spec?.volumeMode ?? "Filesystem");
}

/** v1helper.GetAccessModesAsString's set: each mode once, in one order. */
function modeSet(modes: readonly string[]): string[] {
  return [...new Set(modes)].sort();
}

const SUFFIXES: Record<string, bigint> = {
  "": 1n,
  k: 10n ** 3n,
  M: 10n ** 6n,
  G: 10n ** 9n,
  T: 10n ** 12n,
  P: 10n ** 15n,
  E: 10n ** 18n,
  Ki: 2n ** 10n,
  Mi: 2n ** 20n,
  Gi: 2n ** 30n,
  Ti: 2n ** 40n,
  Pi: 2n ** 50n,
  Ei: 2n ** 60n,
};

/** A resource.Quantity in the workload's form (an integer and a suffix) in units; unset is zero. */
export function quantity(text: string | undefined): bigint {
  if (text === undefined) return 0n;
  const m = /^(\d+)([A-Za-z]*)$/.exec(text);
  const unit = m ? SUFFIXES[m[2]!] : undefined;
  if (!m || unit === undefined) throw new OutOfScope(`quantity "${text}"`);
  return BigInt(m[1]!) * unit;
}

function claimKey(c: V1PersistentVolumeClaim): string {
  return `${c.metadata?.namespace}/${c.metadata?.name}`;
}
