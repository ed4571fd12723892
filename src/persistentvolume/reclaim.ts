import type { V1PersistentVolume } from "@kubernetes/client-node";
import { errorMessage, isNotFound } from "../runtime/api-errors.js";
import {
  DeletedVolumeInUseError,
  PLUGIN_NAME_NOT_AVAILABLE,
  specFromPersistentVolume,
  type DeletableVolumePlugin,
  type RecyclableVolumePlugin,
} from "../volume/plugin.js";
import {
  ANN_DYNAMICALLY_PROVISIONED,
  ANN_MIGRATED_TO,
  EventReason,
  FINALIZER_IN_TREE_PV_PROTECTION,
  hasAnnotation,
  ReclaimPolicy,
  VolumePhase,
} from "./annotations.js";
import { unbindVolume, updateVolumePhaseWithEvent } from "./bind.js";
import { classProvisionerName, IN_TREE_PLUGIN_PREFIX, setFinalizers } from "./csi-migration.js";
import type { BinderContext } from "./binder-context.js";
import { getVolumeClass } from "./pv-helpers.js";
import { deepCopy } from "../util/deep-copy.js";

/**
 * Carries out a released volume's reclaim policy: Retain leaves it Released, Recycle scrubs it and
 * makes it Available, Delete deletes the storage and the PV. Recycle and Delete run as operations
 * named after the volume; a Failed volume is retried on every sync until they succeed.
 */
export async function reclaimVolume(ctx: BinderContext, volume: V1PersistentVolume): Promise<void> {
  const name = volume.metadata?.name ?? "";
  // A migrated volume belongs to its CSI driver's external provisioner.
  if (volume.metadata?.annotations?.[ANN_MIGRATED_TO]) return;
  const policy = volume.spec?.persistentVolumeReclaimPolicy;
  const uid = volume.metadata?.uid ?? "";
  switch (policy) {
    case ReclaimPolicy.Retain:
      ctx.log.debug({ volumeName: name }, "ReclaimVolume: policy is Retain, nothing to do");
      return;
    case ReclaimPolicy.Recycle:
      ctx.log.debug({ volumeName: name }, "ReclaimVolume: policy is Recycle");
      ctx.operations.schedule(`recycle-${name}[${uid}]`, () => recycleVolumeOperation(ctx, volume));
      return;
    case ReclaimPolicy.Delete:
      ctx.log.debug({ volumeName: name }, "ReclaimVolume: policy is Delete");
      // Timed from the first attempt until the PV is gone (deleteVolume); failures meanwhile count as errors.
      ctx.metrics?.operationStarted(name, deleterName(ctx, volume), "delete");
      ctx.operations.schedule(`delete-${name}[${uid}]`, async () => {
        try {
          await deleteVolumeOperation(ctx, volume);
        } catch (err) {
          ctx.metrics?.operationFailed(name);
          throw err;
        }
      });
      return;
    default:
      await updateVolumePhaseWithEvent(ctx, volume, VolumePhase.Failed, {
        type: "Warning",
        reason: EventReason.VolumeUnknownReclaimPolicy,
        message: "Volume has unrecognized PersistentVolumeReclaimPolicy",
      });
  }
}

/**
 * The volume as the API has it now, if it still needs `what`: an earlier operation may have saved a
 * newer version meanwhile. Undefined (logged) when it cannot be read or is no longer released.
 */
async function stillReleased(
  ctx: BinderContext,
  volume: V1PersistentVolume,
  what: string,
): Promise<V1PersistentVolume | undefined> {
  const name = volume.metadata?.name ?? "";
  let current: V1PersistentVolume;
  try {
    current = await ctx.api.getVolume(name);
  } catch (err) {
    ctx.log.debug({ volumeName: name, err }, "Error reading persistent volume");
    // Shadow mode: gone because KCM reclaimed it first. kvc's reclaim of the version it synced is
    // still its decision to compare (the recorder answers its writes as the apiserver would: 404).
    if (ctx.options.shadow && isNotFound(err)) return volume;
    return undefined;
  }
  if (!isVolumeReleased(ctx, current)) {
    ctx.log.debug({ volumeName: name }, `Volume no longer needs ${what}, skipping`);
    return undefined;
  }
  return current;
}

