import type {
  KubernetesObject,
  V1ContainerStatus,
  V1Node,
  V1NodeStatus,
  V1Pod,
  V1PodStatus,
} from "@kubernetes/client-node";

/**
 * What an informer keeps of a freshly decoded object before it reaches the cache (client-go's
 * TransformFunc). It may change `obj` in place or return another object; the informer freezes it.
 */
export type TransformFunc<T> = (obj: T) => T;

/**
 * Drops metadata.managedFields, as kube-controller-manager's informer factory does (its WithTransform
 * trim): no controller reads them, they are often the largest part of an object, and an update sent
 * without them leaves the server's unchanged. Applied to every resource.
 */
export function trimManagedFields<T>(obj: T): T {
  const meta = (obj as KubernetesObject | undefined)?.metadata;
  if (meta?.managedFields) delete meta.managedFields;
  return obj;
}

/*
 * Pods and nodes are most of a real cluster's objects, and the volume loops read little of them.
 * Their informers keep what some reader in this process reads and nothing else; none of those objects
 * is ever written back whole (nodes are patched, pods only read), so nothing dropped can reach the
 * apiserver. Whoever reads a field dropped here gets undefined: add it here first. The readers:
 * attach/detach (pod volumes, node name, phase, container states; node annotations, taints, Ready,
 * volumesAttached/InUse), the binder (pods by claim, their node and phase; node labels for node
 * affinity and provisioning), PVC protection (pod volumes, node, phase, deletion), shadow mode
 * (node volumesAttached), events (metadata). kvc explain reads the API, not these caches.
 */

/** A pod as the volume loops read it: metadata, spec.nodeName and spec.volumes, phase and container states. */
export function podForVolumes(pod: V1Pod): V1Pod {
  const { spec, status, ...rest } = pod;
  return {
    ...rest,
    ...(spec && {
      spec: {
        // Required by the type; no loop reads a container.
        containers: [],
        ...(spec.nodeName !== undefined && { nodeName: spec.nodeName }),
        ...(spec.volumes && { volumes: spec.volumes }),
      },
    }),
    ...(status && { status: podStatusForVolumes(status) }),
  };
}

/** Phase and, of each container status, its state: what IsPodTerminated reads. */
function podStatusForVolumes(status: V1PodStatus): V1PodStatus {
  // Of each container status only name and state; the other fields the type requires are never read.
  const states = (statuses: V1ContainerStatus[]) =>
    statuses.map((s) => ({ name: s.name, ...(s.state && { state: s.state }) }) as V1ContainerStatus);
  const { phase, initContainerStatuses, containerStatuses, ephemeralContainerStatuses } = status;
  return {
    ...(phase !== undefined && { phase }),
    ...(initContainerStatuses && { initContainerStatuses: states(initContainerStatuses) }),
    ...(containerStatuses && { containerStatuses: states(containerStatuses) }),
    ...(ephemeralContainerStatuses && { ephemeralContainerStatuses: states(ephemeralContainerStatuses) }),
  };
}

/**
 * A node as the volume loops read it: metadata and spec whole, of its status the conditions and the
 * attached and in-use volumes (not images, addresses, capacity, node info: most of a node).
 */
export function nodeForVolumes(node: V1Node): V1Node {
  const { status, ...rest } = node;
  return { ...rest, ...(status && { status: nodeStatusForVolumes(status) }) };
}

function nodeStatusForVolumes({ conditions, volumesAttached, volumesInUse }: V1NodeStatus): V1NodeStatus {
  return {
    ...(conditions && { conditions }),
    ...(volumesAttached && { volumesAttached }),
    ...(volumesInUse && { volumesInUse }),
  };
}
