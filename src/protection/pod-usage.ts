import type { V1PersistentVolumeClaim, V1Pod, V1Volume } from "@kubernetes/client-node";
import { ephemeralClaimIsForPod, ephemeralClaimName } from "../volume/ephemeral.js";
import { isPodTerminated } from "../volume/util/pod.js";

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
