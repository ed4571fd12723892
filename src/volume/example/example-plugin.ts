import type { V1PersistentVolume } from "@kubernetes/client-node";
import type {
  DeletableVolumePlugin,
  Deleter,
  ProvisionableVolumePlugin,
  ProvisionOptions,
  Provisioner,
  VolumeSpec,
} from "../plugin.js";

/** The storage system the plugin drives; a real plugin would call the NAS's API here. */
export interface NfsExportBackend {
  /** Creates an export of `bytes` for the volume and returns its path on the server. */
  createExport(pvName: string, bytes: string): Promise<string>;
  /** Removes the export; succeeds when it is already gone. */
  deleteExport(path: string): Promise<void>;
}

/**
 * A sample out-of-tree-style plugin: StorageClasses with provisioner "example.com/nfs" get NFS
 * exports from one server, and released PVs on that server are deleted through the same backend.
 */
export class ExampleNfsPlugin implements ProvisionableVolumePlugin, DeletableVolumePlugin {
  readonly name = "example.com/nfs";
  readonly supportsMountOptions = true; // NFS PVs accept mountOptions such as "nfsvers=4.1"

  constructor(
    private readonly server: string,
    private readonly backend: NfsExportBackend,
  ) {}

  canSupport(spec: VolumeSpec): boolean {
    return (spec.persistentVolume?.spec?.nfs ?? spec.volume?.nfs)?.server === this.server;
  }

  newProvisioner({ pvName, pvc, reclaimPolicy, mountOptions }: ProvisionOptions): Provisioner {
    const storage = pvc.spec?.resources?.requests?.storage;
    if (storage === undefined) throw new Error("claim has no storage request");
    return {
      provision: async (): Promise<V1PersistentVolume> => ({
        metadata: { name: pvName },
        spec: {
          capacity: { storage },
          accessModes: pvc.spec?.accessModes ?? ["ReadWriteMany"],
          persistentVolumeReclaimPolicy: reclaimPolicy,
          mountOptions: [...mountOptions],
          nfs: { server: this.server, path: await this.backend.createExport(pvName, storage) },
        },
      }),
    };
  }

  newDeleter(spec: VolumeSpec): Deleter {
    const path = spec.persistentVolume?.spec?.nfs?.path;
    if (path === undefined) throw new Error("not an NFS PersistentVolume");
    return { delete: () => this.backend.deleteExport(path) };
  }
}
