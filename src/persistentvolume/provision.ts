import type {
  V1Node,
  V1PersistentVolume,
  V1PersistentVolumeClaim,
  V1StorageClass,
} from "@kubernetes/client-node";
import { errorMessage, isAlreadyExists, isNotFound } from "../runtime/api-errors.js";
import { objectReference } from "../runtime/events/reference.js";
import { objectRef } from "../runtime/logger.js";
import { retryWithInterval, type RetryOptions } from "../util/retry.js";
import type { ProvisionableVolumePlugin, Provisioner } from "../volume/plugin.js";
import {
  ANN_BETA_IS_DEFAULT_STORAGE_CLASS,
  ANN_BETA_STORAGE_PROVISIONER,
  ANN_BOUND_BY_CONTROLLER,
  ANN_DYNAMICALLY_PROVISIONED,
  ANN_IS_DEFAULT_STORAGE_CLASS,
  ANN_SELECTED_NODE,
  ANN_STORAGE_PROVISIONER,
  EventReason,
  FINALIZER_IN_TREE_PV_PROTECTION,
  hasAnnotation,
  ReclaimPolicy,
  removeAnnotation,
  setAnnotation,
  VolumePhase,
} from "./annotations.js";
import { classProvisionerName, IN_TREE_PLUGIN_PREFIX, updateMigrationAnnotations } from "./csi-migration.js";
import type { BinderContext } from "./binder-context.js";
import { BETA_STORAGE_CLASS_ANNOTATION, claimKey, getClaimClass } from "./pv-helpers.js";
import { doDeleteVolume, findDeletablePlugin } from "./reclaim.js";
import { deepCopy } from "../util/deep-copy.js";

/** The in-process CSI plugin: the only one that may provision from a dataSource. */
const CSI_PLUGIN_NAME = "kubernetes.io/csi";

/**
 * Dynamic provisioning of a claim nothing matched: in this process by a volume plugin, or handed to
 * an external provisioner by annotating the claim. Runs as an operation named after the claim, so a
 * claim is provisioned at most once at a time and a failure backs off.
 */
export function provisionClaim(ctx: BinderContext, claim: V1PersistentVolumeClaim): void {
  if (!ctx.options.enableDynamicProvisioning) return;
  ctx.log.debug({ PVC: objectRef(claim) }, "provisionClaim: started");
  let found: { plugin: ProvisionableVolumePlugin | undefined; storageClass: V1StorageClass };
  try {
    found = findProvisionablePlugin(ctx, claim);
  } catch (err) {
    // Retried on every syncUnboundClaim; the sync itself succeeds, as upstream.
    ctx.claimEvent(claim, "Warning", EventReason.ProvisioningFailed, errorMessage(err));
    ctx.log.error({ PVC: objectRef(claim), err }, "Error finding provisioning plugin for claim");
    return;
  }
  const { plugin, storageClass } = found;
  const name = `provision-${claimKey(claim)}[${claim.metadata?.uid ?? ""}]`;
  ctx.operations.schedule(name, async () => {
    // Timed from the first attempt until the claim is bound (claim-sync); failures meanwhile count as errors.
    const key = claimKey(claim);
    const pluginName = plugin ? plugin.name : classProvisionerName(ctx.migration, storageClass);
    ctx.metrics?.operationStarted(key, pluginName, "provision");
    try {
      await (plugin
        ? provisionClaimOperation(ctx, claim, plugin, storageClass)
        : provisionClaimOperationExternal(ctx, claim, storageClass));
    } catch (err) {
      ctx.metrics?.operationFailed(key);
      throw err;
    }
  });
}

/**
 * The claim's class and the in-process plugin for its provisioner, or no plugin when an external
 * provisioner (or, for a migrated in-tree plugin, its CSI driver) is to do it.
 */
