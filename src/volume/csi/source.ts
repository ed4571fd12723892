import type { V1CSIPersistentVolumeSource } from "@kubernetes/client-node";
import type { VolumeSpec } from "../plugin.js";

export const CSI_PLUGIN_NAME = "kubernetes.io/csi";
/** Joins driver and handle in the plugin's volume name; CSI handles may contain "/" but not "^". */
export const VOLUME_NAME_SEPARATOR = "^";

/** Upstream's log(): errors carry the plugin name so events say which plugin failed. */
export function csiMessage(message: string): string {
  return `${CSI_PLUGIN_NAME}: ${message}`;
}

/**
 * The PV's CSI source (upstream getPVSourceFromSpec). Inline CSI volumes are ephemeral: the kubelet
 * publishes them directly, so they are never attached and have no volume name here.
 */
export function persistentSource(spec: VolumeSpec): V1CSIPersistentVolumeSource {
  if (spec.volume?.csi) throw new Error("unexpected api.CSIVolumeSource found in volume.Spec");
  const source = spec.persistentVolume?.spec?.csi;
  if (!source) throw new Error("volume source not found in volume.Spec");
  return source;
}
