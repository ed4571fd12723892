import type {
  KubernetesObject,
  V1CSIDriver,
  V1CSINode,
  V1Lease,
  V1Node,
  V1PersistentVolume,
  V1PersistentVolumeClaim,
  V1Pod,
  V1StorageClass,
  V1VolumeAttachment,
} from "@kubernetes/client-node";
import { nodeForVolumes, podForVolumes, type TransformFunc } from "./transform.js";

/** What an informer watches besides the resource: one namespace (default all) and selectors. */
export interface Scope {
  namespace?: string;
  labelSelector?: string;
  fieldSelector?: string;
}

/** A resource an informer can watch: its REST path and client-node's model of its objects. */
export interface ResourceType<T extends KubernetesObject> {
  /** "/api/v1" or "/apis/<group>/<version>". */
  readonly groupVersionPath: string;
  readonly plural: string;
  readonly namespaced: boolean;
  /** client-node's model name: lists and watch events are decoded into its shape (model-codec). */
  readonly model: string;
  /** What the cache keeps of each object, after managedFields are trimmed (default: all of it). */
  readonly transform?: TransformFunc<T>;
}

export const persistentVolumes: ResourceType<V1PersistentVolume> = {
  groupVersionPath: "/api/v1",
  plural: "persistentvolumes",
  namespaced: false,
  model: "V1PersistentVolume",
};

export const persistentVolumeClaims: ResourceType<V1PersistentVolumeClaim> = {
  groupVersionPath: "/api/v1",
  plural: "persistentvolumeclaims",
  namespaced: true,
  model: "V1PersistentVolumeClaim",
};

export const pods: ResourceType<V1Pod> = {
  groupVersionPath: "/api/v1",
  plural: "pods",
  namespaced: true,
  model: "V1Pod",
  transform: podForVolumes,
};

export const nodes: ResourceType<V1Node> = {
  groupVersionPath: "/api/v1",
  plural: "nodes",
  namespaced: false,
  model: "V1Node",
  transform: nodeForVolumes,
};

export const storageClasses: ResourceType<V1StorageClass> = {
  groupVersionPath: "/apis/storage.k8s.io/v1",
  plural: "storageclasses",
  namespaced: false,
  model: "V1StorageClass",
};

export const volumeAttachments: ResourceType<V1VolumeAttachment> = {
  groupVersionPath: "/apis/storage.k8s.io/v1",
  plural: "volumeattachments",
  namespaced: false,
  model: "V1VolumeAttachment",
};

export const csiDrivers: ResourceType<V1CSIDriver> = {
  groupVersionPath: "/apis/storage.k8s.io/v1",
  plural: "csidrivers",
  namespaced: false,
  model: "V1CSIDriver",
};

export const csiNodes: ResourceType<V1CSINode> = {
  groupVersionPath: "/apis/storage.k8s.io/v1",
  plural: "csinodes",
  namespaced: false,
  model: "V1CSINode",
};

export const leases: ResourceType<V1Lease> = {
  groupVersionPath: "/apis/coordination.k8s.io/v1",
  plural: "leases",
  namespaced: true,
  model: "V1Lease",
};