function findProvisionablePlugin(
  ctx: BinderContext,
  claim: V1PersistentVolumeClaim,
): { plugin: ProvisionableVolumePlugin | undefined; storageClass: V1StorageClass } {
  const className = getClaimClass(claim);
  const storageClass = ctx.classes.get(className);
  if (!storageClass) throw new Error(`storageclass.storage.k8s.io "${className}" not found`);
  const provisioner = storageClass.provisioner;
  if (ctx.migration.migratedDriver(provisioner) !== undefined) return { plugin: undefined, storageClass };
  try {
    return { plugin: ctx.plugins.findProvisionablePluginByName(provisioner), storageClass };
  } catch (err) {
    if (!provisioner.startsWith(IN_TREE_PLUGIN_PREFIX)) return { plugin: undefined, storageClass };
    throw err;
  }
}

/** Provisions with an in-process plugin and creates the PV, pre-bound to the claim; the next syncClaim binds it. */
async function provisionClaimOperation(
  ctx: BinderContext,
  claim: V1PersistentVolumeClaim,
  plugin: ProvisionableVolumePlugin,
  storageClass: V1StorageClass,
): Promise<void> {
  const pluginName = plugin.name;
  const log = { PVC: objectRef(claim), storageClassName: getClaimClass(claim), pluginName };
  ctx.log.debug(log, "provisionClaimOperation started");
  if (pluginName !== CSI_PLUGIN_NAME && claim.spec?.dataSource) {
    const message = `plugin "${pluginName}" is not a CSI plugin. Only CSI plugin can provision a claim with a datasource`;
    ctx.claimEvent(claim, "Warning", EventReason.ProvisioningFailed, message);
    throw new Error(message);
  }
  // The annotation external provisioners wait for, set here too for consistency.
  claim = await setClaimProvisioner(ctx, claim, storageClass.provisioner);

  // A previous operation may have created the PV (its name is deterministic) while we waited.
  const pvName = `pvc-${claim.metadata?.uid ?? ""}`;
  // In shadow mode (src/shadow) our PV is never created: one that exists is KCM's, and what kvc would
  // have done is still to provision it (its plugin call is a no-op there, its creation recorded).
  if (!ctx.options.shadow && (await volumeExists(ctx, pvName))) {
    ctx.log.debug(log, "provisionClaimOperation: volume already exists, skipping");
    return;
  }
  const provisioner = newProvisioner(ctx, claim, plugin, storageClass, pvName);
  const node = selectedNode(ctx, claim);
  const provisioned = await provisionVolume(ctx, claim, provisioner, storageClass, node);
  const volume = prebindProvisionedVolume(provisioned, claim, pvName, pluginName);
  const volumeName = volume.metadata?.name ?? "";
  try {
    await saveProvisionedVolume(ctx, volume, log);
  } catch (err) {
    // A shutdown during a wait ends the operation here, without a cleanup: the process is stopping.
    if (ctx.signal.aborted && err === ctx.signal.reason) throw err;
    await deleteUnsavedVolume(ctx, claim, volume, err, log);
    return;
  }
  ctx.log.info({ ...log, volumeName }, "Volume provisioned for claim");
  const message = `Successfully provisioned volume ${volumeName} using ${pluginName}`;
  ctx.claimEvent(claim, "Normal", EventReason.ProvisioningSucceeded, message);
}

async function volumeExists(ctx: BinderContext, name: string): Promise<boolean> {
  try {
    await ctx.api.getVolume(name);
    return true;
  } catch (err) {
    if (isNotFound(err)) return false;
    throw err;
  }
}