/** Recycles a released volume. Failures are reported on the volume, not thrown: the next sync retries. */
async function recycleVolumeOperation(ctx: BinderContext, volume: V1PersistentVolume): Promise<void> {
  const name = volume.metadata?.name ?? "";
  const current = await stillReleased(ctx, volume, "recycling");
  if (!current) return;
  const pods = podsUsingVolume(ctx, current);
  // A cached claim of that name is a new claim (this volume is released), using another volume.
  const ref = volume.spec?.claimRef;
  const claimCached = ctx.cache.getClaim(`${ref?.namespace ?? ""}/${ref?.name ?? ""}`) !== undefined;
  if (pods.length > 0 && !claimCached) {
    const message = `Volume is used by pods: ${pods.join(",")}`;
    ctx.log.debug({ volumeName: name, msg: message }, "Can't recycle volume");
    ctx.volumeEvent(volume, "Normal", EventReason.VolumeFailedRecycle, message);
    return;
  }
  volume = current;
  const spec = specFromPersistentVolume(volume);
  let plugin: RecyclableVolumePlugin;
  try {
    plugin = ctx.plugins.findRecyclablePluginBySpec(spec);
  } catch {
    await markFailed(
      ctx,
      volume,
      EventReason.VolumeFailedRecycle,
      "No recycler plugin found for the volume!",
    );
    return;
  }
  const recorder = (eventType: string, message: string) => {
    const type = eventType === "Warning" ? "Warning" : "Normal";
    ctx.volumeEvent(volume, type, EventReason.RecyclerPod, `Recycler pod: ${message}`);
  };
  try {
    await plugin.recycle(name, spec, recorder, ctx.signal);
  } catch (err) {
    await markFailed(ctx, volume, EventReason.VolumeFailedRecycle, `Recycle failed: ${errorMessage(err)}`);
    return;
  }
  ctx.log.info({ volumeName: name }, "Volume recycled");
  ctx.volumeEvent(volume, "Normal", EventReason.VolumeRecycled, "Volume recycled");
  try {
    await unbindVolume(ctx, volume);
  } catch (err) {
    // The next sync recycles it again: a "recently recycled" cache is left out, as upstream.
    ctx.log.debug(
      { volumeName: name, err },
      "RecycleVolumeOperation: failed to make recycled volume 'Available', we will recycle the volume again",
    );
  }
}

/** Marks the volume Failed with a Warning; a failed save is logged, the next sync retries anyway. */
async function markFailed(ctx: BinderContext, volume: V1PersistentVolume, reason: string, message: string) {
  try {
    await updateVolumePhaseWithEvent(ctx, volume, VolumePhase.Failed, { type: "Warning", reason, message });
  } catch (err) {
    ctx.log.debug({ volumeName: volume.metadata?.name, err }, "failed to mark volume as failed");
  }
}

/** Deletes a released volume's storage, then the PV. Throws on failure so the operation backs off. */
async function deleteVolumeOperation(ctx: BinderContext, volume: V1PersistentVolume): Promise<void> {
  const name = volume.metadata?.name ?? "";
  let plugin: DeletableVolumePlugin | undefined;
  try {
    plugin = findDeletablePlugin(ctx, volume);
  } catch (err) {
    await updateVolumePhaseWithEvent(ctx, volume, VolumePhase.Failed, {
      type: "Warning",
      reason: EventReason.VolumeFailedDelete,
      message: errorMessage(err),
    });
  }
  if (!plugin) {
    ctx.log.debug({ volumeName: name }, "External deleter for volume requested, ignoring");
    return;
  }
  const current = await stillReleased(ctx, volume, "deletion");
  if (!current) return;
  try {
    await doDeleteVolume(ctx, plugin, volume);
  } catch (err) {
    ctx.log.debug({ volumeName: name, err }, "Deletion of volume failed");
    if (err instanceof DeletedVolumeInUseError) {
      // The plugin needs more time: not a failure.
      ctx.volumeEvent(volume, "Normal", EventReason.VolumeDelete, errorMessage(err));
    } else {
      await updateVolumePhaseWithEvent(ctx, volume, VolumePhase.Failed, {
        type: "Warning",
        reason: EventReason.VolumeFailedDelete,
        message: errorMessage(err),
      });
    }
    throw err;
  }
  try {
    await ctx.api.deleteVolume(name);
  } catch (err) {
    // Deleted again on the next sync; a "recently deleted" cache is left out, as upstream.
    ctx.log.debug({ volumeName: name, err }, "Failed to delete volume from database");
  }
}

/** Deletes the storage with the plugin, then lets the PV go by removing the in-tree protection finalizer. */
export async function doDeleteVolume(
  ctx: BinderContext,
  plugin: DeletableVolumePlugin,
  volume: V1PersistentVolume,
): Promise<void> {
  const name = volume.metadata?.name ?? "";
  let deleter;
  try {
    deleter = plugin.newDeleter(specFromPersistentVolume(volume));
  } catch (err) {
    throw new Error(`failed to create deleter for volume "${name}": ${errorMessage(err)}`, { cause: err });
  }
  await deleter.delete();
  ctx.log.info({ volumeName: name }, "Volume deleted");
  await removeDeletionProtectionFinalizer(ctx, volume);
}

