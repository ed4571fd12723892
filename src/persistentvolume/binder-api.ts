import type { CoreV1Api, V1PersistentVolume, V1PersistentVolumeClaim } from "@kubernetes/client-node";

/**
 * The API writes and reads of the binder. Every update sends the object's resourceVersion, so a
 * stale write fails with a 409 Conflict; errors are client-node's ApiException (see api-errors).
 */
export interface BinderApi {
  getVolume(name: string): Promise<V1PersistentVolume>;
  createVolume(volume: V1PersistentVolume): Promise<V1PersistentVolume>;
  updateVolume(volume: V1PersistentVolume): Promise<V1PersistentVolume>;
  updateVolumeStatus(volume: V1PersistentVolume): Promise<V1PersistentVolume>;
  deleteVolume(name: string): Promise<void>;
  getClaim(namespace: string, name: string): Promise<V1PersistentVolumeClaim>;
  updateClaim(claim: V1PersistentVolumeClaim): Promise<V1PersistentVolumeClaim>;
  updateClaimStatus(claim: V1PersistentVolumeClaim): Promise<V1PersistentVolumeClaim>;
}

/** The CoreV1Api calls the binder makes. */
export type BinderCoreApi = Pick<
  CoreV1Api,
  | "readPersistentVolume"
  | "createPersistentVolume"
  | "replacePersistentVolume"
  | "replacePersistentVolumeStatus"
  | "deletePersistentVolume"
  | "readNamespacedPersistentVolumeClaim"
  | "replaceNamespacedPersistentVolumeClaim"
  | "replaceNamespacedPersistentVolumeClaimStatus"
>;

/**
 * BinderApi over client-node. Updates are PUTs of the whole object with its resourceVersion, as
 * client-go's Update: a stale copy fails with 409 Conflict instead of overwriting a newer one, and the
 * next sync retries from fresher state. Errors are client-node's ApiException, unchanged.
 */
export class CoreV1BinderApi implements BinderApi {
  readonly #core: BinderCoreApi;

  constructor(core: BinderCoreApi) {
    this.#core = core;
  }

  getVolume(name: string): Promise<V1PersistentVolume> {
    return this.#core.readPersistentVolume({ name });
  }

  createVolume(volume: V1PersistentVolume): Promise<V1PersistentVolume> {
    return this.#core.createPersistentVolume({ body: asVolume(volume) });
  }

  updateVolume(volume: V1PersistentVolume): Promise<V1PersistentVolume> {
    return this.#core.replacePersistentVolume({ name: nameOf(volume), body: asVolume(volume) });
  }

  updateVolumeStatus(volume: V1PersistentVolume): Promise<V1PersistentVolume> {
    return this.#core.replacePersistentVolumeStatus({ name: nameOf(volume), body: asVolume(volume) });
  }

  async deleteVolume(name: string): Promise<void> {
    await this.#core.deletePersistentVolume({ name });
  }

  getClaim(namespace: string, name: string): Promise<V1PersistentVolumeClaim> {
    return this.#core.readNamespacedPersistentVolumeClaim({ namespace, name });
  }

  updateClaim(claim: V1PersistentVolumeClaim): Promise<V1PersistentVolumeClaim> {
    const { namespace, name } = claimName(claim);
    return this.#core.replaceNamespacedPersistentVolumeClaim({ namespace, name, body: asClaim(claim) });
  }

  updateClaimStatus(claim: V1PersistentVolumeClaim): Promise<V1PersistentVolumeClaim> {
    const { namespace, name } = claimName(claim);
    return this.#core.replaceNamespacedPersistentVolumeClaimStatus({ namespace, name, body: asClaim(claim) });
  }
}

// Informer objects carry no apiVersion/kind; a request body names them.
const asVolume = (volume: V1PersistentVolume): V1PersistentVolume =>
  Object.assign({}, volume, { apiVersion: "v1", kind: "PersistentVolume" });
const asClaim = (claim: V1PersistentVolumeClaim): V1PersistentVolumeClaim =>
  Object.assign({}, claim, { apiVersion: "v1", kind: "PersistentVolumeClaim" });

function nameOf(volume: V1PersistentVolume): string {
  const name = volume.metadata?.name;
  if (!name) throw new Error("persistent volume has no metadata.name");
  return name;
}

function claimName(claim: V1PersistentVolumeClaim): { namespace: string; name: string } {
  const { namespace, name } = claim.metadata ?? {};
  if (!namespace || !name) throw new Error("persistent volume claim has no metadata.namespace/name");
  return { namespace, name };
}
