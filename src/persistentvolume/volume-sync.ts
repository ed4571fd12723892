import type { V1PersistentVolume, V1PersistentVolumeClaim } from "@kubernetes/client-node";
import { errorMessage, unlessNotFound } from "../runtime/api-errors.js";
import {
  ANN_BOUND_BY_CONTROLLER,
  ANN_DYNAMICALLY_PROVISIONED,
  EventReason,
  hasAnnotation,
  ReclaimPolicy,
  VolumePhase,
} from "./annotations.js";
import { unbindVolume, updateVolumePhase } from "./bind.js";
import { modifyDeletionFinalizers, setFinalizers, updateMigrationAnnotations } from "./csi-migration.js";
import type { BinderContext } from "./binder-context.js";
import { volumeModeMismatch } from "./pv-helpers.js";
import { reclaimVolume } from "./reclaim.js";
import { deepCopy } from "../util/deep-copy.js";

/**
 * Decides what to do with a volume (added, updated or resynced): an unbound or pre-bound one is
 * Available; one bound to a claim that is gone is Released and reclaimed; one whose claim is bound
 * elsewhere is unbound; one whose claim is bound to it is Bound. Binding itself is syncClaim's job.
 */
export async function syncVolume(ctx: BinderContext, volume: V1PersistentVolume): Promise<void> {
  const name = volume.metadata?.name ?? "";
  ctx.log.debug({ volumeName: name, phase: volume.status?.phase }, "Synchronizing PersistentVolume");
  volume = await updateVolumeMigrationAnnotationsAndFinalizers(ctx, volume);

  const ref = volume.spec?.claimRef;
  // Unused, or reserved for a claim that syncClaim will bind.
  if (!ref?.uid) {
    const turnsAvailable = volume.status?.phase !== VolumePhase.Available;
    volume = await updateVolumePhase(ctx, volume, VolumePhase.Available, "");
    // Not upstream (WaitingClaims): a claim waiting for such a volume need not wait for the resync.
    const waiting = turnsAvailable ? ctx.waitingClaims?.takeMatch(volume) : undefined;
    if (waiting) ctx.enqueueClaim(waiting);
    return;
  }

  const claim = await findClaim(ctx, volume, ref.namespace ?? "", ref.name ?? "", ref.uid);
  if (!claim) {
    // The claim was deleted. Failed stays Failed (the user should see it) while reclaiming retries.
    if (volume.status?.phase !== VolumePhase.Released && volume.status?.phase !== VolumePhase.Failed) {
      ctx.log.info(
        { volumeName: name, reclaimPolicy: volume.spec?.persistentVolumeReclaimPolicy },
        "Volume is released and reclaim policy will be executed",
      );
      volume = await updateVolumePhase(ctx, volume, VolumePhase.Released, "");
    }
    await reclaimVolume(ctx, volume);
    return;
  }

  const claimVolumeName = claim.spec?.volumeName ?? "";
  if (claimVolumeName === "") {
    if (volumeModeMismatch(claim.spec, volume.spec)) {
      // syncClaim would never bind it: matching skips volumes of another volumeMode.
      const volumeMessage = `Cannot bind PersistentVolume to requested PersistentVolumeClaim "${claim.metadata?.name ?? ""}" due to incompatible volumeMode.`;
      ctx.volumeEvent(volume, "Warning", EventReason.VolumeMismatch, volumeMessage);
      const claimMessage = `Cannot bind PersistentVolume "${name}" to requested PersistentVolumeClaim due to incompatible volumeMode.`;
      ctx.claimEvent(claim, "Warning", EventReason.VolumeMismatch, claimMessage);
      return;
    }
    // Bound by us with the claim not yet updated, or pre-bound by the user: syncClaim completes it.
    // Enqueuing the claim speeds that up, e.g. for a just-provisioned volume.
    ctx.log.debug(
      { volumeName: name, boundByController: hasAnnotation(volume, ANN_BOUND_BY_CONTROLLER) },
      "Synchronizing PersistentVolume, volume not bound yet, waiting for syncClaim to fix it",
    );
    ctx.enqueueClaim(claim);
    return;
  }
  if (claimVolumeName === name) {
    await updateVolumePhase(ctx, volume, VolumePhase.Bound, "");
    return;
  }

  // The claim is bound to another volume.
  if (
    hasAnnotation(volume, ANN_DYNAMICALLY_PROVISIONED) &&
    volume.spec?.persistentVolumeReclaimPolicy === ReclaimPolicy.Delete
  ) {
    // Provisioned for this claim, which got another volume: not needed any more.
    if (volume.status?.phase !== VolumePhase.Released && volume.status?.phase !== VolumePhase.Failed) {
      ctx.log.info({ volumeName: name }, "Dynamically provisioned volume is released and it will be deleted");
      volume = await updateVolumePhase(ctx, volume, VolumePhase.Released, "");
    }
    await reclaimVolume(ctx, volume);
    return;
  }
  // Ours (bound-by-controller): a lost binding race, undo it entirely. The user's: keep the
  // pre-binding, clear the UID, and wait for the claim to be unbound.
  await unbindVolume(ctx, volume);
}

