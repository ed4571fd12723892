import type { V1PersistentVolume, V1Volume } from "@kubernetes/client-node";
import {
  LABEL_FAILURE_DOMAIN_BETA_ZONE,
  LABEL_MULTI_ZONE_DELIMITER,
  LABEL_TOPOLOGY_ZONE,
  translateTopologyFromInTreeToCSI,
  type InTreePlugin,
} from "./in-tree-volume.js";

/** Upstream csi-translation-lib/plugins/gce_pd.go. */
export const GCE_PD_DRIVER_NAME = "pd.csi.storage.gke.io";
export const GCE_PD_IN_TREE_PLUGIN_NAME = "kubernetes.io/gce-pd";
export const GCE_PD_TOPOLOGY_KEY = "topology.gke.io/zone";
/** Stands for a project or zone the in-tree volume does not name. */
export const UNSPECIFIED_VALUE = "UNSPECIFIED";

const zonalVolumeID = (project: string, zone: string, disk: string) =>
  `projects/${project}/zones/${zone}/disks/${disk}`;
const regionalVolumeID = (project: string, region: string, disk: string) =>
  `projects/${project}/regions/${region}/disks/${disk}`;

/**
 * In-tree PD never enforced access modes: ReadWriteMany counts as ReadWriteOnce, and
 * [ReadWriteOnce, ReadOnlyMany] as ReadWriteOnce, which the CSI driver and external-attacher accept
 * (upstream backwardCompatibleAccessModes; kubernetes-csi/external-attacher#153).
 */
export function backwardCompatibleAccessModes(modes: readonly string[] | undefined): string[] | undefined {
  if (modes === undefined) return undefined;
  const set = new Set(modes.map((mode) => (mode === "ReadWriteMany" ? "ReadWriteOnce" : mode)));
  if (set.has("ReadWriteOnce")) return ["ReadWriteOnce"];
  if (set.has("ReadOnlyMany")) return ["ReadOnlyMany"];
  return ["ReadWriteOnce"];
}

/** The one region of "{locale}-{region}-{zone}" zones (upstream gceGetRegionFromZones). */
export function gceGetRegionFromZones(zones: readonly string[]): string {
  if (zones.length < 1) throw new Error("no zones specified");
  const regions = new Set<string>();
  for (const zone of zones) {
    const split = zone.split("-");
    if (split.length !== 3) {
      throw new Error(`zone in unexpected format, expected: {locale}-{region}-{zone}, got: ${zone}`);
    }
    regions.add(split.slice(0, 2).join("-"));
  }
  if (regions.size !== 1) {
    throw new Error(`multiple or no regions gotten from zones, got: [${[...regions].sort().join(" ")}]`);
  }
  return [...regions][0] ?? "";
}

const partitionAttribute = (partition: number | undefined) =>
  partition !== undefined && partition !== 0 ? String(partition) : "";

export const gcePersistentDiskCSITranslator: InTreePlugin = {
  inTreePluginName: GCE_PD_IN_TREE_PLUGIN_NAME,
  csiPluginName: GCE_PD_DRIVER_NAME,
  canSupport: (pv) => pv.spec?.gcePersistentDisk !== undefined,
  canSupportInline: (volume) => volume.gcePersistentDisk !== undefined,

  translateInTreeInlineVolumeToCSI(volume: V1Volume): V1PersistentVolume {
    const source = volume.gcePersistentDisk;
    if (!source) throw new Error("volume is nil or GCE PD not defined on volume");
    const readOnly = source.readOnly ?? false;
    return {
      metadata: { name: `${GCE_PD_DRIVER_NAME}-${source.pdName}` },
      spec: {
        csi: {
          driver: GCE_PD_DRIVER_NAME,
          volumeHandle: zonalVolumeID(UNSPECIFIED_VALUE, UNSPECIFIED_VALUE, source.pdName),
          readOnly,
          fsType: source.fsType ?? "",
          volumeAttributes: { partition: partitionAttribute(source.partition) },
        },
        accessModes: [readOnly ? "ReadOnlyMany" : "ReadWriteOnce"],
        volumeMode: "Filesystem",
      },
    };
  },

  translateInTreePVToCSI(pv: V1PersistentVolume): V1PersistentVolume {
    const source = pv.spec?.gcePersistentDisk;
    if (!pv.spec || !source) throw new Error("pv is nil or GCE Persistent Disk source not defined on pv");
    // The zone label is beta or GA depending on the release that created the PV.
    const labels = pv.metadata?.labels ?? {};
    const zonesLabel = labels[LABEL_FAILURE_DOMAIN_BETA_ZONE] || (labels[LABEL_TOPOLOGY_ZONE] ?? "");
    const zones = zonesLabel.split(LABEL_MULTI_ZONE_DELIMITER);
    let volumeID: string;
    if (zones.length === 1 && zones[0] !== "") {
      volumeID = zonalVolumeID(UNSPECIFIED_VALUE, zones[0] ?? "", source.pdName);
    } else if (zones.length > 1) {
      let region: string;
      try {
        region = gceGetRegionFromZones(zones);
      } catch (err) {
        throw new Error(`failed to get region from zones: ${(err as Error).message}`, { cause: err });
      }
      volumeID = regionalVolumeID(UNSPECIFIED_VALUE, region, source.pdName);
    } else {
      volumeID = zonalVolumeID(UNSPECIFIED_VALUE, UNSPECIFIED_VALUE, source.pdName);
    }
    const csi = {
      driver: GCE_PD_DRIVER_NAME,
      volumeHandle: volumeID,
      readOnly: source.readOnly ?? false,
      fsType: source.fsType ?? "",
      volumeAttributes: { partition: partitionAttribute(source.partition) },
    };
    translateTopologyFromInTreeToCSI(pv, GCE_PD_TOPOLOGY_KEY);
    delete pv.spec.gcePersistentDisk;
    pv.spec.csi = csi;
    const accessModes = backwardCompatibleAccessModes(pv.spec.accessModes);
    if (accessModes === undefined) delete pv.spec.accessModes;
    else pv.spec.accessModes = accessModes;
    return pv;
  },
};
