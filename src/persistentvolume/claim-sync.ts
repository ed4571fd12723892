import type { V1PersistentVolume, V1PersistentVolumeClaim } from "@kubernetes/client-node";
import { errorMessage, unlessNotFound } from "../runtime/api-errors.js";
import { objectRef } from "../runtime/logger.js";
import { resourceVersionOf } from "../shadow/unsynced-versions.js";
import { compareQuantities, quoteQuantity, ZERO_QUANTITY } from "../util/quantity.js";
import {
  ANN_BETA_STORAGE_PROVISIONER,
  ANN_BIND_COMPLETED,
  ANN_BOUND_BY_CONTROLLER,
  ANN_DYNAMICALLY_PROVISIONED,
  ANN_SELECTED_NODE,
  ANN_STORAGE_PROVISIONER,
  ClaimPhase,
  EventReason,
  hasAnnotation,
} from "./annotations.js";
import { bind, updateClaimStatus, updateClaimStatusWithEvent } from "./bind.js";
import { updateMigrationAnnotations } from "./csi-migration.js";
import { assignDefaultStorageClass, provisionClaim } from "./provision.js";
import type { BinderContext } from "./binder-context.js";
import {
  checkAccessModes,
  claimKey,
  claimRequest,
  claimVAC,
  getClaimClass,
  getVolumeClass,
  isDelayBindingMode,
  isVolumeBoundToClaim,
  volumeCapacity,
  volumeModeMismatch,
  volumeVAC,
} from "./pv-helpers.js";
import { deepCopy } from "../util/deep-copy.js";

/**
 * Decides what to do with a claim (added, updated or resynced; upstream makes no difference): one
 * that has never completed binding looks for a volume, one that has checks its volume is still there.
 */
export async function syncClaim(ctx: BinderContext, claim: V1PersistentVolumeClaim): Promise<void> {
  ctx.log.debug({ PVC: objectRef(claim), phase: claim.status?.phase }, "Synchronizing PersistentVolumeClaim");
  claim = await updateClaimMigrationAnnotations(ctx, claim);
  if (hasAnnotation(claim, ANN_BIND_COMPLETED)) await syncBoundClaim(ctx, claim);
  else await syncUnboundClaim(ctx, claim);
}

async function updateClaimMigrationAnnotations(
  ctx: BinderContext,
  claim: V1PersistentVolumeClaim,
): Promise<V1PersistentVolumeClaim> {
  // Decided on a copy of the annotations alone: every claim passes here on every resync.
  const annotations = claim.metadata?.annotations && { ...claim.metadata.annotations };
  if (!updateMigrationAnnotations(ctx.migration, annotations, true)) return claim;
  const clone = deepCopy(claim);
  if (annotations) (clone.metadata ??= {}).annotations = annotations;
  let saved: V1PersistentVolumeClaim;
  try {
    saved = await ctx.api.updateClaim(clone);
    ctx.cache.storeClaim(saved);
  } catch (err) {
    throw new Error(`persistent Volume Controller can't anneal migration annotations: ${errorMessage(err)}`, {
      cause: err,
    });
  }
  return saved;
}

/** A claim that has not completed binding: Pending until it is bound. */
export async function syncUnboundClaim(ctx: BinderContext, claim: V1PersistentVolumeClaim): Promise<void> {
  const volumeName = claim.spec?.volumeName ?? "";
  if (volumeName === "") await syncUnboundClaimAnyVolume(ctx, claim);
  else await syncUnboundClaimRequestedVolume(ctx, claim, volumeName);
}

