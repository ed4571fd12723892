import type { V1ContainerStatus, V1PersistentVolumeClaim, V1Pod, V1Volume } from "@kubernetes/client-node";

/** Upstream common.PodPVCIndex: pods filed under the "namespace/name" keys of the claims they use. */
export const POD_PVC_INDEX = "pod-pvc-index";

/** Upstream common.PodPVCIndexFunc, including the claims generic ephemeral volumes get. */
export function podPVCKeys(pod: V1Pod): string[] {
  const namespace = pod.metadata?.namespace ?? "";
  return (pod.spec?.volumes ?? []).flatMap((volume) => {
    const name = claimNameOf(pod, volume);
    return name ? [`${namespace}/${name}`] : [];
  });
}

/** The claim a volume uses: named by a persistentVolumeClaim source, or made for an ephemeral one. */
function claimNameOf(pod: V1Pod, volume: V1Volume): string | undefined {
  if (volume.persistentVolumeClaim) return volume.persistentVolumeClaim.claimName;
  if (volume.ephemeral) return ephemeralClaimName(pod, volume);
  return undefined;
}

/** ephemeral.VolumeClaimName: the deterministic name of a generic ephemeral volume's claim. */
export function ephemeralClaimName(pod: V1Pod, volume: V1Volume): string {
  return `${pod.metadata?.name ?? ""}-${volume.name}`;
}

/**
 * ephemeral.VolumeIsForPod: a claim with the ephemeral name is the pod's only if the pod controls it;
 * otherwise it is an unrelated claim that merely has a colliding name.
 */
export function ephemeralClaimIsForPod(pod: V1Pod, pvc: V1PersistentVolumeClaim): boolean {
  if (pvc.metadata?.namespace !== pod.metadata?.namespace) return false;
  const controller = pvc.metadata?.ownerReferences?.find((ref) => ref.controller === true);
  return controller !== undefined && controller.uid === pod.metadata?.uid;
}

/**
 * Whether `pod` keeps `pvc` from being deleted (upstream podUsesPVCForDeletion). Only scheduled pods
 * count: kubelet sees a pod once it is scheduled and will not start one whose claim is being
 * deleted. A terminated pod still counts for a claim it names, since kubelet may not have unmounted
 * the volume yet; only a generic ephemeral claim is released early, once its pod is shut down.
 */
export function podUsesPVCForDeletion(pod: V1Pod, pvc: V1PersistentVolumeClaim): boolean {
  if (!pod.spec?.nodeName) return false;
  return (pod.spec.volumes ?? []).some(
    (volume) => namesClaim(volume, pvc) || (!podIsShutDown(pod) && usesAsEphemeral(pod, volume, pvc)),
  );
}

/** Whether `pod` counts for the claim's Unused condition (upstream podUsesPVCForUnusedSince). */
export function podUsesPVCForUnusedSince(pod: V1Pod, pvc: V1PersistentVolumeClaim): boolean {
  if (isPodTerminated(pod)) return false;
  return (pod.spec?.volumes ?? []).some(
    (volume) => namesClaim(volume, pvc) || usesAsEphemeral(pod, volume, pvc),
  );
}

function namesClaim(volume: V1Volume, pvc: V1PersistentVolumeClaim): boolean {
  return (
    volume.persistentVolumeClaim !== undefined &&
    volume.persistentVolumeClaim.claimName === pvc.metadata?.name
  );
}

function usesAsEphemeral(pod: V1Pod, volume: V1Volume, pvc: V1PersistentVolumeClaim): boolean {
  return (
    volume.ephemeral !== undefined &&
    ephemeralClaimName(pod, volume) === pvc.metadata?.name &&
    ephemeralClaimIsForPod(pod, pvc)
  );
}

/**
 * Kubelet is done with the pod, or it was force-deleted: a deletionTimestamp with a zero grace
 * period. It only waits for garbage collection, which its own finalizers may block — possibly on
 * the very claim, so treating the claim as unused breaks that cycle.
 */
export function podIsShutDown(pod: V1Pod): boolean {
  return pod.metadata?.deletionTimestamp !== undefined && pod.metadata.deletionGracePeriodSeconds === 0;
}

/**
 * volumeutil.IsPodTerminated: Succeeded or Failed, or being deleted with no container running
 * (every status terminated or waiting).
 */
export function isPodTerminated(pod: V1Pod): boolean {
  const status = pod.status;
  if (status?.phase === "Failed" || status?.phase === "Succeeded") return true;
  return (
    pod.metadata?.deletionTimestamp !== undefined &&
    notRunning(status?.initContainerStatuses) &&
    notRunning(status?.containerStatuses) &&
    notRunning(status?.ephemeralContainerStatuses)
  );
}

function notRunning(statuses: readonly V1ContainerStatus[] = []): boolean {
  return statuses.every((s) => s.state?.terminated !== undefined || s.state?.waiting !== undefined);
}
