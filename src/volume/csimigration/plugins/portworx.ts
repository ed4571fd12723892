import type { V1PersistentVolume, V1SecretReference, V1Volume } from "@kubernetes/client-node";
import type { InTreePlugin } from "./in-tree-volume.js";

/** Upstream csi-translation-lib/plugins/portworx.go. */
export const PORTWORX_DRIVER_NAME = "pxd.portworx.com";
export const PORTWORX_VOLUME_PLUGIN_NAME = "kubernetes.io/portworx-volume";
export const OPEN_STORAGE_AUTH_SECRET_NAME_KEY = "openstorage.io/auth-secret-name";
export const OPEN_STORAGE_AUTH_SECRET_NAMESPACE_KEY = "openstorage.io/auth-secret-namespace";

export const portworxCSITranslator: InTreePlugin = {
  inTreePluginName: PORTWORX_VOLUME_PLUGIN_NAME,
  csiPluginName: PORTWORX_DRIVER_NAME,
  canSupport: (pv) => pv.spec?.portworxVolume !== undefined,
  canSupportInline: (volume) => volume.portworxVolume !== undefined,

  translateInTreeInlineVolumeToCSI(volume: V1Volume): V1PersistentVolume {
    const source = volume.portworxVolume;
    if (!source) throw new Error("volume is nil or PortworxVolume not defined on volume");
    // readOnly becomes the access mode only, not the CSI source's readOnly (upstream).
    return {
      metadata: { name: `${PORTWORX_DRIVER_NAME}-${source.volumeID}` },
      spec: {
        csi: {
          driver: PORTWORX_DRIVER_NAME,
          volumeHandle: source.volumeID,
          fsType: source.fsType ?? "",
          volumeAttributes: {},
        },
        accessModes: [source.readOnly ? "ReadOnlyMany" : "ReadWriteOnce"],
      },
    };
  },

  translateInTreePVToCSI(pv: V1PersistentVolume): V1PersistentVolume {
    const source = pv.spec?.portworxVolume;
    if (!pv.spec || !source) throw new Error("pv is nil or PortworxVolume not defined on pv");
    // The OpenStorage auth secret, when both annotations name it, serves every CSI call.
    const annotations = pv.metadata?.annotations ?? {};
    const name = annotations[OPEN_STORAGE_AUTH_SECRET_NAME_KEY];
    const namespace = annotations[OPEN_STORAGE_AUTH_SECRET_NAMESPACE_KEY];
    const secretRef: V1SecretReference | undefined =
      name !== undefined && namespace !== undefined ? { name, namespace } : undefined;
    delete pv.spec.portworxVolume;
    pv.spec.csi = {
      driver: PORTWORX_DRIVER_NAME,
      volumeHandle: source.volumeID,
      fsType: source.fsType ?? "",
      volumeAttributes: {},
      ...(secretRef && {
        controllerPublishSecretRef: secretRef,
        nodeStageSecretRef: secretRef,
        nodePublishSecretRef: secretRef,
        controllerExpandSecretRef: secretRef,
        nodeExpandSecretRef: secretRef,
      }),
    };
    return pv;
  },
};