/** The user did not ask for a volume: bind the best match, or provision, or wait. */
async function syncUnboundClaimAnyVolume(ctx: BinderContext, claim: V1PersistentVolumeClaim): Promise<void> {
  const log = { PVC: objectRef(claim) };
  const delayBinding = isDelayBindingMode(claim, ctx.classes);
  if (delayBinding instanceof Error) throw delayBinding;
  const { volume, error } = ctx.cache.findBestMatch(
    claim,
    delayBinding,
    ctx.options.shadow ? provisionedSince(ctx, claim) : undefined, // shadow mode
  );
  if (error !== undefined) {
    ctx.log.info(
      { ...log, err: error },
      "Synchronizing unbound PersistentVolumeClaim, Error finding PV for claim",
    );
    throw new Error(`error finding PV for claim "${claimKey(claim)}": ${error}`);
  }
  if (volume) {
    ctx.log.debug(
      { ...log, volumeName: volume.metadata?.name },
      "Synchronizing unbound PersistentVolumeClaim, volume found",
    );
    // On an error, the next syncClaim finishes the binding.
    const key = claimKey(claim);
    ctx.waitingClaims?.forget(key);
    try {
      await bind(ctx, volume, claim);
    } catch (err) {
      ctx.metrics?.operationFailed(key);
      throw err;
    }
    // The end of the claim's provisioning, if it was provisioned: bound to its volume.
    ctx.metrics?.operationSucceeded(key);
    return;
  }
  ctx.log.debug(log, "Synchronizing unbound PersistentVolumeClaim, no volume found");
  let assigned: boolean;
  try {
    assigned = await assignDefaultStorageClass(ctx, claim);
  } catch (err) {
    ctx.metrics?.retroactiveStorageClass(false);
    throw new Error(`can't update PersistentVolumeClaim["${claimKey(claim)}"]: ${errorMessage(err)}`, {
      cause: err,
    });
  }
  // The update's event restarts the sync, with the class.
  if (assigned) {
    ctx.metrics?.retroactiveStorageClass(true);
    return;
  }

  if (delayBinding && !hasAnnotation(claim, ANN_SELECTED_NODE)) {
    // No pod using the claim has been scheduled yet.
    emitEventForUnboundDelayBindingClaim(ctx, claim);
  } else if (getClaimClass(claim) !== "") {
    // The operation updates the claim; the next sync binds what it provisioned.
    provisionClaim(ctx, claim);
    return;
  } else if (ctx.waitingClaims && ctx.cache.findTurningAvailable(claim)) {
    // Not upstream: a volume that fits is about to turn Available (new, its sync queued), which wakes
    // this claim (WaitingClaims); upstream's claim posts FailedBinding first. When pairs are created
    // together those events were most of the writes beyond the binds (docs/performance.md).
    ctx.log.debug(log, "Synchronizing unbound PersistentVolumeClaim, waiting for a volume turning Available");
    ctx.waitingClaims.wait(claim);
  } else {
    ctx.claimEvent(
      claim,
      "Normal",
      EventReason.FailedBinding,
      "no persistent volumes available for this claim and no storage class is set",
    );
    ctx.waitingClaims?.wait(claim);
  }
  // Periodic syncs try again.
  await updateClaimStatus(ctx, claim, ClaimPhase.Pending, undefined);
}

/**
 * Shadow mode (src/shadow): a claim's version that no provisioner had been handed yet cannot have had
 * a volume provisioned for it, so one the cache holds came later, from KCM's provisioning. On this
 * version upstream provisioned; so does kvc (its volume's create then confirms KCM's) rather than
 * binding KCM's result, which would leave KCM's provisioning without kvc's decision beside it.
 */
function provisionedSince(ctx: BinderContext, claim: V1PersistentVolumeClaim): (name: string) => boolean {
  if (hasAnnotation(claim, ANN_STORAGE_PROVISIONER) || hasAnnotation(claim, ANN_BETA_STORAGE_PROVISIONER)) {
    return () => false;
  }
  const version = resourceVersionOf(claim);
  return (name) => {
    const volume = ctx.cache.getVolume(name);
    const written = resourceVersionOf(volume);
    return (
      hasAnnotation(volume ?? {}, ANN_DYNAMICALLY_PROVISIONED) &&
      volume?.spec?.claimRef?.uid !== undefined &&
      volume.spec.claimRef.uid === claim.metadata?.uid &&
      // Not last written before this claim version (a volume restored for the claim, say).
      (version === undefined || written === undefined || written > version)
    );
  };
}

/** The user asked for a specific volume: bind it if it is free and fits, else stay Pending. */
async function syncUnboundClaimRequestedVolume(
  ctx: BinderContext,
  claim: V1PersistentVolumeClaim,
  volumeName: string,
): Promise<void> {
  const log = { PVC: objectRef(claim), volumeName };
  const volume = ctx.cache.getVolume(volumeName);
  if (!volume) {
    ctx.log.debug(
      log,
      "Synchronizing unbound PersistentVolumeClaim, volume requested and not found, will try again next time",
    );
    await updateClaimStatus(ctx, claim, ClaimPhase.Pending, undefined);
    return;
  }
  const ref = volume.spec?.claimRef;
  if (!ref) {
    const mismatch = checkVolumeSatisfyClaim(volume, claim);
    if (mismatch !== undefined) {
      ctx.log.debug({ ...log, err: mismatch }, "Can't bind the claim to volume");
      ctx.claimEvent(
        claim,
        "Warning",
        EventReason.VolumeMismatch,
        `Cannot bind to requested volume "${volumeName}": ${mismatch}`,
      );
      await updateClaimStatus(ctx, claim, ClaimPhase.Pending, undefined);
      return;
    }
    await bind(ctx, volume, claim);
    return;
  }
  if (isVolumeBoundToClaim(volume, claim)) {
    // Finishes the binding, e.g. by filling in the claim UID.
    await bind(ctx, volume, claim);
    return;
  }
  const message = `volume "${volumeName}" already bound to a different claim.`;
  ctx.claimEvent(claim, "Warning", EventReason.FailedBinding, message);
  if (!hasAnnotation(claim, ANN_BOUND_BY_CONTROLLER)) {
    // The user asked for a volume someone else has: wait for it.
    await updateClaimStatus(ctx, claim, ClaimPhase.Pending, undefined);
    return;
  }
  // Should never happen: someone removed bind-completed from a claim we bound.
  const holder = `${ref.namespace ?? ""}/${ref.name ?? ""}`;
  throw new Error(
    `invalid binding of claim "${claimKey(claim)}" to volume "${volumeName}": volume already claimed by "${holder}"`,
  );
}

