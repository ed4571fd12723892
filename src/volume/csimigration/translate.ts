import type { V1PersistentVolume, V1Volume } from "@kubernetes/client-node";
import { awsElasticBlockStoreCSITranslator } from "./plugins/aws-ebs.js";
import { azureDiskCSITranslator } from "./plugins/azure-disk.js";
import { azureFileCSITranslator } from "./plugins/azure-file.js";
import { gcePersistentDiskCSITranslator } from "./plugins/gce-pd.js";
import type { InTreePlugin } from "./plugins/in-tree-volume.js";
import { osCinderCSITranslator } from "./plugins/openstack-cinder.js";
import { portworxCSITranslator } from "./plugins/portworx.js";
import { vSphereCSITranslator } from "./plugins/vsphere-volume.js";
import { deepCopy } from "../../util/deep-copy.js";

/*
 * In-tree volume sources to their CSI drivers' (upstream k8s.io/csi-translation-lib translate.go,
 * CSITranslator). A volume has exactly one source (API validation), so at most one plugin matches.
 */

/** Every in-tree plugin with a CSI replacement, by CSI driver name (upstream inTreePlugins). */
export const IN_TREE_PLUGINS: ReadonlyMap<string, InTreePlugin> = new Map(
  [
    gcePersistentDiskCSITranslator,
    awsElasticBlockStoreCSITranslator,
    osCinderCSITranslator,
    azureDiskCSITranslator,
    azureFileCSITranslator,
    vSphereCSITranslator,
    portworxCSITranslator,
  ].map((plugin) => [plugin.csiPluginName, plugin]),
);

const plugins = [...IN_TREE_PLUGINS.values()];

/**
 * The PV with its in-tree source replaced by the CSI one (zone labels and node affinity moved to the
 * driver's topology keys); `pv` itself is not modified.
 */
export function translateInTreePVToCSI(pv: V1PersistentVolume): V1PersistentVolume {
  const copy = deepCopy(pv);
  const plugin = plugins.find((candidate) => candidate.canSupport(copy));
  if (!plugin) {
    throw new Error(
      `could not find in-tree plugin translation logic for ${JSON.stringify(pv.metadata?.name ?? "")}`,
    );
  }
  return plugin.translateInTreePVToCSI(copy);
}

/**
 * A PV (never stored) carrying the CSI equivalent of an inline volume. Inline volumes are filesystem
 * volumes only, so the mode is Filesystem unless the plugin set it.
 */
export function translateInTreeInlineVolumeToCSI(volume: V1Volume, podNamespace: string): V1PersistentVolume {
  const plugin = plugins.find((candidate) => candidate.canSupportInline(volume));
  if (!plugin) {
    throw new Error(`could not find in-tree plugin translation logic for ${JSON.stringify(volume.name)}`);
  }
  const pv = plugin.translateInTreeInlineVolumeToCSI(deepCopy(volume), podNamespace);
  if (pv.spec) pv.spec.volumeMode ??= "Filesystem";
  return pv;
}

/** The in-tree plugin serving the PV or inline volume (upstream GetInTreePluginNameFromSpec). */
export function getInTreePluginNameFromSpec(
  pv: V1PersistentVolume | undefined,
  volume: V1Volume | undefined,
): string {
  if (!pv && !volume) throw new Error("both persistent volume and volume are nil");
  const plugin = findInTreePlugin(pv, volume);
  if (plugin) return plugin.inTreePluginName;
  throw new Error(
    pv
      ? `could not find in-tree plugin name from persistent volume ${pv.metadata?.name ?? ""}`
      : `could not find in-tree plugin name from volume ${volume?.name ?? ""}`,
  );
}

/**
 * The in-tree plugin serving the PV (else the inline volume), undefined when none does: without
 * getInTreePluginNameFromSpec's errors, for checks run on every pod volume in the cluster.
 */
export function findInTreePlugin(
  pv: V1PersistentVolume | undefined,
  volume: V1Volume | undefined,
): InTreePlugin | undefined {
  if (pv) return plugins.find((candidate) => candidate.canSupport(pv));
  if (volume) return plugins.find((candidate) => candidate.canSupportInline(volume));
  return undefined;
}

/** The CSI driver superseding in-tree plugin `pluginName` (upstream GetCSINameFromInTreeName). */
export function getCSINameFromInTreeName(pluginName: string): string {
  const plugin = plugins.find((candidate) => candidate.inTreePluginName === pluginName);
  if (!plugin) throw new Error(`could not find CSI Driver name for plugin ${pluginName}`);
  return plugin.csiPluginName;
}
