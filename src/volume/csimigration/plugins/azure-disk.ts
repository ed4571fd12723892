import type { V1CSIPersistentVolumeSource, V1PersistentVolume, V1Volume } from "@kubernetes/client-node";
import type { InTreePlugin } from "./in-tree-volume.js";

/** Upstream csi-translation-lib/plugins/azure_disk.go. */
export const AZURE_DISK_DRIVER_NAME = "disk.csi.azure.com";
export const AZURE_DISK_IN_TREE_PLUGIN_NAME = "kubernetes.io/azure-disk";

const KIND = "kind";
const CACHING_MODE = "cachingmode";
const FS_TYPE = "fstype";
const MANAGED = "Managed";

/** Only managed disks migrate: the CSI driver has no shared or dedicated blob disks. */
function checkKind(kind: string | undefined): void {
  if (kind !== undefined && kind.toLowerCase() !== MANAGED.toLowerCase()) {
    throw new Error(`kind(${kind}) is not supported in csi migration`);
  }
}

export const azureDiskCSITranslator: InTreePlugin = {
  inTreePluginName: AZURE_DISK_IN_TREE_PLUGIN_NAME,
  csiPluginName: AZURE_DISK_DRIVER_NAME,
  canSupport: (pv) => pv.spec?.azureDisk !== undefined,
  canSupportInline: (volume) => volume.azureDisk !== undefined,

  translateInTreeInlineVolumeToCSI(volume: V1Volume): V1PersistentVolume {
    const source = volume.azureDisk;
    if (!source) throw new Error("volume is nil or Azure Disk not defined on volume");
    checkKind(source.kind);
    const csi: V1CSIPersistentVolumeSource = {
      driver: AZURE_DISK_DRIVER_NAME,
      volumeHandle: source.diskURI,
      readOnly: source.readOnly ?? false,
      volumeAttributes: { [KIND]: MANAGED },
    };
    const attributes = csi.volumeAttributes ?? {};
    // Inline, an empty caching mode is left out; on a PV it is kept (upstream differs the same way).
    if (source.cachingMode) attributes[CACHING_MODE] = source.cachingMode;
    if (source.fsType !== undefined) {
      csi.fsType = source.fsType;
      attributes[FS_TYPE] = source.fsType;
    }
    return {
      metadata: { name: source.diskURI },
      spec: { csi, accessModes: ["ReadWriteOnce"] },
    };
  },

  translateInTreePVToCSI(pv: V1PersistentVolume): V1PersistentVolume {
    const source = pv.spec?.azureDisk;
    if (!pv.spec || !source) throw new Error("pv is nil or Azure Disk source not defined on pv");
    checkKind(source.kind);
    const attributes: Record<string, string> = { [KIND]: MANAGED };
    const csi: V1CSIPersistentVolumeSource = {
      driver: AZURE_DISK_DRIVER_NAME,
      volumeHandle: source.diskURI,
      readOnly: source.readOnly ?? false,
      volumeAttributes: attributes,
    };
    if (source.cachingMode !== undefined) attributes[CACHING_MODE] = source.cachingMode;
    if (source.fsType !== undefined) {
      csi.fsType = source.fsType;
      attributes[FS_TYPE] = source.fsType;
    }
    delete pv.spec.azureDisk;
    pv.spec.csi = csi;
    return pv;
  },
};
