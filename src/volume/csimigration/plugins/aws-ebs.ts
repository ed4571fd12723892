import type { V1PersistentVolume, V1Volume } from "@kubernetes/client-node";
import { translateTopologyFromInTreeToCSI, type InTreePlugin } from "./in-tree-volume.js";

/** Upstream csi-translation-lib/plugins/aws_ebs.go. */
export const AWS_EBS_DRIVER_NAME = "ebs.csi.aws.com";
export const AWS_EBS_IN_TREE_PLUGIN_NAME = "kubernetes.io/aws-ebs";
export const AWS_EBS_TOPOLOGY_KEY = `topology.${AWS_EBS_DRIVER_NAME}/zone`;

const AWS_VOLUME_REG_MATCH = /^vol-[^/]*$/;

/**
 * The EBS volume ID ("vol-…") of a Kubernetes volume ID: "aws://<zone>/<id>", "aws:///<id>" or a bare
 * ID, which is taken as it is (upstream KubernetesVolumeIDToEBSVolumeID).
 */
export function kubernetesVolumeIDToEBSVolumeID(kubernetesID: string): string {
  if (!kubernetesID.startsWith("aws://")) return kubernetesID;
  let path: string;
  try {
    path = decodeURIComponent(new URL(kubernetesID).pathname);
  } catch (err) {
    throw new Error(`Invalid disk name (${kubernetesID}): ${String(err)}`, { cause: err });
  }
  const awsID = path.replace(/^\/+|\/+$/g, "");
  if (!AWS_VOLUME_REG_MATCH.test(awsID)) throw new Error(`Invalid format for AWS volume (${kubernetesID})`);
  return awsID;
}

function volumeHandle(volumeID: string): string {
  try {
    return kubernetesVolumeIDToEBSVolumeID(volumeID);
  } catch (err) {
    throw new Error(`failed to translate Kubernetes ID to EBS Volume ID ${(err as Error).message}`, {
      cause: err,
    });
  }
}

export const awsElasticBlockStoreCSITranslator: InTreePlugin = {
  inTreePluginName: AWS_EBS_IN_TREE_PLUGIN_NAME,
  csiPluginName: AWS_EBS_DRIVER_NAME,
  canSupport: (pv) => pv.spec?.awsElasticBlockStore !== undefined,
  canSupportInline: (volume) => volume.awsElasticBlockStore !== undefined,

  translateInTreeInlineVolumeToCSI(volume: V1Volume): V1PersistentVolume {
    const source = volume.awsElasticBlockStore;
    if (!source) throw new Error("volume is nil or AWS EBS not defined on volume");
    const handle = volumeHandle(source.volumeID);
    return {
      // Unique per disk: the kubelet uses it in the staging path.
      metadata: { name: `${AWS_EBS_DRIVER_NAME}-${handle}` },
      spec: {
        csi: {
          driver: AWS_EBS_DRIVER_NAME,
          volumeHandle: handle,
          readOnly: source.readOnly ?? false,
          fsType: source.fsType ?? "",
          volumeAttributes: { partition: String(source.partition ?? 0) },
        },
        accessModes: ["ReadWriteOnce"],
      },
    };
  },

  translateInTreePVToCSI(pv: V1PersistentVolume): V1PersistentVolume {
    const source = pv.spec?.awsElasticBlockStore;
    if (!pv.spec || !source) throw new Error("pv is nil or AWS EBS not defined on pv");
    const csi = {
      driver: AWS_EBS_DRIVER_NAME,
      volumeHandle: volumeHandle(source.volumeID),
      readOnly: source.readOnly ?? false,
      fsType: source.fsType ?? "",
      volumeAttributes: { partition: String(source.partition ?? 0) },
    };
    translateTopologyFromInTreeToCSI(pv, AWS_EBS_TOPOLOGY_KEY);
    delete pv.spec.awsElasticBlockStore;
    pv.spec.csi = csi;
    return pv;
  },
};
