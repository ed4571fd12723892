import type { KubernetesObject, V1ObjectReference } from "@kubernetes/client-node";

/**
 * The group/version of each kind this project records events about. Objects in list responses and
 * informer caches carry no kind or apiVersion, so the caller names the kind and this table stands
 * in for the scheme that client-go's reference.GetReference consults.
 */
const apiVersions = {
  PersistentVolume: "v1",
  PersistentVolumeClaim: "v1",
  Pod: "v1",
  Node: "v1",
  StorageClass: "storage.k8s.io/v1",
  VolumeAttachment: "storage.k8s.io/v1",
  CSINode: "storage.k8s.io/v1",
  CSIDriver: "storage.k8s.io/v1",
} as const;

export type KnownKind = keyof typeof apiVersions;

/** What an event can be about: an object, or a reference when the caller already has one. */
export type EventSubject = KubernetesObject | V1ObjectReference;

/** A reference to `object`; `kind` stands in for the kind (and apiVersion) the object lacks. */
export function objectReference(object: KubernetesObject, kind?: KnownKind): V1ObjectReference {
  const refKind = object.kind ?? kind;
  const apiVersion = object.apiVersion ?? knownApiVersion(refKind);
  const { name, namespace, uid, resourceVersion } = object.metadata ?? {};
  return {
    ...(refKind ? { kind: refKind } : {}),
    ...(apiVersion ? { apiVersion } : {}),
    ...(name ? { name } : {}),
    ...(namespace ? { namespace } : {}),
    ...(uid ? { uid } : {}),
    ...(resourceVersion ? { resourceVersion } : {}),
  };
}

/**
 * The involvedObject of an event about `subject`, or undefined when it lacks a kind, apiVersion or
 * name: an event about an object nobody can identify is refused, as client-go refuses one whose
 * reference it cannot build.
 */
export function involvedObject(subject: EventSubject): V1ObjectReference | undefined {
  const ref = isObject(subject) ? objectReference(subject) : subject;
  return ref.kind && ref.apiVersion && ref.name ? ref : undefined;
}

function isObject(subject: EventSubject): subject is KubernetesObject {
  return "metadata" in subject;
}

function knownApiVersion(kind: string | undefined): string | undefined {
  return kind && Object.hasOwn(apiVersions, kind) ? apiVersions[kind as KnownKind] : undefined;
}
