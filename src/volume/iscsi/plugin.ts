import type { V1ISCSIPersistentVolumeSource, V1ISCSIVolumeSource } from "@kubernetes/client-node";
import { NOOP_ATTACHER } from "../noop-attacher.js";
import type { AttachableVolumePlugin, Attacher, Detacher, VolumeSpec } from "../plugin.js";

export const ISCSI_PLUGIN_NAME = "kubernetes.io/iscsi";

function iscsiSource(spec: VolumeSpec): V1ISCSIVolumeSource | V1ISCSIPersistentVolumeSource | undefined {
  return spec.volume ? spec.volume.iscsi : spec.persistentVolume.spec?.iscsi;
}

/**
 * Upstream pkg/volume/iscsi, controller side: attachable with no-op attach and detach (the kubelet
 * logs in to the target), so that the kubelet, which waits for every attachable volume, finds it
 * in node.status.volumesAttached.
 */
export class ISCSIPlugin implements AttachableVolumePlugin {
  readonly name = ISCSI_PLUGIN_NAME;

  canSupport(spec: VolumeSpec): boolean {
    return iscsiSource(spec) !== undefined;
  }

  /** "<targetPortal>:<iqn>:<lun>", as upstream (portal and LUN as written, LUN 0 when unset). */
  getVolumeName(spec: VolumeSpec): string {
    const source = iscsiSource(spec);
    if (!source) throw new Error("Spec does not reference an ISCSI volume type");
    // Absent fields are Go's zero values (objects are not validated before they get here).
    const { targetPortal = "", iqn = "", lun = 0 } = source as Partial<V1ISCSIVolumeSource>;
    return `${targetPortal}:${iqn}:${lun}`;
  }

  canAttach(): boolean {
    return true;
  }

  newAttacher(): Attacher {
    return NOOP_ATTACHER;
  }

  newDetacher(): Detacher {
    return NOOP_ATTACHER;
  }
}