/** The plugin's provisioner for the class; a failure is reported on the claim. */
function newProvisioner(
  ctx: BinderContext,
  claim: V1PersistentVolumeClaim,
  plugin: ProvisionableVolumePlugin,
  storageClass: V1StorageClass,
  pvName: string,
): Provisioner {
  const mountOptions = storageClass.mountOptions ?? [];
  // Creating the PV would fail validation anyway.
  if (!plugin.supportsMountOptions && mountOptions.length > 0) {
    const message = `Mount options are not supported by the provisioner but StorageClass "${storageClass.metadata?.name ?? ""}" has mount options [${mountOptions.join(" ")}]`;
    ctx.claimEvent(claim, "Warning", EventReason.ProvisioningFailed, message);
    throw new Error(`provisioner "${plugin.name}" doesn't support mount options`);
  }
  try {
    return plugin.newProvisioner({
      pvName,
      pvc: claim,
      // The API defaults a class's reclaimPolicy to Delete.
      reclaimPolicy: storageClass.reclaimPolicy ?? ReclaimPolicy.Delete,
      mountOptions,
      parameters: storageClass.parameters ?? {},
    });
  } catch (err) {
    const message = `Failed to create provisioner: ${errorMessage(err)}`;
    ctx.claimEvent(claim, "Warning", EventReason.ProvisioningFailed, message);
    throw err;
  }
}

/** The node the scheduler chose for a WaitForFirstConsumer claim; undefined when none was chosen. */
function selectedNode(ctx: BinderContext, claim: V1PersistentVolumeClaim): V1Node | undefined {
  const nodeName = claim.metadata?.annotations?.[ANN_SELECTED_NODE];
  if (nodeName === undefined) return undefined;
  const node = ctx.nodes.get(nodeName);
  if (node) return node;
  const message = `node "${nodeName}" not found`;
  ctx.claimEvent(claim, "Warning", EventReason.ProvisioningFailed, `Failed to get target node: ${message}`);
  throw new Error(message);
}

/** The plugin creates the storage; its PV comes back as a copy the caller may change. */
async function provisionVolume(
  ctx: BinderContext,
  claim: V1PersistentVolumeClaim,
  provisioner: Provisioner,
  storageClass: V1StorageClass,
  node: V1Node | undefined,
): Promise<V1PersistentVolume> {
  try {
    return deepCopy(await provisioner.provision(node, storageClass.allowedTopologies));
  } catch (err) {
    // Only a failure of the storage itself sends the claim back to the scheduler.
    await rescheduleProvisioning(ctx, claim);
    const message = `Failed to provision volume with StorageClass "${storageClass.metadata?.name ?? ""}": ${errorMessage(err)}`;
    ctx.claimEvent(claim, "Warning", EventReason.ProvisioningFailed, message);
    throw err;
  }
}

/**
 * Completes the plugin's PV (modified in place) as the controller saves it: named (pvName unless the
 * plugin chose a name), pre-bound to the claim in the claim's class, bound-by-controller, marked with
 * the plugin that provisioned it, and protected by the in-tree finalizer when its policy is Delete.
 */
function prebindProvisionedVolume(
  volume: V1PersistentVolume,
  claim: V1PersistentVolumeClaim,
  pvName: string,
  pluginName: string,
): V1PersistentVolume {
  (volume.metadata ??= {}).name = volume.metadata.name || pvName;
  volume.spec ??= {};
  volume.spec.claimRef = objectReference(claim, "PersistentVolumeClaim");
  volume.spec.storageClassName = getClaimClass(claim);
  // The apiserver resets a created PV's status to Pending; syncVolume then moves it to Bound.
  (volume.status ??= {}).phase = VolumePhase.Bound;
  setAnnotation(volume, ANN_BOUND_BY_CONTROLLER, "yes");
  setAnnotation(volume, ANN_DYNAMICALLY_PROVISIONED, pluginName);
  if (volume.spec.persistentVolumeReclaimPolicy === ReclaimPolicy.Delete) {
    volume.metadata.finalizers = [FINALIZER_IN_TREE_PV_PROTECTION];
  }
  return volume;
}

/** The create and cleanup retries of a provisioned PV (upstream createProvisionedPVRetryCount/Interval). */
function provisionRetry(ctx: BinderContext): RetryOptions {
  const { provisionRetries, provisionRetryIntervalMs } = ctx.options;
  return {
    attempts: provisionRetries,
    intervalMs: provisionRetryIntervalMs,
    clock: ctx.clock,
    signal: ctx.signal,
  };
}

