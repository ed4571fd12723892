import type { AttachableVolumePlugin, Attacher, Detacher, VolumeSpec } from "../plugin.js";

/** The block-storage API the plugin drives; a real plugin would call the cloud's API here. */
export interface BlockStorageApi {
  /** Attaches the disk to the instance and returns its device path; attaching twice is a no-op. */
  attach(diskId: string, instance: string): Promise<string>;
  /** Detaches it; succeeds when it is not attached. */
  detach(diskId: string, instance: string): Promise<void>;
  isAttached(diskId: string, instance: string): Promise<boolean>;
}

/**
 * A sample attachable plugin for the attach/detach controller: PVs whose CSI source names the driver
 * "disks.example.com" are attached by calling the storage API directly (as in-tree cloud plugins
 * did) instead of through a VolumeAttachment. Register it in place of (or beside) the CSI plugin for
 * that driver; exactly one plugin may support a spec.
 */
export class ExampleDiskPlugin implements AttachableVolumePlugin {
  readonly name = "example.com/disk";

  constructor(private readonly api: BlockStorageApi) {}

  canSupport(spec: VolumeSpec): boolean {
    return spec.persistentVolume?.spec?.csi?.driver === "disks.example.com";
  }

  /** The disk id: unique per disk, so the controller's key is "example.com/disk/<id>". */
  getVolumeName(spec: VolumeSpec): string {
    const id = spec.persistentVolume?.spec?.csi?.volumeHandle;
    if (!id) throw new Error("not an example.com disk");
    return id;
  }

  canAttach(): boolean {
    return true;
  }

  newAttacher(): Attacher {
    return {
      attach: (spec, nodeName) => this.api.attach(this.getVolumeName(spec), nodeName),
      volumesAreAttached: async (specs, nodeName) =>
        new Map(
          await Promise.all(
            specs.map(async (s): Promise<[VolumeSpec, boolean]> => [
              s,
              await this.api.isAttached(this.getVolumeName(s), nodeName),
            ]),
          ),
        ),
    };
  }

  newDetacher(): Detacher {
    // volumeName is what getVolumeName returned: the disk id.
    return { detach: (diskId, nodeName) => this.api.detach(diskId, nodeName) };
  }
}
