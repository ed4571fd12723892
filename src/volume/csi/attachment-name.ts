import { createHash } from "node:crypto";

/**
 * The VolumeAttachment name for a volume on a node, "csi-" + hex(sha256(handle + driver + node)) as
 * upstream getAttachmentName. The external-attacher and kubelet derive the same name, so it must
 * match upstream byte for byte (plain concatenation, no separators).
 */
export function attachmentName(volumeHandle: string, driverName: string, nodeName: string): string {
  return `csi-${createHash("sha256")
    .update(volumeHandle + driverName + nodeName)
    .digest("hex")}`;
}
