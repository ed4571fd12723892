import type { V1PersistentVolume, V1Volume } from "@kubernetes/client-node";
import type { InTreePlugin } from "./in-tree-volume.js";

/** Upstream csi-translation-lib/plugins/azure_file.go. */
export const AZURE_FILE_DRIVER_NAME = "file.csi.azure.com";
export const AZURE_FILE_IN_TREE_PLUGIN_NAME = "kubernetes.io/azure-file";

const SHARE_NAME_FIELD = "sharename";
const DEFAULT_SECRET_NAMESPACE = "default";
const RESOURCE_GROUP_ANNOTATION = "kubernetes.io/azure-file-resource-group";
const SECRET_NAME_FORMAT = /azure-storage-account-(.+)-secret/;

/** "<resource group>#<account>#<share>#<volume name>#<secret namespace>" (upstream volumeIDTemplate). */
const volumeID = (resourceGroup: string, account: string, share: string, name: string, namespace: string) =>
  `${resourceGroup}#${account}#${share}#${name}#${namespace}`;

/** The storage account named by an "azure-storage-account-<account>-secret" secret (upstream getStorageAccountName). */
export function getStorageAccountName(secretName: string): string {
  const matches = SECRET_NAME_FORMAT.exec(secretName);
  if (matches?.[1] === undefined) {
    throw new Error(
      `could not get account name from ${secretName}, correct format: ${SECRET_NAME_FORMAT.source}`,
    );
  }
  return matches[1];
}

/** Upstream falls back to the secret's own name when it does not follow the pattern. */
function accountName(secretName: string): string {
  try {
    return getStorageAccountName(secretName);
  } catch {
    return secretName;
  }
}

export const azureFileCSITranslator: InTreePlugin = {
  inTreePluginName: AZURE_FILE_IN_TREE_PLUGIN_NAME,
  csiPluginName: AZURE_FILE_DRIVER_NAME,
  canSupport: (pv) => pv.spec?.azureFile !== undefined,
  canSupportInline: (volume) => volume.azureFile !== undefined,

  translateInTreeInlineVolumeToCSI(volume: V1Volume, podNamespace: string): V1PersistentVolume {
    const source = volume.azureFile;
    if (!source) throw new Error("volume is nil or Azure File not defined on volume");
    const secretNamespace = podNamespace !== "" ? podNamespace : DEFAULT_SECRET_NAMESPACE;
    const id = volumeID("", accountName(source.secretName), source.shareName, volume.name, secretNamespace);
    return {
      metadata: { name: id },
      spec: {
        csi: {
          driver: AZURE_FILE_DRIVER_NAME,
          volumeHandle: id,
          readOnly: source.readOnly ?? false,
          volumeAttributes: { [SHARE_NAME_FIELD]: source.shareName },
          nodeStageSecretRef: { name: source.secretName, namespace: secretNamespace },
        },
        accessModes: ["ReadWriteMany"],
      },
    };
  },

  translateInTreePVToCSI(pv: V1PersistentVolume): V1PersistentVolume {
    const source = pv.spec?.azureFile;
    if (!pv.spec || !source) throw new Error("pv is nil or Azure File source not defined on pv");
    const resourceGroup = pv.metadata?.annotations?.[RESOURCE_GROUP_ANNOTATION] ?? "";
    const namespace = source.secretNamespace ?? pv.spec.claimRef?.namespace ?? "";
    if (namespace === "") {
      throw new Error("could not find a secret namespace in PersistentVolumeSource or ClaimRef");
    }
    const id = volumeID(
      resourceGroup,
      accountName(source.secretName),
      source.shareName,
      pv.metadata?.name ?? "",
      namespace,
    );
    delete pv.spec.azureFile;
    pv.spec.csi = {
      driver: AZURE_FILE_DRIVER_NAME,
      nodeStageSecretRef: { name: source.secretName, namespace },
      readOnly: source.readOnly ?? false,
      volumeAttributes: { [SHARE_NAME_FIELD]: source.shareName },
      volumeHandle: id,
    };
    return pv;
  },
};
