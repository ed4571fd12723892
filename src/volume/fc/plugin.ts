import type { V1FCVolumeSource } from "@kubernetes/client-node";
import { NOOP_ATTACHER } from "../noop-attacher.js";
import type { AttachableVolumePlugin, Attacher, Detacher, VolumeSpec } from "../plugin.js";

export const FC_PLUGIN_NAME = "kubernetes.io/fc";

function fcSource(spec: VolumeSpec): V1FCVolumeSource | undefined {
  return spec.volume ? spec.volume.fc : spec.persistentVolume.spec?.fc;
}

/** Go's %v of a []string, which upstream's volume names embed: "[a b]". */
function goList(items: readonly string[]): string {
  return `[${items.join(" ")}]`;
}

/**
 * Upstream pkg/volume/fc, controller side: attachable with no-op attach and detach (the node's HBA
 * sees the LUN), so that the kubelet finds the volume in node.status.volumesAttached.
 */
export class FCPlugin implements AttachableVolumePlugin {
  readonly name = FC_PLUGIN_NAME;

  canSupport(spec: VolumeSpec): boolean {
    return fcSource(spec) !== undefined;
  }

  /**
   * "[<wwn> …]:<lun>" for target WWNs with a LUN, else "[<wwid> …]". Upstream names a source with
   * neither "" without an error (the API's validation rejects such sources); so does this.
   */
  getVolumeName(spec: VolumeSpec): string {
    const source = fcSource(spec);
    if (!source) throw new Error("Spec does not reference a FibreChannel volume type");
    const wwns = source.targetWWNs ?? [];
    if (wwns.length > 0 && source.lun !== undefined) return `${goList(wwns)}:${source.lun}`;
    if (source.wwids?.length) return goList(source.wwids);
    return "";
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
