import {
  CoreV1Api,
  StorageV1Api,
  type ConfigurationOptions,
  type KubernetesObject,
  type V1CSIDriver,
  type V1CSINode,
  type V1ListMeta,
  type V1Node,
  type V1PersistentVolume,
  type V1PersistentVolumeClaim,
  type V1Pod,
  type V1StorageClass,
  type V1VolumeAttachment,
} from "@kubernetes/client-node";
import { nodeForVolumes, podForVolumes, type TransformFunc } from "./transform.js";

/** What an informer watches besides the resource: one namespace (default all) and selectors. */
export interface Scope {
  namespace?: string;
  labelSelector?: string;
  fieldSelector?: string;
}

export interface ListQuery extends Scope {
  limit: number;
  _continue?: string;
}

export type ListCall<T> = (
  query: ListQuery,
  options: ConfigurationOptions,
) => Promise<{ items: T[]; metadata?: V1ListMeta }>;

/** The API groups informers list through; ApiClients (rate-limited, instrumented) fits. */
export interface ResourceApis {
  core: CoreV1Api;
  storage: StorageV1Api;
}

/** A resource an informer can watch: its REST path and its typed client-node list call. */
export interface ResourceType<T extends KubernetesObject> {
  /** "/api/v1" or "/apis/<group>/<version>". */
  readonly groupVersionPath: string;
  readonly plural: string;
  readonly namespaced: boolean;
  /** client-node's model name, to decode watch events into the same typed objects lists return. */
  readonly model: string;
  /** What the cache keeps of each object, after managedFields are trimmed (default: all of it). */
  readonly transform?: TransformFunc<T>;
  lister(apis: ResourceApis): ListCall<T>;
}

export const persistentVolumes: ResourceType<V1PersistentVolume> = {
  groupVersionPath: "/api/v1",
  plural: "persistentvolumes",
  namespaced: false,
  model: "V1PersistentVolume",
  lister: ({ core: api }) => {
    return (q, o) => api.listPersistentVolume(q, o);
  },
};

export const persistentVolumeClaims: ResourceType<V1PersistentVolumeClaim> = {
  groupVersionPath: "/api/v1",
  plural: "persistentvolumeclaims",
  namespaced: true,
  model: "V1PersistentVolumeClaim",
  lister: ({ core: api }) => {
    return ({ namespace, ...q }, o) =>
      namespace
        ? api.listNamespacedPersistentVolumeClaim({ namespace, ...q }, o)
        : api.listPersistentVolumeClaimForAllNamespaces(q, o);
  },
};

export const pods: ResourceType<V1Pod> = {
  groupVersionPath: "/api/v1",
  plural: "pods",
  namespaced: true,
  model: "V1Pod",
  transform: podForVolumes,
  lister: ({ core: api }) => {
    return ({ namespace, ...q }, o) =>
      namespace ? api.listNamespacedPod({ namespace, ...q }, o) : api.listPodForAllNamespaces(q, o);
  },
};

export const nodes: ResourceType<V1Node> = {
  groupVersionPath: "/api/v1",
  plural: "nodes",
  namespaced: false,
  model: "V1Node",
  transform: nodeForVolumes,
  lister: ({ core: api }) => {
    return (q, o) => api.listNode(q, o);
  },
};

export const storageClasses: ResourceType<V1StorageClass> = {
  groupVersionPath: "/apis/storage.k8s.io/v1",
  plural: "storageclasses",
  namespaced: false,
  model: "V1StorageClass",
  lister: ({ storage: api }) => {
    return (q, o) => api.listStorageClass(q, o);
  },
};

export const volumeAttachments: ResourceType<V1VolumeAttachment> = {
  groupVersionPath: "/apis/storage.k8s.io/v1",
  plural: "volumeattachments",
  namespaced: false,
  model: "V1VolumeAttachment",
  lister: ({ storage: api }) => {
    return (q, o) => api.listVolumeAttachment(q, o);
  },
};

export const csiDrivers: ResourceType<V1CSIDriver> = {
  groupVersionPath: "/apis/storage.k8s.io/v1",
  plural: "csidrivers",
  namespaced: false,
  model: "V1CSIDriver",
  lister: ({ storage: api }) => {
    return (q, o) => api.listCSIDriver(q, o);
  },
};

export const csiNodes: ResourceType<V1CSINode> = {
  groupVersionPath: "/apis/storage.k8s.io/v1",
  plural: "csinodes",
  namespaced: false,
  model: "V1CSINode",
  lister: ({ storage: api }) => {
    return (q, o) => api.listCSINode(q, o);
  },
};
