import type { V1PersistentVolumeClaim, V1Pod, V1Volume } from "@kubernetes/client-node";

/** Upstream component-helpers storage/ephemeral.VolumeClaimName: a generic ephemeral volume's claim name. */
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