/**
 * The claim the volume is bound to, or undefined when it no longer exists. A claim missing from the
 * cache may not have reached it yet (an external provisioner or the scheduler bound it), so unless
 * the volume is already released the informer and then the API are asked before the volume is
 * reclaimed. A cached claim with another UID may be stale: the API decides.
 */
async function findClaim(
  ctx: BinderContext,
  volume: V1PersistentVolume,
  namespace: string,
  name: string,
  uid: string,
): Promise<V1PersistentVolumeClaim | undefined> {
  const key = `${namespace}/${name}`;
  let claim = ctx.cache.getClaim(key);
  const phase = volume.status?.phase;
  if (!claim && phase !== VolumePhase.Released && phase !== VolumePhase.Failed) {
    claim = ctx.claimInformer.get(key) ?? (await unlessNotFound(ctx.api.getClaim(namespace, name)));
  }
  const released = phase === VolumePhase.Released || phase === VolumePhase.Failed;
  if (claim && ctx.options.shadow && (released || replayed(ctx, volume) || !ctx.claimInformer.get(key))) {
    // Shadow mode: KCM released the volume on its claim's deletion, which the claim informer may not
    // have delivered yet (the volume informer, a watch of its own, may be ahead: the version KCM
    // released is then synced again, UnsyncedVersions), or which the binder's cache has not caught up
    // with: marking it Bound again, or keeping it so, would be no decision of kvc's. The API says.
    claim = await unlessNotFound(ctx.api.getClaim(namespace, name));
  }
  if (claim && claim.metadata?.uid !== uid) {
    ctx.log.debug(
      { PVC: { namespace, name } },
      "Maybe cached claim is not the newest one, we should fetch it from apiserver",
    );
    claim = await unlessNotFound(ctx.api.getClaim(namespace, name));
    // Still another UID: the claim was deleted and re-created under the same name.
    if (claim && claim.metadata?.uid !== uid) claim = undefined;
  }
  return claim;
}

/** Whether `volume` is an earlier version than the informer's (shadow mode replays those). */
function replayed(ctx: BinderContext, volume: V1PersistentVolume): boolean {
  const latest = ctx.volumeInformer.get(volume.metadata?.name ?? "");
  return latest?.metadata?.resourceVersion !== volume.metadata?.resourceVersion;
}

/** Saves migrated-to and the deletion-protection finalizers if they need fixing; answers the current volume. */
async function updateVolumeMigrationAnnotationsAndFinalizers(
  ctx: BinderContext,
  volume: V1PersistentVolume,
): Promise<V1PersistentVolume> {
  // Decided on a copy of the annotations alone: every volume passes here on every resync.
  const annotations = volume.metadata?.annotations && { ...volume.metadata.annotations };
  const annotationsModified = updateMigrationAnnotations(ctx.migration, annotations, false);
  const { finalizers, modified: finalizersModified } = modifyDeletionFinalizers(ctx.migration, volume);
  if (!annotationsModified && !finalizersModified) return volume;
  const clone = deepCopy(volume);
  if (annotations) (clone.metadata ??= {}).annotations = annotations;
  if (finalizersModified) setFinalizers(clone, finalizers);
  let saved: V1PersistentVolume;
  try {
    saved = await ctx.api.updateVolume(clone);
    ctx.cache.storeVolume(saved);
  } catch (err) {
    throw new Error(
      `persistent Volume Controller can't anneal migration annotations or finalizer: ${errorMessage(err)}`,
      { cause: err },
    );
  }
  return saved;
}