async function removeDeletionProtectionFinalizer(
  ctx: BinderContext,
  volume: V1PersistentVolume,
): Promise<void> {
  const name = volume.metadata?.name ?? "";
  let current: V1PersistentVolume | undefined;
  try {
    current = await ctx.api.getVolume(name);
  } catch (err) {
    if (!isNotFound(err)) {
      ctx.log.error({ volumeName: name, err }, "Error reading persistent volume");
      throw err;
    }
    // Deliberately unlike upstream, a PV that does not exist holds no finalizer: upstream fails here,
    // so cleaning up after a failed PV create always "fails", deletes the storage five times and
    // reports ProvisioningCleanupFailed although the storage is gone.
  }
  const holds = (v: V1PersistentVolume | undefined) =>
    (v?.metadata?.finalizers ?? []).includes(FINALIZER_IN_TREE_PV_PROTECTION);
  // Shadow mode: KCM removed the finalizer first (the PV is gone, or another finalizer holds it).
  // kvc's removal, from the version it deleted, is still its decision to compare (the recorder
  // answers it as the apiserver would: a stale write confirms KCM's, one to a gone PV is a 404).
  if (ctx.options.shadow && !holds(current)) current = volume;
  if (!current || !holds(current)) return;
  const finalizers = current.metadata?.finalizers ?? [];
  const clone = deepCopy(current);
  setFinalizers(
    clone,
    finalizers.filter((f) => f !== FINALIZER_IN_TREE_PV_PROTECTION),
  );
  let saved: V1PersistentVolume;
  try {
    saved = await ctx.api.updateVolume(clone);
  } catch (err) {
    if (ctx.options.shadow && isNotFound(err)) return;
    throw new Error(`persistent volume controller can't update finalizer: ${errorMessage(err)}`, {
      cause: err,
    });
  }
  // Upstream caches the pre-update copy; the saved object carries the new resourceVersion.
  ctx.cache.storeVolume(saved);
  ctx.log.info({ volumeName: name }, "PV in-tree protection finalizer removed from volume");
}

/**
 * The plugin that deletes the volume's storage, or undefined when an external deleter does
 * (provisioned by an external provisioner, migrated to CSI, or a CSI volume). Prefers the plugin
 * that provisioned it. Throws when an in-tree volume has no deleter.
 */
export function findDeletablePlugin(
  ctx: BinderContext,
  volume: V1PersistentVolume,
): DeletableVolumePlugin | undefined {
  const provisionedBy = volume.metadata?.annotations?.[ANN_DYNAMICALLY_PROVISIONED];
  if (provisionedBy) {
    try {
      return ctx.plugins.findDeletablePluginByName(provisionedBy);
    } catch (err) {
      if (!provisionedBy.startsWith(IN_TREE_PLUGIN_PREFIX)) return undefined;
      throw err;
    }
  }
  if (hasAnnotation(volume, ANN_MIGRATED_TO)) return undefined;
  if (volume.spec?.csi) return undefined;
  try {
    return ctx.plugins.findDeletablePluginBySpec(specFromPersistentVolume(volume));
  } catch (err) {
    const name = volume.metadata?.name ?? "";
    throw new Error(`error getting deleter volume plugin for volume "${name}": ${errorMessage(err)}`, {
      cause: err,
    });
  }
}

/** The plugin_name of the volume's delete operation (upstream getProvisionerNameFromVolume). */
function deleterName(ctx: BinderContext, volume: V1PersistentVolume): string {
  let plugin: DeletableVolumePlugin | undefined;
  try {
    plugin = findDeletablePlugin(ctx, volume);
  } catch {
    return PLUGIN_NAME_NOT_AVAILABLE;
  }
  if (plugin) return plugin.name;
  // An external provisioner, or a plugin migrated to CSI.
  const storageClass = ctx.classes.get(getVolumeClass(volume));
  return storageClass ? classProvisionerName(ctx.migration, storageClass) : PLUGIN_NAME_NOT_AVAILABLE;
}

/**
 * Whether the volume may be recycled or deleted: it is bound (with a UID) to a claim that no longer
 * exists, or exists under a new UID, or is bound to another volume.
 */
function isVolumeReleased(ctx: BinderContext, volume: V1PersistentVolume): boolean {
  const ref = volume.spec?.claimRef;
  // Unbound, or pre-bound by a user and not yet bound to the claim.
  if (!ref?.uid) return false;
  const claim = ctx.cache.getClaim(`${ref.namespace ?? ""}/${ref.name ?? ""}`);
  if (claim && claim.metadata?.uid === ref.uid) {
    const volumeName = claim.spec?.volumeName;
    return volumeName !== undefined && volumeName !== "" && volumeName !== volume.metadata?.name;
  }
  ctx.log.info({ volumeName: volume.metadata?.name }, "isVolumeReleased: volume is released");
  return true;
}

/** "namespace/name" of the non-terminated pods using the volume's claim, sorted. */
function podsUsingVolume(ctx: BinderContext, volume: V1PersistentVolume): string[] {
  const ref = volume.spec?.claimRef;
  if (!ref) return [];
  const pods = ctx.activePodsUsingClaim(ref.namespace ?? "", ref.name ?? "");
  return [...new Set(pods.map((p) => `${p.metadata?.namespace ?? ""}/${p.metadata?.name ?? ""}`))].sort();
}
