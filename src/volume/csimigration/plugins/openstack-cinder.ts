import type { V1PersistentVolume, V1Volume } from "@kubernetes/client-node";
import { translateTopologyFromInTreeToCSI, type InTreePlugin } from "./in-tree-volume.js";

/** Upstream csi-translation-lib/plugins/openstack_cinder.go. */
export const CINDER_DRIVER_NAME = "cinder.csi.openstack.org";
export const CINDER_IN_TREE_PLUGIN_NAME = "kubernetes.io/cinder";
export const CINDER_TOPOLOGY_KEY = "topology.cinder.csi.openstack.org/zone";

export const osCinderCSITranslator: InTreePlugin = {
  inTreePluginName: CINDER_IN_TREE_PLUGIN_NAME,
  csiPluginName: CINDER_DRIVER_NAME,
  canSupport: (pv) => pv.spec?.cinder !== undefined,
  canSupportInline: (volume) => volume.cinder !== undefined,

  translateInTreeInlineVolumeToCSI(volume: V1Volume): V1PersistentVolume {
    const source = volume.cinder;
    if (!source) throw new Error("volume is nil or Cinder not defined on volume");
    return {
      metadata: { name: `${CINDER_DRIVER_NAME}-${source.volumeID}` },
      spec: {
        csi: {
          driver: CINDER_DRIVER_NAME,
          volumeHandle: source.volumeID,
          readOnly: source.readOnly ?? false,
          fsType: source.fsType ?? "",
          volumeAttributes: {},
        },
        accessModes: ["ReadWriteOnce"],
      },
    };
  },

  translateInTreePVToCSI(pv: V1PersistentVolume): V1PersistentVolume {
    const source = pv.spec?.cinder;
    if (!pv.spec || !source) throw new Error("pv is nil or Cinder not defined on pv");
    const csi = {
      driver: CINDER_DRIVER_NAME,
      volumeHandle: source.volumeID,
      readOnly: source.readOnly ?? false,
      fsType: source.fsType ?? "",
      volumeAttributes: {},
    };
    translateTopologyFromInTreeToCSI(pv, CINDER_TOPOLOGY_KEY);
    delete pv.spec.cinder;
    pv.spec.csi = csi;
    return pv;
  },
};
