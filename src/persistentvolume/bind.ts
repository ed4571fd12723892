import type {
  V1PersistentVolume,
  V1PersistentVolumeClaim,
  V1PersistentVolumeClaimStatus,
} from "@kubernetes/client-node";
import type { EventType } from "../runtime/events/recorder.js";
import { objectReference } from "../runtime/events/reference.js";
import { isNotFound } from "../runtime/api-errors.js";
import { objectRef } from "../runtime/logger.js";
import { compareQuantities, tryParseQuantity } from "../util/quantity.js";
import {
  ANN_BIND_COMPLETED,
  ANN_BOUND_BY_CONTROLLER,
  ANN_PRE_RESIZE_CAPACITY,
  ClaimPhase,
  hasAnnotation,
  removeAnnotation,
  setAnnotation,
  VolumePhase,
} from "./annotations.js";
import type { BinderContext } from "./binder-context.js";
import { claimKey, isVolumeBoundToClaim } from "./pv-helpers.js";
import { deepCopy } from "../util/deep-copy.js";

/**
 * The writes that bind and unbind a PV and a PVC, and the phase writes they are made of. Each write
 * goes to the API with the object's resourceVersion and, on success, into the controller cache, so
 * the next sync sees it before the watch event arrives. The first failing write aborts; the next sync
 * finds the half-done binding and finishes it.
 */

/**
 * Binds the volume and the claim in upstream's order: PV spec (claimRef), PV status (Bound), PVC spec
 * (volumeName and annotations), PVC status (Bound, capacity, access modes). The PV goes first so a
 * controller that crashes midway leaves a PV pointing at the claim, which the next sync completes,
 * rather than a claim pointing at a PV that another claim may take.
 */
export async function bind(
  ctx: BinderContext,
  volume: V1PersistentVolume,
  claim: V1PersistentVolumeClaim,
): Promise<void> {
  const log = { PVC: objectRef(claim), volumeName: volume.metadata?.name };
  ctx.log.debug(log, "Binding volume to claim");
  // Before the first await: a sync that chose the volume from the cache reserves it in the same step.
  const release = ctx.cache.reserveVolume(volume.metadata?.name ?? "", claimKey(claim));
  let step = "volume";
  try {
    volume = await bindVolumeToClaim(ctx, volume, claim);
    step = "volume status";
    // Shadow mode: the claim's version is not bound yet, so a Bound volume in the cache is KCM's doing
    // since; kvc's write is sent all the same (the recorder takes it as confirming KCM's).
    const resend = ctx.options.shadow && !hasAnnotation(claim, ANN_BIND_COMPLETED);
    volume = await updateVolumePhase(ctx, volume, VolumePhase.Bound, "", resend);
    step = "claim";
    claim = await bindClaimToVolume(ctx, claim, volume);
    step = "claim status";
    await updateClaimStatus(ctx, claim, ClaimPhase.Bound, volume);
  } catch (err) {
    ctx.log.debug({ ...log, err }, `Error binding volume to claim: failed saving the ${step}`);
    throw err;
  } finally {
    release();
  }
  ctx.log.debug(log, "Volume bound to claim");
}

/** Points the volume's claimRef at the claim (GetBindVolumeToClaim + save); marks it bound-by-controller unless pre-bound. */
export async function bindVolumeToClaim(
  ctx: BinderContext,
  volume: V1PersistentVolume,
  claim: V1PersistentVolumeClaim,
): Promise<V1PersistentVolume> {
  const ref = volume.spec?.claimRef;
  const meta = claim.metadata;
  const setClaimRef =
    !ref ||
    (ref.name ?? "") !== (meta?.name ?? "") ||
    (ref.namespace ?? "") !== (meta?.namespace ?? "") ||
    (ref.uid ?? "") !== (meta?.uid ?? "");
  // A volume already pointing at this claim was pre-bound by its creator: not ours to undo later.
  const markBound = !isVolumeBoundToClaim(volume, claim) && !hasAnnotation(volume, ANN_BOUND_BY_CONTROLLER);
  // Decided before copying: every bound claim's resync passes here, nearly always with nothing to do.
  if (!setClaimRef && !markBound) return volume;
  const clone = deepCopy(volume);
  if (setClaimRef) (clone.spec ??= {}).claimRef = objectReference(claim, "PersistentVolumeClaim");
  if (markBound) setAnnotation(clone, ANN_BOUND_BY_CONTROLLER, "yes");
  ctx.log.info({ PVC: objectRef(claim), volumeName: volume.metadata?.name }, "Claim bound to volume");
  const saved = await ctx.api.updateVolume(clone);
  ctx.cache.storeVolume(saved);
  return saved;
}

