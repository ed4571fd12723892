import type { V1PersistentVolume, V1PersistentVolumeClaim } from "@kubernetes/client-node";
import type { JsonRequest } from "../runtime/client.js";
import { persistentVolumeClaims, persistentVolumes } from "../runtime/informer/resources.js";
import { cachedObjectDecoder } from "../runtime/model-codec.js";

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

// As the informers decode them: the answers go to the same cache, and every copy and write of them
// would otherwise carry managedFields, the largest part of the object, for nothing.
const decodeVolume = cachedObjectDecoder(persistentVolumes);
const decodeClaim = cachedObjectDecoder(persistentVolumeClaims);

/**
 * BinderApi over the API's JSON (ApiClients.requestJson). Updates are PUTs of the whole object with
 * its resourceVersion, as client-go's Update: a stale copy fails with 409 Conflict instead of
 * overwriting a newer one, and the next sync retries from fresher state. Objects go and come as JSON
 * with every field, not through client-node's models, which drop the fields they lack (model-codec).
 * Errors are client-node's ApiException, as from its typed APIs.
 */
export class CoreV1BinderApi implements BinderApi {
  readonly #request: JsonRequest;

  constructor(request: JsonRequest) {
    this.#request = request;
  }

  async getVolume(name: string): Promise<V1PersistentVolume> {
    return decodeVolume(await this.#request("GET", volumePath(name)));
  }

  async createVolume(volume: V1PersistentVolume): Promise<V1PersistentVolume> {
    return decodeVolume(await this.#request("POST", VOLUMES, { body: asVolume(volume) }));
  }

  async updateVolume(volume: V1PersistentVolume): Promise<V1PersistentVolume> {
    return decodeVolume(await this.#request("PUT", volumePath(nameOf(volume)), { body: asVolume(volume) }));
  }

  async updateVolumeStatus(volume: V1PersistentVolume): Promise<V1PersistentVolume> {
    const path = `${volumePath(nameOf(volume))}/status`;
    return decodeVolume(await this.#request("PUT", path, { body: asVolume(volume) }));
  }

  async deleteVolume(name: string): Promise<void> {
    await this.#request("DELETE", volumePath(name));
  }

  async getClaim(namespace: string, name: string): Promise<V1PersistentVolumeClaim> {
    return decodeClaim(await this.#request("GET", claimPath(namespace, name)));
  }

  async updateClaim(claim: V1PersistentVolumeClaim): Promise<V1PersistentVolumeClaim> {
    const { namespace, name } = claimName(claim);
    return decodeClaim(await this.#request("PUT", claimPath(namespace, name), { body: asClaim(claim) }));
  }

  async updateClaimStatus(claim: V1PersistentVolumeClaim): Promise<V1PersistentVolumeClaim> {
    const { namespace, name } = claimName(claim);
    const path = `${claimPath(namespace, name)}/status`;
    return decodeClaim(await this.#request("PUT", path, { body: asClaim(claim) }));
  }
}

const VOLUMES = "/api/v1/persistentvolumes";
const volumePath = (name: string) => `${VOLUMES}/${encodeURIComponent(name)}`;
const claimPath = (namespace: string, name: string) =>
  `/api/v1/namespaces/${encodeURIComponent(namespace)}/persistentvolumeclaims/${encodeURIComponent(name)}`;

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
