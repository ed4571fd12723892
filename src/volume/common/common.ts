import type { V1Pod } from "@kubernetes/client-node";
import type { SharedInformer } from "../../runtime/informer/index.js";
import { ephemeralClaimName } from "../ephemeral.js";

/** Upstream common.PodPVCIndex: pods filed under the "namespace/name" keys of the claims they use. */
export const POD_PVC_INDEX = "pod-pvc-index";

/** Upstream common.PodPVCIndexFunc, including the claims generic ephemeral volumes get. */
export function podPVCKeys(pod: V1Pod): string[] {
  const namespace = pod.metadata?.namespace ?? "";
  return (pod.spec?.volumes ?? []).flatMap((volume) => {
    let name: string | undefined;
    if (volume.persistentVolumeClaim) name = volume.persistentVolumeClaim.claimName;
    else if (volume.ephemeral) name = ephemeralClaimName(pod, volume);
    return name ? [`${namespace}/${name}`] : [];
  });
}

/**
 * Upstream common.AddPodPVCIndexerIfNotPresent: the attach/detach, PVC protection and binder
 * controllers share one pod informer and register the same index; the store accepts that twice.
 */
export function addPodPVCIndexerIfNotPresent(pods: Pick<SharedInformer<V1Pod>, "addIndexers">): void {
  pods.addIndexers({ [POD_PVC_INDEX]: podPVCKeys });
}