/** A claim that completed binding once: re-assert the binding, or mark the claim Lost. */
export async function syncBoundClaim(ctx: BinderContext, claim: V1PersistentVolumeClaim): Promise<void> {
  const volumeName = claim.spec?.volumeName ?? "";
  if (volumeName === "") {
    await updateClaimStatusWithEvent(ctx, claim, ClaimPhase.Lost, undefined, {
      type: "Warning",
      reason: EventReason.ClaimLost,
      message: "Bound claim has lost reference to PersistentVolume. Data on the volume is lost!",
    });
    return;
  }
  // Shadow mode: KCM bound the claim to a PV it just created, and the claim informer may deliver that
  // before the PV informer delivers the PV: the API says whether the claim is lost.
  const volume =
    ctx.cache.getVolume(volumeName) ??
    (ctx.options.shadow ? await unlessNotFound(ctx.api.getVolume(volumeName)) : undefined);
  if (!volume) {
    await updateClaimStatusWithEvent(ctx, claim, ClaimPhase.Lost, undefined, {
      type: "Warning",
      reason: EventReason.ClaimLost,
      message: "Bound claim has lost its PersistentVolume. Data on the volume is lost!",
    });
    return;
  }
  const ref = volume.spec?.claimRef;
  // Unbound: the volume lost its binding, or we have not seen our own write to it yet; either way
  // bind again. Bound to this claim: bind() makes sure every write is done (usually none is left).
  if (!ref || (ref.uid ?? "") === (claim.metadata?.uid ?? "")) {
    await bind(ctx, volume, claim);
    return;
  }
  // Lost is terminal: two claims point at one volume and this one is not the volume's.
  await updateClaimStatusWithEvent(ctx, claim, ClaimPhase.Lost, undefined, {
    type: "Warning",
    reason: EventReason.ClaimMisbound,
    message: "Two claims are bound to the same volume, this one is bound incorrectly",
  });
}

/**
 * Why the volume the claim asks for by name cannot serve it, or undefined if it can. Unlike matching,
 * the selector and the volume's phase do not count: naming a volume overrides them.
 */
export function checkVolumeSatisfyClaim(
  volume: V1PersistentVolume,
  claim: V1PersistentVolumeClaim,
): string | undefined {
  if (volume.metadata?.deletionTimestamp != null)
    return `the volume is marked for deletion "${volume.metadata.name ?? ""}"`;
  // Missing quantities read as zero, as upstream's zero Quantity; unparsable ones cannot be compared.
  const requestText = claim.spec?.resources?.requests?.storage;
  const request = requestText === undefined ? ZERO_QUANTITY : claimRequest(claim);
  if (request === undefined) return `invalid storage request ${quoteQuantity(requestText ?? "")}`;
  const capacityText = volume.spec?.capacity?.storage;
  const capacity = capacityText === undefined ? ZERO_QUANTITY : volumeCapacity(volume);
  if (capacity === undefined) return `invalid volume capacity ${quoteQuantity(capacityText ?? "")}`;
  if (compareQuantities(capacity, request) < 0) return "requested PV is too small";
  if (getVolumeClass(volume) !== getClaimClass(claim)) return "storageClassName does not match";
  if (claimVAC(claim) !== volumeVAC(volume)) return "volumeAttributesClassName does not match";
  if (volumeModeMismatch(claim.spec, volume.spec)) return "incompatible volumeMode";
  if (!checkAccessModes(claim, volume)) return "incompatible accessMode";
  return undefined;
}

/** Tells the user why a WaitForFirstConsumer claim waits: for a pod, or for its pods to be scheduled. */
function emitEventForUnboundDelayBindingClaim(ctx: BinderContext, claim: V1PersistentVolumeClaim): void {
  const pods = ctx
    .activePodsUsingClaim(claim.metadata?.namespace ?? "", claim.metadata?.name ?? "")
    .filter((pod) => !pod.spec?.nodeName)
    .map((pod) => pod.metadata?.name ?? "");
  if (pods.length === 0) {
    ctx.claimEvent(
      claim,
      "Normal",
      EventReason.WaitForFirstConsumer,
      "waiting for first consumer to be created before binding",
    );
    return;
  }
  // The scheduler considers one pod, but we cannot know which: name them all.
  const message =
    pods.length > 1
      ? `waiting for pods ${pods.join(",")} to be scheduled`
      : `waiting for pod ${pods[0] ?? ""} to be scheduled`;
  ctx.claimEvent(claim, "Normal", EventReason.WaitForPodScheduled, message);
}
