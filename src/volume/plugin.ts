import type {
  V1Node,
  V1PersistentVolume,
  V1PersistentVolumeClaim,
  V1TopologySelectorTerm,
  V1Volume,
} from "@kubernetes/client-node";

/**
 * The volume plugin contract between the controllers (PV binder, attach/detach) and storage
 * back-ends, after upstream pkg/volume/plugins.go reduced to what a controller calls. A plugin
 * implements VolumePlugin plus any capability interfaces below; the VolumePluginManager finds it.
 * Errors a plugin throws become the controllers' events and logs verbatim, so their messages should
 * make sense to a cluster user.
 */

/** A volume as the controllers see it: a PersistentVolume or a pod's inline volume (upstream volume.Spec). */
export type VolumeSpec =
  | ({ readonly persistentVolume: V1PersistentVolume; readonly volume?: undefined } & SpecFlags)
  | ({ readonly volume: V1Volume; readonly persistentVolume?: undefined } & SpecFlags);

interface SpecFlags {
  readonly readOnly: boolean;
  /** Translated from an in-tree plugin to its CSI driver (csimigration). */
  readonly migrated?: boolean;
  /** The translation of an inline volume: its VolumeAttachment carries the PV spec, not a PV name. */
  readonly inlineVolumeSpecForCSIMigration?: boolean;
}

export function specFromPersistentVolume(pv: V1PersistentVolume, readOnly = false): VolumeSpec {
  return { persistentVolume: pv, readOnly };
}

export function specFromVolume(volume: V1Volume, readOnly = false): VolumeSpec {
  return { volume, readOnly };
}

/** The PV's or the inline volume's name. */
export function specName(spec: VolumeSpec): string {
  return spec.volume ? spec.volume.name : (spec.persistentVolume.metadata?.name ?? "");
}

export interface VolumePlugin {
  /**
   * A qualified name with exactly one "/", e.g. "kubernetes.io/host-path"; the "kubernetes.io"
   * prefix is reserved for plugins bundled here. StorageClass.provisioner selects provisioners by it.
   */
  readonly name: string;
  /** Whether this plugin handles the volume. Exactly one registered plugin may answer true. */
  canSupport(spec: VolumeSpec): boolean;
}

/** Options the binder builds from the claim and its StorageClass (upstream volume.VolumeOptions). */
export interface ProvisionOptions {
  /** "pvc-<claim UID>": the PV name to use, unique in the cluster. */
  pvName: string;
  /** The claim being provisioned for; the PV must match it (capacity, access modes, volume mode). */
  pvc: V1PersistentVolumeClaim;
  /** StorageClass.reclaimPolicy (the API defaults it to Delete). */
  reclaimPolicy: string;
  /** StorageClass.mountOptions; non-empty only when the plugin supportsMountOptions. */
  mountOptions: readonly string[];
  /** StorageClass.parameters. */
  parameters: Readonly<Record<string, string>>;
}

export interface Provisioner {
  /**
   * Creates the storage and returns the PV describing it: name (options.pvName; the binder fills an
   * empty one), capacity, access modes, reclaim policy, volume source. The binder adds claimRef,
   * phase, class, annotations and finalizers and creates the object. A throw becomes a Warning
   * ProvisioningFailed event on the claim and the claim's selected-node annotation is cleared.
   */
  provision(selectedNode?: V1Node, allowedTopologies?: V1TopologySelectorTerm[]): Promise<V1PersistentVolume>;
}

export interface ProvisionableVolumePlugin extends VolumePlugin {
  /** False makes the binder refuse classes with mountOptions (the PV would fail validation). */
  readonly supportsMountOptions: boolean;
  /** Throws when this plugin cannot provision (e.g. disabled): ProvisioningFailed "Failed to create provisioner: …". */
  newProvisioner(options: ProvisionOptions): Provisioner;
}

export interface Deleter {
  /**
   * Deletes the storage behind a released PV; the binder then deletes the PV. A throw marks the PV
   * Failed with a Warning VolumeFailedDelete event, except DeletedVolumeInUseError (Normal VolumeDelete).
   * Called again on later syncs until it succeeds, so deleting what is already gone must succeed.
   */
  delete(): Promise<void>;
}

/** The storage is still in use somewhere; the binder reports it without marking the PV Failed. */
export class DeletedVolumeInUseError extends Error {
  override readonly name = "DeletedVolumeInUseError";
}