/** Creates the PV, retried; rejects with the last error when every attempt failed. */
async function saveProvisionedVolume(
  ctx: BinderContext,
  volume: V1PersistentVolume,
  log: object,
): Promise<void> {
  const volumeName = volume.metadata?.name;
  await retryWithInterval(async () => {
    try {
      const saved = await ctx.api.createVolume(volume);
      ctx.log.debug({ ...log, volumeName }, "Volume for claim saved");
      storeProvisioned(ctx, saved);
    } catch (err) {
      // The apiserver may have saved it and failed to answer.
      if (isAlreadyExists(err)) {
        ctx.log.debug({ ...log, volumeName }, "Volume for claim already exists, reusing");
        return;
      }
      ctx.log.debug({ ...log, volumeName, err }, "Failed to save volume for claim");
      throw err;
    }
  }, provisionRetry(ctx));
}

/**
 * The storage exists but no PV describes it: deletes the storage, retried as the create, rather than
 * leak it. Both the failed create and a failed cleanup are reported on the claim.
 */
async function deleteUnsavedVolume(
  ctx: BinderContext,
  claim: V1PersistentVolumeClaim,
  volume: V1PersistentVolume,
  createError: unknown,
  log: object,
): Promise<void> {
  const key = claimKey(claim);
  const volumeName = volume.metadata?.name;
  const failed = `Error creating provisioned PV object for claim ${key}: ${errorMessage(createError)}. Deleting the volume.`;
  ctx.claimEvent(claim, "Warning", EventReason.ProvisioningFailed, failed);
  try {
    const deleter = findDeletablePlugin(ctx, volume);
    if (!deleter) {
      // Unreachable: an in-process plugin provisioned it, so an in-process plugin deletes it.
      ctx.log.error(log, "Error finding internal deleter for volume plugin");
      return;
    }
    await retryWithInterval(async () => {
      try {
        await doDeleteVolume(ctx, deleter, volume);
      } catch (err) {
        ctx.log.debug({ volumeName, err }, "Failed to delete volume");
        throw err;
      }
      ctx.log.debug({ ...log, volumeName }, "provisionClaimOperation: cleaning volume succeeded");
    }, provisionRetry(ctx));
  } catch (err) {
    const message = `Error cleaning provisioned volume for claim ${key}: ${errorMessage(err)}. Please delete manually.`;
    ctx.claimEvent(claim, "Warning", EventReason.ProvisioningCleanupFailed, message);
  }
}

/** A failed cache update is not an error: the informer's "added" event brings the PV soon. */
function storeProvisioned(ctx: BinderContext, volume: V1PersistentVolume): void {
  try {
    ctx.cache.storeVolume(volume);
  } catch (err) {
    ctx.log.debug({ volumeName: volume.metadata?.name, err }, "cannot update internal cache");
  }
}

/** Annotates the claim for its external provisioner (or the migrated CSI driver) and says so in an event. */
async function provisionClaimOperationExternal(
  ctx: BinderContext,
  claim: V1PersistentVolumeClaim,
  storageClass: V1StorageClass,
): Promise<void> {
  const provisionerName = classProvisionerName(ctx.migration, storageClass);
  try {
    claim = await setClaimProvisioner(ctx, claim, provisionerName);
  } catch (err) {
    ctx.claimEvent(
      claim,
      "Warning",
      EventReason.ProvisioningFailed,
      `Error saving claim: ${errorMessage(err)}`,
    );
    throw err;
  }
  const message =
    `Waiting for a volume to be created either by the external provisioner '${provisionerName}' ` +
    "or manually by the system administrator. If volume creation is delayed, please verify that " +
    "the provisioner is running and correctly registered.";
  ctx.claimEvent(claim, "Normal", EventReason.ExternalProvisioning, message);
}