/** Sets the claim's volumeName (marking it bound-by-controller if we set it) and bind-completed. */
export async function bindClaimToVolume(
  ctx: BinderContext,
  claim: V1PersistentVolumeClaim,
  volume: V1PersistentVolume,
): Promise<V1PersistentVolumeClaim> {
  const volumeName = volume.metadata?.name ?? "";
  const setVolumeName = volumeName !== (claim.spec?.volumeName ?? "");
  const markCompleted = !hasAnnotation(claim, ANN_BIND_COMPLETED);
  // Decided before copying, as above.
  if (!setVolumeName && !markCompleted) return claim;
  const clone = deepCopy(claim);
  if (setVolumeName) {
    (clone.spec ??= {}).volumeName = volumeName;
    if (!hasAnnotation(clone, ANN_BOUND_BY_CONTROLLER)) setAnnotation(clone, ANN_BOUND_BY_CONTROLLER, "yes");
  }
  if (markCompleted) setAnnotation(clone, ANN_BIND_COMPLETED, "yes");
  ctx.log.info({ PVC: objectRef(claim), volumeName }, "Volume bound to claim");
  const saved = await ctx.api.updateClaim(clone);
  ctx.cache.storeClaim(saved);
  return saved;
}

/**
 * Saves the claim's phase. With a volume, also its access modes, its capacity when the claim is
 * becoming Bound (a later difference may be a deliberate filesystem/device size mismatch, so it is
 * not clobbered) and, on Pending → Bound, its VolumeAttributesClass. Without one, clears all three.
 */
export async function updateClaimStatus(
  ctx: BinderContext,
  claim: V1PersistentVolumeClaim,
  phase: ClaimPhase,
  volume: V1PersistentVolume | undefined,
): Promise<V1PersistentVolumeClaim> {
  const status = claim.status ?? {};
  // Decided on a copy of the status alone: every bound claim's resync passes here, nearly always with
  // nothing to do. The claim is copied only to be written.
  let next: V1PersistentVolumeClaimStatus = deepCopy(status);
  let dirty = false;
  if (status.phase !== phase) {
    next.phase = phase;
    dirty = true;
  }
  if (!volume) {
    const { accessModes, capacity, currentVolumeAttributesClassName, ...rest } = next;
    if (
      accessModes !== undefined ||
      capacity !== undefined ||
      currentVolumeAttributesClassName !== undefined
    ) {
      next = rest;
      dirty = true;
    }
  } else {
    const spec = volume.spec ?? {};
    if (!sameList(status.accessModes, spec.accessModes)) {
      if (spec.accessModes) next.accessModes = [...spec.accessModes];
      else delete next.accessModes;
      dirty = true;
    }
    if (status.phase !== phase) {
      const volumeCapacity = spec.capacity?.storage;
      if (volumeCapacity === undefined) {
        throw new Error(`PersistentVolume "${volume.metadata?.name ?? ""}" is without a storage capacity`);
      }
      const preResize = volume.metadata?.annotations?.[ANN_PRE_RESIZE_CAPACITY];
      if (preResize !== undefined) {
        // The volume was expanded but its filesystem not yet: report the size the claim can use.
        let capacity = preResize;
        if (tryParseQuantity(preResize) === undefined) {
          ctx.log.info({ volumeName: volume.metadata?.name }, "Parsing pre-resize-capacity from PV failed");
          capacity = volumeCapacity;
        }
        (next.capacity ??= {}).storage = capacity;
        dirty = true;
      } else if (!sameQuantity(volumeCapacity, status.capacity?.storage)) {
        next.capacity = { ...spec.capacity };
        dirty = true;
      }
    }
    // Only on binding: afterwards the external resizer owns the field.
    const vac = spec.volumeAttributesClassName;
    if (
      status.phase === ClaimPhase.Pending &&
      phase === ClaimPhase.Bound &&
      status.currentVolumeAttributesClassName !== vac
    ) {
      if (vac === undefined) delete next.currentVolumeAttributesClassName;
      else next.currentVolumeAttributesClassName = vac;
      dirty = true;
    }
  }
  if (!dirty) return claim;
  const clone = deepCopy(claim);
  clone.status = next;
  const saved = await ctx.api.updateClaimStatus(clone);
  ctx.cache.storeClaim(saved);
  ctx.log.info({ PVC: objectRef(claim), phase }, "Claim entered phase");
  return saved;
}

