import type { V1NFSVolumeSource } from "@kubernetes/client-node";
import type { RecyclableVolumePlugin, RecycleEventRecorder, VolumeSpec } from "../plugin.js";
import { PodRecycler, type PodRecyclerOptions } from "../recycler.js";

export const NFS_PLUGIN_NAME = "kubernetes.io/nfs";

/** --pv-recycler-minimum-timeout-nfs's default, seconds. */
export const NFS_RECYCLER_MINIMUM_TIMEOUT_SECONDS = 300;
/** --pv-recycler-increment-timeout-nfs's default, seconds per Gi. */
export const NFS_RECYCLER_INCREMENT_TIMEOUT_SECONDS = 30;

function nfsSource(spec: VolumeSpec): V1NFSVolumeSource | undefined {
  return spec.volume ? spec.volume.nfs : spec.persistentVolume.spec?.nfs;
}

/**
 * Upstream pkg/volume/nfs, controller side: recycles Released NFS PVs whose reclaim policy is
 * Recycle with a scrubber pod mounting the export (the kubelet mounts it; nothing else here).
 */
export class NFSPlugin implements RecyclableVolumePlugin {
  readonly name = NFS_PLUGIN_NAME;
  readonly #recycler: PodRecycler;

  /** Throws when the pod template has no volume to replace. */
  constructor(options: PodRecyclerOptions) {
    this.#recycler = new PodRecycler(options);
  }

  canSupport(spec: VolumeSpec): boolean {
    return nfsSource(spec) !== undefined;
  }

  /** The pod mounts server:path read-write, whatever the PV's readOnly says, as upstream's. */
  async recycle(
    pvName: string,
    spec: VolumeSpec,
    recorder: RecycleEventRecorder,
    signal?: AbortSignal,
  ): Promise<void> {
    const pv = spec.persistentVolume;
    const source = pv?.spec?.nfs;
    if (!pv || !source) throw new Error("spec.PersistentVolumeSource.NFS is nil");
    await this.#recycler.recycle(
      pvName,
      pv,
      { nfs: { server: source.server, path: source.path } },
      recorder,
      signal,
    );
  }
}