/** Writes both storage-provisioner annotations (and migrated-to) unless already set. */
async function setClaimProvisioner(
  ctx: BinderContext,
  claim: V1PersistentVolumeClaim,
  provisionerName: string,
): Promise<V1PersistentVolumeClaim> {
  if (claim.metadata?.annotations?.[ANN_STORAGE_PROVISIONER] === provisionerName) return claim;
  const clone = deepCopy(claim);
  // TODO(upstream): drop the beta annotation after its deprecation period.
  setAnnotation(clone, ANN_BETA_STORAGE_PROVISIONER, provisionerName);
  setAnnotation(clone, ANN_STORAGE_PROVISIONER, provisionerName);
  updateMigrationAnnotations(ctx.migration, clone.metadata?.annotations, true);
  const saved = await ctx.api.updateClaim(clone);
  ctx.cache.storeClaim(saved);
  return saved;
}

/** Hands a failed WaitForFirstConsumer provisioning back to the scheduler by dropping selected-node. */
async function rescheduleProvisioning(ctx: BinderContext, claim: V1PersistentVolumeClaim): Promise<void> {
  if (!hasAnnotation(claim, ANN_SELECTED_NODE)) return;
  const clone = deepCopy(claim);
  removeAnnotation(clone, ANN_SELECTED_NODE);
  let saved: V1PersistentVolumeClaim;
  try {
    saved = await ctx.api.updateClaim(clone);
  } catch (err) {
    ctx.log.debug({ PVC: objectRef(claim), err }, "Failed to delete annotation selected-node");
    return;
  }
  try {
    ctx.cache.storeClaim(saved);
  } catch (err) {
    ctx.log.debug({ PVC: objectRef(claim), err }, "cannot update internal cache");
  }
}

/**
 * Gives a claim that asked for no class at all the default class, so that it can be provisioned.
 * Answers whether the claim was updated (the sync then stops; the update triggers the next one).
 */
export async function assignDefaultStorageClass(
  ctx: BinderContext,
  claim: V1PersistentVolumeClaim,
): Promise<boolean> {
  if (hasAnnotation(claim, BETA_STORAGE_CLASS_ANNOTATION) || claim.spec?.storageClassName !== undefined)
    return false;
  const storageClass = defaultStorageClass(ctx.classes.list());
  if (!storageClass) {
    ctx.log.debug(
      { PVC: objectRef(claim) },
      "Can not assign storage class to PersistentVolumeClaim: default storage class not found",
    );
    return false;
  }
  const storageClassName = storageClass.metadata?.name ?? "";
  const clone = deepCopy(claim);
  (clone.spec ??= {}).storageClassName = storageClassName;
  const saved = await ctx.api.updateClaim(clone);
  // Upstream leaves the cache to the watch event; caching our own write is what every other write does.
  ctx.cache.storeClaim(saved);
  ctx.log.debug(
    { PVC: objectRef(claim), storageClassName },
    "Successfully assigned StorageClass to PersistentVolumeClaim",
  );
  return true;
}

/** util.GetDefaultClass: of the classes marked default, the newest; equally new ones by name. */
export function defaultStorageClass(classes: readonly V1StorageClass[]): V1StorageClass | undefined {
  const isDefault = (c: V1StorageClass) =>
    c.metadata?.annotations?.[ANN_IS_DEFAULT_STORAGE_CLASS] === "true" ||
    c.metadata?.annotations?.[ANN_BETA_IS_DEFAULT_STORAGE_CLASS] === "true";
  const created = (c: V1StorageClass) => {
    const t = c.metadata?.creationTimestamp;
    return t === undefined ? -Infinity : new Date(t).getTime();
  };
  const name = (c: V1StorageClass) => c.metadata?.name ?? "";
  return classes
    .filter(isDefault)
    .sort((a, b) => created(b) - created(a) || (name(a) < name(b) ? -1 : name(a) > name(b) ? 1 : 0))[0];
}