/** The event that goes with a phase change. */
export interface PhaseEvent {
  type: EventType;
  reason: string;
  message: string;
}

/** updateClaimStatus plus an event, both only when the phase changes (so resyncs repeat neither). */
export async function updateClaimStatusWithEvent(
  ctx: BinderContext,
  claim: V1PersistentVolumeClaim,
  phase: ClaimPhase,
  volume: V1PersistentVolume | undefined,
  { type, reason, message }: PhaseEvent,
): Promise<V1PersistentVolumeClaim> {
  if (claim.status?.phase === phase) return claim;
  const saved = await updateClaimStatus(ctx, claim, phase, volume);
  ctx.claimEvent(saved, type, reason, message);
  return saved;
}

/** Saves the volume's phase and message, if the phase changes (or `resend`: shadow mode, see bind). */
export async function updateVolumePhase(
  ctx: BinderContext,
  volume: V1PersistentVolume,
  phase: VolumePhase,
  message: string,
  resend = false,
): Promise<V1PersistentVolume> {
  if (volume.status?.phase === phase && !resend) return volume;
  const clone = deepCopy(volume);
  clone.status ??= {};
  clone.status.phase = phase;
  if (message) clone.status.message = message;
  else delete clone.status.message;
  let saved: V1PersistentVolume;
  try {
    saved = await ctx.api.updateVolumeStatus(clone);
  } catch (err) {
    // Shadow mode: KCM deleted the volume first. kvc carries on from what it wrote to its next
    // decision (the reclaim), whose writes the recorder takes as confirming KCM's; not cached: gone.
    if (ctx.options.shadow && isNotFound(err)) return clone;
    throw err;
  }
  ctx.cache.storeVolume(saved);
  ctx.log.info({ volumeName: volume.metadata?.name, phase }, "Volume entered phase");
  return saved;
}

/** updateVolumePhase plus an event, both only when the phase changes; the event's message is the phase's. */
export async function updateVolumePhaseWithEvent(
  ctx: BinderContext,
  volume: V1PersistentVolume,
  phase: VolumePhase,
  { type, reason, message }: PhaseEvent,
): Promise<V1PersistentVolume> {
  if (volume.status?.phase === phase) return volume;
  const saved = await updateVolumePhase(ctx, volume, phase, message);
  ctx.volumeEvent(saved, type, reason, message);
  return saved;
}

/**
 * Rolls back a binding and makes the volume Available: a binding the controller made is removed
 * entirely; a user's pre-binding keeps its claim name and loses only the claim UID, so the volume
 * stays reserved for a claim of that name.
 */
export async function unbindVolume(ctx: BinderContext, volume: V1PersistentVolume): Promise<void> {
  const clone = deepCopy(volume);
  if (hasAnnotation(volume, ANN_BOUND_BY_CONTROLLER)) {
    if (clone.spec) delete clone.spec.claimRef;
    removeAnnotation(clone, ANN_BOUND_BY_CONTROLLER);
  } else if (clone.spec?.claimRef) {
    delete clone.spec.claimRef.uid;
  }
  const saved = await ctx.api.updateVolume(clone);
  ctx.cache.storeVolume(saved);
  ctx.log.debug({ volumeName: saved.metadata?.name }, "Updating PersistentVolume: rolled back");
  await updateVolumePhase(ctx, saved, VolumePhase.Available, "");
}

/** reflect.DeepEqual of two string lists: nil and empty differ. */
function sameList(a: readonly string[] | undefined, b: readonly string[] | undefined): boolean {
  if (a === undefined || b === undefined) return a === b;
  return a.length === b.length && a.every((x, i) => x === b[i]);
}

/** Quantity.Cmp == 0; unparsable quantities are equal only as identical text. */
function sameQuantity(a: string, b: string | undefined): boolean {
  if (b === undefined) return false;
  const x = tryParseQuantity(a);
  const y = tryParseQuantity(b);
  return x !== undefined && y !== undefined ? compareQuantities(x, y) === 0 : a === b;
}
