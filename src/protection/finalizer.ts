import type { V1ObjectMeta } from "@kubernetes/client-node";

/** Added by the StorageObjectInUseProtection admission plugin, removed by the pvc-protection controller. */
export const PVC_PROTECTION_FINALIZER = "kubernetes.io/pvc-protection";
/** Added by the StorageObjectInUseProtection admission plugin, removed by the pv-protection controller. */
export const PV_PROTECTION_FINALIZER = "kubernetes.io/pv-protection";

interface WithMetadata {
  metadata?: V1ObjectMeta;
}

/** Being deleted and still held by `finalizer` (upstream protectionutil.IsDeletionCandidate). */
export function isDeletionCandidate(obj: WithMetadata, finalizer: string): boolean {
  return obj.metadata?.deletionTimestamp !== undefined && hasFinalizer(obj, finalizer);
}

/** Not being deleted and lacking `finalizer` (upstream protectionutil.NeedToAddFinalizer). */
export function needToAddFinalizer(obj: WithMetadata, finalizer: string): boolean {
  return obj.metadata?.deletionTimestamp === undefined && !hasFinalizer(obj, finalizer);
}

function hasFinalizer(obj: WithMetadata, finalizer: string): boolean {
  return obj.metadata?.finalizers?.includes(finalizer) ?? false;
}

/**
 * A merge patch setting metadata.finalizers to what `obj` had plus `finalizer`. It carries the
 * resourceVersion the list was computed from, so the apiserver rejects it with 409 Conflict when the
 * object has changed since — another writer's finalizer is never dropped.
 */
export function addFinalizerPatch(obj: WithMetadata, finalizer: string): { metadata: V1ObjectMeta } {
  return finalizersPatch(obj, [...(obj.metadata?.finalizers ?? []), finalizer]);
}

/** As addFinalizerPatch, removing every occurrence of `finalizer` (upstream slice.RemoveString). */
export function removeFinalizerPatch(obj: WithMetadata, finalizer: string): { metadata: V1ObjectMeta } {
  return finalizersPatch(
    obj,
    (obj.metadata?.finalizers ?? []).filter((f) => f !== finalizer),
  );
}

function finalizersPatch(obj: WithMetadata, finalizers: string[]): { metadata: V1ObjectMeta } {
  const resourceVersion = obj.metadata?.resourceVersion;
  if (!resourceVersion) throw new Error("object has no metadata.resourceVersion");
  return { metadata: { finalizers, resourceVersion } };
}
