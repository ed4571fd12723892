import type { V1Pod } from "@kubernetes/client-node";
import type {
  DeletableVolumePlugin,
  Deleter,
  ProvisionableVolumePlugin,
  ProvisionOptions,
  Provisioner,
  RecyclableVolumePlugin,
  RecycleEventRecorder,
  VolumeSpec,
} from "../plugin.js";
import { PodRecycler, type RecyclerPodApi } from "../recycler.js";
import type { SideEffectGate } from "../../runtime/write-gate.js";
import { HostPathDeleter } from "./deleter.js";
import { HostPathProvisioner } from "./provisioner.js";

export const HOST_PATH_PLUGIN_NAME = "kubernetes.io/host-path";
/** Where upstream's provisioner creates volumes. */
export const HOST_PATH_BASE_DIR = "/tmp/hostpath_pv";

export interface HostPathPluginOptions {
  /** --enable-hostpath-provisioner: otherwise newProvisioner throws. */
  provisioningEnabled: boolean;
  /** Where volumes are created and the only place the deleter removes from (default HOST_PATH_BASE_DIR). */
  baseDir?: string | undefined;
  /** Runs the recycler pod. */
  pods: RecyclerPodApi;
  /** --pv-recycler-minimum-timeout-hostpath, seconds (default 60). */
  recyclerMinimumTimeoutSeconds?: number | undefined;
  /** --pv-recycler-timeout-increment-hostpath, seconds per Gi (default 30). */
  recyclerTimeoutIncrementSeconds?: number | undefined;
  /** --pv-recycler-pod-template-filepath-hostpath's pod (default newRecyclerPodTemplate()). */
  recyclerPodTemplate?: V1Pod | undefined;
  /** How often the recycler pod is polled (default 1 s). */
  recyclerPollIntervalMs?: number | undefined;
  /** Shadow mode (src/shadow): directories are neither created nor removed. */
  shadow?: boolean;
  /** A leader's write gate, which creating and removing directories pass. */
  gate?: SideEffectGate | undefined;
}

function hostPathOf(spec: VolumeSpec): string | undefined {
  return (spec.persistentVolume?.spec?.hostPath ?? spec.volume?.hostPath)?.path;
}

/**
 * Upstream pkg/volume/hostpath, controller side: provisions directories on the controller's own
 * machine, deletes them, and recycles hostPath PVs with a scrubber pod. For single-node clusters,
 * development and testing only.
 */
export class HostPathPlugin
  implements ProvisionableVolumePlugin, DeletableVolumePlugin, RecyclableVolumePlugin
{
  readonly name = HOST_PATH_PLUGIN_NAME;
  readonly supportsMountOptions = false;
  readonly #options: HostPathPluginOptions;
  readonly #baseDir: string;
  readonly #recycler: PodRecycler;

  constructor(options: HostPathPluginOptions) {
    this.#options = options;
    this.#baseDir = options.baseDir ?? HOST_PATH_BASE_DIR;
    this.#recycler = new PodRecycler({
      pods: options.pods,
      minimumTimeoutSeconds: options.recyclerMinimumTimeoutSeconds ?? 60,
      timeoutIncrementSeconds: options.recyclerTimeoutIncrementSeconds ?? 30,
      podTemplate: options.recyclerPodTemplate,
      pollIntervalMs: options.recyclerPollIntervalMs,
    });
  }

  canSupport(spec: VolumeSpec): boolean {
    return hostPathOf(spec) !== undefined;
  }

  newProvisioner(options: ProvisionOptions): Provisioner {
    if (!this.#options.provisioningEnabled) {
      throw new Error(`provisioning in volume plugin "${this.name}" is disabled`);
    }
    return new HostPathProvisioner(
      this.name,
      this.#baseDir,
      options,
      this.#options.shadow,
      this.#options.gate,
    );
  }

  newDeleter(spec: VolumeSpec): Deleter {
    const path = spec.persistentVolume?.spec?.hostPath?.path;
    if (path === undefined) throw new Error("spec.persistentVolume.spec.hostPath is not set");
    return new HostPathDeleter(this.#baseDir, path, this.#options.shadow, this.#options.gate);
  }

  async recycle(
    pvName: string,
    spec: VolumeSpec,
    recorder: RecycleEventRecorder,
    signal?: AbortSignal,
  ): Promise<void> {
    const pv = spec.persistentVolume;
    const path = pv?.spec?.hostPath?.path;
    if (!pv || path === undefined) throw new Error("spec.persistentVolume.spec.hostPath is not set");
    await this.#recycler.recycle(pvName, pv, { hostPath: { path } }, recorder, signal);
  }
}
