import type { V1PersistentVolume, V1Pod } from "@kubernetes/client-node";
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
import {
  newRecyclerPodTemplate,
  RECYCLER_START_GRACE_MS,
  recycleVolumeByWatchingPodUntilCompletion,
  recyclerTimeoutSeconds,
  validateRecyclerPodTemplate,
  type RecyclerPodApi,
} from "../recycler.js";
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
  readonly #template: V1Pod;

  constructor(options: HostPathPluginOptions) {
    this.#options = options;
    this.#baseDir = options.baseDir ?? HOST_PATH_BASE_DIR;
    this.#template = options.recyclerPodTemplate ?? newRecyclerPodTemplate();
    validateRecyclerPodTemplate(this.#template);
  }

  canSupport(spec: VolumeSpec): boolean {
    return hostPathOf(spec) !== undefined;
  }

  newProvisioner(options: ProvisionOptions): Provisioner {
    if (!this.#options.provisioningEnabled) {
      throw new Error(`provisioning in volume plugin "${this.name}" is disabled`);
    }
    return new HostPathProvisioner(this.name, this.#baseDir, options);
  }

  newDeleter(spec: VolumeSpec): Deleter {
    const path = spec.persistentVolume?.spec?.hostPath?.path;
    if (path === undefined) throw new Error("spec.persistentVolume.spec.hostPath is not set");
    return new HostPathDeleter(this.#baseDir, path);
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
    const pod = this.#recyclerPod(pv, path);
    const timeoutMs = (pod.spec?.activeDeadlineSeconds ?? 0) * 1000 + RECYCLER_START_GRACE_MS;
    await recycleVolumeByWatchingPodUntilCompletion(pvName, pod, this.#options.pods, recorder, {
      timeoutMs,
      intervalMs: this.#options.recyclerPollIntervalMs,
      ...(signal && { signal }),
    });
  }

  /** The template with the PV's directory as its first volume and a deadline sized to the PV. */
  #recyclerPod(pv: V1PersistentVolume, path: string): V1Pod {
    const pod = structuredClone(this.#template);
    const spec = pod.spec ?? { containers: [] };
    const [first, ...rest] = spec.volumes ?? [];
    spec.volumes = [{ name: first?.name ?? "vol", hostPath: { path } }, ...rest];
    spec.activeDeadlineSeconds = recyclerTimeoutSeconds(
      this.#options.recyclerMinimumTimeoutSeconds ?? 60,
      this.#options.recyclerTimeoutIncrementSeconds ?? 30,
      pv,
    );
    pod.spec = spec;
    return pod;
  }
}
