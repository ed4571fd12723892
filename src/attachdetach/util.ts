import type { V1PersistentVolume, V1PersistentVolumeClaim, V1Pod, V1Volume } from "@kubernetes/client-node";
import { errorMessage } from "../runtime/api-errors.js";
import type { LogSink } from "../runtime/logger.js";
import { ephemeralClaimIsForPod, ephemeralClaimName } from "../volume/ephemeral.js";
import { translateInTreeSpecToCSIIfNeeded } from "../volume/csimigration/plugin-manager.js";
import { specFromPersistentVolume, specFromVolume, type VolumeSpec } from "../volume/plugin.js";
import {
  resolveAttachableVolume,
  type AttachablePluginFinder,
  type DesiredStateOfWorld,
} from "./cache/desired-state-of-world.js";

/** A node with this annotation lets the controller attach and detach its volumes (its kubelet sets it). */
export const CONTROLLER_MANAGED_ATTACH_ANNOTATION = "volumes.kubernetes.io/controller-managed-attach-detach";

/** The informer caches a pod's claims are resolved through. */
export interface VolumeLookups {
  getClaim(namespace: string, name: string): V1PersistentVolumeClaim | undefined;
  getVolume(name: string): V1PersistentVolume | undefined;
}

/**
 * The spec of a pod's volume as the controller attaches it (upstream util.CreateVolumeSpec): an inline
 * volume as it is; a claim (named, or a generic ephemeral volume's, which must belong to the pod) only
 * once it is Bound to a PV whose claimRef points back at it by UID, so a volume is never attached for a
 * claim it is not bound to. A volume of an in-tree plugin migrated to CSI comes translated to its
 * driver's CSI spec, as upstream (CreateVolumeSpecWithNodeMigration: at v1.37 every migration is
 * complete, so the node does not matter). Throws upstream's messages otherwise.
 */
export function createVolumeSpec(pod: V1Pod, podVolume: V1Volume, lookups: VolumeLookups): VolumeSpec {
  let claimName = podVolume.persistentVolumeClaim?.claimName ?? "";
  if (podVolume.ephemeral) claimName = ephemeralClaimName(pod, podVolume);
  const namespace = pod.metadata?.namespace ?? "";
  const spec = createInTreeVolumeSpec(pod, podVolume, claimName, lookups);
  try {
    return translateInTreeSpecToCSIIfNeeded(spec, namespace);
  } catch (err) {
    throw new Error(
      `error performing CSI migration checks and translation for PVC ${JSON.stringify(namespace)}/${JSON.stringify(claimName)}: ${errorMessage(err)}`,
      { cause: err },
    );
  }
}

/** The pod volume's spec before translation (upstream createInTreeVolumeSpec). */
function createInTreeVolumeSpec(
  pod: V1Pod,
  podVolume: V1Volume,
  claimName: string,
  lookups: VolumeLookups,
): VolumeSpec {
  const readOnly = podVolume.persistentVolumeClaim?.readOnly ?? false;
  if (claimName === "") return specFromVolume(podVolume);

  const namespace = pod.metadata?.namespace ?? "";
  const failed = (reason: string) =>
    new Error(`error processing PVC "${namespace}"/"${claimName}": ${reason}`);
  const pvc = lookups.getClaim(namespace, claimName);
  if (!pvc) {
    throw failed(`failed to find PVC ${namespace}/${claimName} in PVCInformer cache: not found`);
  }
  if (pvc.status?.phase !== "Bound" || !pvc.spec?.volumeName) {
    throw failed(
      `PVC ${namespace}/${claimName} has non-bound phase (${JSON.stringify(pvc.status?.phase ?? "")}) ` +
        `or empty pvc.Spec.VolumeName (${JSON.stringify(pvc.spec?.volumeName ?? "")})`,
    );
  }
  if (podVolume.ephemeral && !ephemeralClaimIsForPod(pod, pvc)) {
    throw new Error(
      `PVC ${namespace}/${claimName} was not created for pod ${namespace}/${pod.metadata?.name ?? ""} (pod is not owner)`,
    );
  }
  const pvName = pvc.spec.volumeName;
  const pv = lookups.getVolume(pvName);
  if (!pv) throw failed(`failed to find PV "${pvName}" in PVInformer cache: not found`);
  const claimRef = pv.spec?.claimRef;
  if (!claimRef) {
    throw failed(
      `found PV object "${pvName}" but it has a nil pv.Spec.ClaimRef indicating it is not yet bound to the claim`,
    );
  }
  if (claimRef.uid !== pvc.metadata?.uid) {
    throw failed(
      `found PV object "${pvName}" but its pv.Spec.ClaimRef.UID (${JSON.stringify(claimRef.uid ?? "")}) ` +
        `does not point to claim.UID (${JSON.stringify(pvc.metadata?.uid ?? "")})`,
    );
  }
  return specFromPersistentVolume(pv, readOnly);
}

/** What processPodVolumes works with: the desired state, the plugins and the claim/volume caches. */
export interface PodVolumesContext {
  dsw: DesiredStateOfWorld;
  plugins: AttachablePluginFinder;
  lookups: VolumeLookups;
  log: LogSink;
}

/**
 * Adds the pod's attachable volumes to the desired state, or removes them (upstream
 * util.ProcessPodVolumes). Pods not scheduled to a managed node are ignored; a volume whose spec
 * cannot be built yet (claim not bound) or that needs no attaching is skipped: the claim's binding,
 * or the periodic populator, brings the pod back.
 */
export function processPodVolumes(
  pod: V1Pod,
  addVolumes: boolean,
  { dsw, plugins, lookups, log }: PodVolumesContext,
): void {
  const volumes = pod.spec?.volumes ?? [];
  const nodeName = pod.spec?.nodeName ?? "";
  if (volumes.length === 0 || nodeName === "" || !dsw.nodeExists(nodeName)) return;
  const podUID = pod.metadata?.uid ?? ""; // upstream GetUniquePodName
  const podRef = { pod: `${pod.metadata?.namespace ?? ""}/${pod.metadata?.name ?? ""}`, node: nodeName };
  for (const podVolume of volumes) {
    let spec: VolumeSpec;
    try {
      spec = createVolumeSpec(pod, podVolume, lookups);
    } catch (err) {
      log.debug({ ...podRef, volume: podVolume.name, err }, "Error processing volume for pod");
      continue;
    }
    if (!plugins.attachablePluginFor(spec)) continue; // needs no attaching, or no single plugin
    let volumeName: string;
    try {
      volumeName = resolveAttachableVolume(plugins, spec).volumeName;
    } catch (err) {
      log.debug({ ...podRef, volume: podVolume.name, err }, "Skipping volume for pod: no attachable plugin");
      continue;
    }
    if (addVolumes) {
      try {
        dsw.addPod(podUID, pod, spec, nodeName);
      } catch (err) {
        log.error(
          { ...podRef, volume: podVolume.name, err },
          "Failed to add volume for pod to desiredStateOfWorld",
        );
      }
    } else {
      dsw.deletePod(podUID, volumeName, nodeName);
    }
  }
}
