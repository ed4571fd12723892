import type { KubernetesObject } from "@kubernetes/client-node";

/**
 * The names the PersistentVolume controller reads and writes on PVs, PVCs and StorageClasses, as in
 * upstream component-helpers/storage/volume and pkg/controller/volume/events. Values it writes are "yes".
 */

/** On a PVC: binding has completed at least once; after that a lost volume makes the claim Lost. */
export const ANN_BIND_COMPLETED = "pv.kubernetes.io/bind-completed";
/** On a PV or PVC: the controller, not the user, made the binding (so the controller may undo it). */
export const ANN_BOUND_BY_CONTROLLER = "pv.kubernetes.io/bound-by-controller";
/** On a PVC: set by the scheduler for WaitForFirstConsumer claims; triggers provisioning. */
export const ANN_SELECTED_NODE = "volume.kubernetes.io/selected-node";
/** On a dynamically provisioned PV: the plugin (or external provisioner) that created it. */
export const ANN_DYNAMICALLY_PROVISIONED = "pv.kubernetes.io/provisioned-by";
/** On a PV or PVC handled by a CSI driver through CSI migration: that driver's name. */
export const ANN_MIGRATED_TO = "pv.kubernetes.io/migrated-to";
/** On a PVC: who should provision it. The controller writes both keys. */
export const ANN_STORAGE_PROVISIONER = "volume.kubernetes.io/storage-provisioner";
export const ANN_BETA_STORAGE_PROVISIONER = "volume.beta.kubernetes.io/storage-provisioner";
/** On a PV being expanded: the capacity the claim reports until the filesystem is resized. */
export const ANN_PRE_RESIZE_CAPACITY = "volume.alpha.kubernetes.io/pre-resize-capacity";
/** On a StorageClass: "true" makes it a default class. */
export const ANN_IS_DEFAULT_STORAGE_CLASS = "storageclass.kubernetes.io/is-default-class";
export const ANN_BETA_IS_DEFAULT_STORAGE_CLASS = "storageclass.beta.kubernetes.io/is-default-class";

/** The external provisioner's delete-protection finalizer on PVs. */
export const FINALIZER_EXTERNAL_PV_PROTECTION = "external-provisioner.volume.kubernetes.io/finalizer";
/** The in-tree delete-protection finalizer: held on Delete-policy PVs until the storage is deleted. */
export const FINALIZER_IN_TREE_PV_PROTECTION = "kubernetes.io/pv-controller";

/** The event source component. */
export const EVENT_COMPONENT = "persistentvolume-controller";

/** Event reasons (upstream pkg/controller/volume/events). */
export const EventReason = {
  FailedBinding: "FailedBinding",
  VolumeMismatch: "VolumeMismatch",
  WaitForFirstConsumer: "WaitForFirstConsumer",
  WaitForPodScheduled: "WaitForPodScheduled",
  ClaimLost: "ClaimLost",
  ClaimMisbound: "ClaimMisbound",
  ExternalProvisioning: "ExternalProvisioning",
  ProvisioningFailed: "ProvisioningFailed",
  ProvisioningCleanupFailed: "ProvisioningCleanupFailed",
  ProvisioningSucceeded: "ProvisioningSucceeded",
  VolumeUnknownReclaimPolicy: "VolumeUnknownReclaimPolicy",
  VolumeFailedRecycle: "VolumeFailedRecycle",
  VolumeRecycled: "VolumeRecycled",
  RecyclerPod: "RecyclerPod",
  VolumeDelete: "VolumeDelete",
  VolumeFailedDelete: "VolumeFailedDelete",
} as const;

export const VolumePhase = {
  Pending: "Pending",
  Available: "Available",
  Bound: "Bound",
  Released: "Released",
  Failed: "Failed",
} as const;
export type VolumePhase = (typeof VolumePhase)[keyof typeof VolumePhase];

export const ClaimPhase = {
  Pending: "Pending",
  Bound: "Bound",
  Lost: "Lost",
} as const;
export type ClaimPhase = (typeof ClaimPhase)[keyof typeof ClaimPhase];

export const ReclaimPolicy = {
  Retain: "Retain",
  Delete: "Delete",
  Recycle: "Recycle",
} as const;

export const VolumeBindingMode = {
  Immediate: "Immediate",
  WaitForFirstConsumer: "WaitForFirstConsumer",
} as const;

/** metav1.HasAnnotation: the key is present, whatever its value. */
export function hasAnnotation(obj: KubernetesObject, key: string): boolean {
  const annotations = obj.metadata?.annotations;
  return annotations !== undefined && Object.hasOwn(annotations, key);
}

/** Sets an annotation on an object the caller owns (a copy). */
export function setAnnotation(obj: KubernetesObject, key: string, value: string): void {
  obj.metadata ??= {};
  (obj.metadata.annotations ??= {})[key] = value;
}

/** Removes an annotation from an object the caller owns; no annotations is no field, as upstream. */
export function removeAnnotation(obj: KubernetesObject, key: string): void {
  const annotations = obj.metadata?.annotations;
  if (!annotations) return;
  Reflect.deleteProperty(annotations, key);
  if (Object.keys(annotations).length === 0) delete obj.metadata?.annotations;
}
