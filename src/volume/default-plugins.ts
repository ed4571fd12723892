import type { V1Pod } from "@kubernetes/client-node";
import { CSIPlugin, type CSIPluginOptions } from "./csi/plugin.js";
import { HostPathPlugin } from "./hostpath/plugin.js";
import type { VolumePlugin } from "./plugin.js";
import type { RecyclerPodApi } from "./recycler.js";

export interface DefaultPluginsOptions {
  /** --enable-hostpath-provisioner. */
  enableHostPathProvisioner: boolean;
  /** The API recycler pods run through (the controller's CoreV1Api). */
  pods: RecyclerPodApi;
  /** --pv-recycler-minimum-timeout-hostpath, seconds (default 60). */
  recyclerMinimumTimeoutHostPath?: number;
  /** --pv-recycler-timeout-increment-hostpath, seconds per Gi (default 30). */
  recyclerTimeoutIncrementHostPath?: number;
  /** The pod read from --pv-recycler-pod-template-filepath-hostpath. */
  recyclerPodTemplateHostPath?: V1Pod;
  /**
   * What the CSI plugin needs; without it the plugin is left out, as for the binder (upstream filters
   * it from the binder's plugins too: it neither provisions, deletes nor recycles).
   */
  csi?: CSIPluginOptions;
}

/** The plugins built into this controller, as kube-controller-manager's probeControllerVolumePlugins. */
export function defaultPlugins(options: DefaultPluginsOptions): VolumePlugin[] {
  return [
    new HostPathPlugin({
      provisioningEnabled: options.enableHostPathProvisioner,
      pods: options.pods,
      recyclerMinimumTimeoutSeconds: options.recyclerMinimumTimeoutHostPath,
      recyclerTimeoutIncrementSeconds: options.recyclerTimeoutIncrementHostPath,
      recyclerPodTemplate: options.recyclerPodTemplateHostPath,
    }),
    ...(options.csi ? [new CSIPlugin(options.csi)] : []),
  ];
}