export interface DeletableVolumePlugin extends VolumePlugin {
  /** Throws when the spec is not deletable by this plugin (a Warning VolumeFailedDelete event). */
  newDeleter(spec: VolumeSpec): Deleter;
}

/** Forwards what happens to a recycler (e.g. its pod's events) to the PV as `RecyclerPod` events. */
export type RecycleEventRecorder = (eventType: string, message: string) => void;

export interface RecyclableVolumePlugin extends VolumePlugin {
  /**
   * Scrubs a released PV's data so it can be bound again, resolving when done. A throw marks the PV
   * Failed with Warning VolumeFailedRecycle "Recycle failed: <message>"; the binder retries on every sync.
   * `signal` aborts on controller shutdown.
   */
  recycle(
    pvName: string,
    spec: VolumeSpec,
    recorder: RecycleEventRecorder,
    signal?: AbortSignal,
  ): Promise<void>;
}

export interface Attacher {
  /**
   * Attaches the volume to the node and resolves to the device path (CSI: ""). A throw becomes a
   * Warning FailedAttachVolume event on the pods and the attachment is treated as uncertain.
   */
  attach(spec: VolumeSpec, nodeName: string, signal?: AbortSignal): Promise<string>;
  /** Whether each volume is still attached to the node; used to drop attachments that vanished. */
  volumesAreAttached(specs: readonly VolumeSpec[], nodeName: string): Promise<Map<VolumeSpec, boolean>>;
}

export interface Detacher {
  /** Detaches `volumeName` (getVolumeName's value) from the node; detaching what is not attached succeeds. */
  detach(volumeName: string, nodeName: string, signal?: AbortSignal): Promise<void>;
}

export interface AttachableVolumePlugin extends VolumePlugin {
  /**
   * The name identifying the backing volume within this plugin (CSI: "<driver>^<handle>"); the
   * controller's key is uniqueVolumeName(plugin.name, it). Throws for an unsupported spec.
   */
  getVolumeName(spec: VolumeSpec): string;
  /** False for volumes this plugin leaves unattached (CSI: CSIDriver.spec.attachRequired=false). */
  canAttach(spec: VolumeSpec): boolean;
  newAttacher(): Attacher;
  newDetacher(): Detacher;
}

export function isProvisionable(plugin: VolumePlugin): plugin is ProvisionableVolumePlugin {
  return "newProvisioner" in plugin && typeof plugin.newProvisioner === "function";
}

export function isDeletable(plugin: VolumePlugin): plugin is DeletableVolumePlugin {
  return "newDeleter" in plugin && typeof plugin.newDeleter === "function";
}

export function isRecyclable(plugin: VolumePlugin): plugin is RecyclableVolumePlugin {
  return "recycle" in plugin && typeof plugin.recycle === "function";
}

export function isAttachable(plugin: VolumePlugin): plugin is AttachableVolumePlugin {
  return "newAttacher" in plugin && typeof plugin.newAttacher === "function";
}

/** "<plugin name>/<volume name>", e.g. "kubernetes.io/csi/ebs.csi.aws.com^vol-1" (upstream GetUniqueVolumeName). */
export function uniqueVolumeName(pluginName: string, volumeName: string): string {
  return `${pluginName}/${volumeName}`;
}

/** The plugin label of a volume or operation whose plugin cannot be determined. */
export const PLUGIN_NAME_NOT_AVAILABLE = "N/A";

/**
 * A plugin name for metrics, qualified by the CSI driver for CSI volumes, e.g. "kubernetes.io/csi:ebs.csi.aws.com"
 * (upstream GetFullQualifiedPluginNameForVolume).
 */
export function fullyQualifiedPluginName(pluginName: string, spec: VolumeSpec): string {
  const driver = spec.volume ? spec.volume.csi?.driver : spec.persistentVolume.spec?.csi?.driver;
  return driver === undefined ? pluginName : `${pluginName}:${driver}`;
}

/** Inverse of uniqueVolumeName, for detaching a volume known only from node status (no spec). */
export function splitUniqueVolumeName(unique: string): { pluginName: string; volumeName: string } {
  const [prefix, plugin, ...rest] = unique.split("/");
  if (prefix === undefined || plugin === undefined || rest.length === 0) {
    throw new Error(`cannot split volume unique name ${unique} to plugin/volume components`);
  }
  return { pluginName: `${prefix}/${plugin}`, volumeName: rest.join("/") };
}
