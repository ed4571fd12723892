import type { V1PersistentVolume, V1Volume } from "@kubernetes/client-node";
import {
  addTopology,
  getTopologyLabel,
  getTopologyValues,
  replaceTopology,
  type InTreePlugin,
} from "./in-tree-volume.js";

/** Upstream csi-translation-lib/plugins/vsphere_volume.go. */
export const VSPHERE_DRIVER_NAME = "csi.vsphere.vmware.com";
export const VSPHERE_IN_TREE_PLUGIN_NAME = "kubernetes.io/vsphere-volume";
export const VSPHERE_CSI_TOPOLOGY_ZONE_KEY = "topology.csi.vmware.com/zone";
export const VSPHERE_CSI_TOPOLOGY_REGION_KEY = "topology.csi.vmware.com/region";

const PARAM_STORAGE_POLICY_NAME = "storagepolicyname";

/**
 * Zone and region both move to the driver's keys, each from the node affinity or else from the PV's
 * label, taken whole (upstream translateTopologyFromInTreevSphereToCSI).
 */
function translateTopology(pv: V1PersistentVolume): void {
  const { zoneLabel, regionLabel } = getTopologyLabel(pv);
  const labels = pv.metadata?.labels ?? {};
  for (const [label, csiKey] of [
    [zoneLabel, VSPHERE_CSI_TOPOLOGY_ZONE_KEY],
    [regionLabel, VSPHERE_CSI_TOPOLOGY_REGION_KEY],
  ] as const) {
    if (getTopologyValues(pv, label).length > 0) replaceTopology(pv, label, csiKey);
    else if (labels[label]) {
      try {
        addTopology(pv, csiKey, [labels[label]]);
      } catch {
        // Upstream ignores a label with no usable value (only blanks).
      }
    }
  }
}

export const vSphereCSITranslator: InTreePlugin = {
  inTreePluginName: VSPHERE_IN_TREE_PLUGIN_NAME,
  csiPluginName: VSPHERE_DRIVER_NAME,
  canSupport: (pv) => pv.spec?.vsphereVolume !== undefined,
  canSupportInline: (volume) => volume.vsphereVolume !== undefined,

  translateInTreeInlineVolumeToCSI(volume: V1Volume): V1PersistentVolume {
    const source = volume.vsphereVolume;
    if (!source) throw new Error("volume is nil or VsphereVolume not defined on volume");
    if (source.storagePolicyName) {
      // Upstream reads the policy from the new PV's (nil) vsphereVolume here and panics, taking
      // kube-controller-manager down; refusing the volume keeps the controller up.
      throw new Error("inline VsphereVolume with storagePolicyName cannot be translated to CSI");
    }
    return {
      metadata: { name: `${VSPHERE_DRIVER_NAME}-${source.volumePath}` },
      spec: {
        csi: {
          driver: VSPHERE_DRIVER_NAME,
          volumeHandle: source.volumePath,
          fsType: source.fsType ?? "",
          volumeAttributes: {},
        },
        accessModes: ["ReadWriteOnce"],
      },
    };
  },

  translateInTreePVToCSI(pv: V1PersistentVolume): V1PersistentVolume {
    const source = pv.spec?.vsphereVolume;
    if (!pv.spec || !source) throw new Error("pv is nil or VsphereVolume not defined on pv");
    const attributes: Record<string, string> = {};
    if (source.storagePolicyName) attributes[PARAM_STORAGE_POLICY_NAME] = source.storagePolicyName;
    const csi = {
      driver: VSPHERE_DRIVER_NAME,
      volumeHandle: source.volumePath,
      fsType: source.fsType ?? "",
      volumeAttributes: attributes,
    };
    translateTopology(pv);
    delete pv.spec.vsphereVolume;
    pv.spec.csi = csi;
    return pv;
  },
};
