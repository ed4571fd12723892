import type { V1Pod } from "@kubernetes/client-node";
import { CSIPlugin, type CSIPluginOptions } from "./csi/plugin.js";
import { FCPlugin } from "./fc/plugin.js";
import { HostPathPlugin } from "./hostpath/plugin.js";
import { ISCSIPlugin } from "./iscsi/plugin.js";
import {
  NFS_RECYCLER_INCREMENT_TIMEOUT_SECONDS,
  NFS_RECYCLER_MINIMUM_TIMEOUT_SECONDS,
  NFSPlugin,
} from "./nfs/plugin.js";
import { isAttachable, isDeletable, isProvisionable, isRecyclable, type VolumePlugin } from "./plugin.js";
import type { RecyclerPodApi } from "./recycler.js";
import type { SideEffectGate } from "../runtime/write-gate.js";

export interface DefaultPluginsOptions {
  /** --enable-hostpath-provisioner. */
  enableHostPathProvisioner: boolean;
  /** Shadow mode (src/shadow): plugins touch no storage (hostPath directories are neither made nor removed). */
  shadow?: boolean;
  /** A leader's write gate, which the plugins' side effects outside the API pass (hostPath directories). */
  gate?: SideEffectGate | undefined;
  /** The API recycler pods run through (the controller's CoreV1Api). */
  pods: RecyclerPodApi;
  /** --pv-recycler-minimum-timeout-hostpath, seconds (default 60). */
  recyclerMinimumTimeoutHostPath?: number;
  /** --pv-recycler-timeout-increment-hostpath, seconds per Gi (default 30). */
  recyclerTimeoutIncrementHostPath?: number;
  /** The pod read from --pv-recycler-pod-template-filepath-hostpath. */
  recyclerPodTemplateHostPath?: V1Pod;
  /** --pv-recycler-minimum-timeout-nfs, seconds (default 300). */
  recyclerMinimumTimeoutNFS?: number;
  /** --pv-recycler-increment-timeout-nfs, seconds per Gi (default 30). */
  recyclerIncrementTimeoutNFS?: number;
  /** The pod read from --pv-recycler-pod-template-filepath-nfs. */
  recyclerPodTemplateNFS?: V1Pod;
  /** How often recycler pods are polled (default 1 s). */
  recyclerPollIntervalMs?: number;
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
      ...(options.shadow && { shadow: true }),
      gate: options.gate,
      pods: options.pods,
      recyclerMinimumTimeoutSeconds: options.recyclerMinimumTimeoutHostPath,
      recyclerTimeoutIncrementSeconds: options.recyclerTimeoutIncrementHostPath,
      recyclerPodTemplate: options.recyclerPodTemplateHostPath,
      recyclerPollIntervalMs: options.recyclerPollIntervalMs,
    }),
    new NFSPlugin({
      pods: options.pods,
      minimumTimeoutSeconds: options.recyclerMinimumTimeoutNFS ?? NFS_RECYCLER_MINIMUM_TIMEOUT_SECONDS,
      timeoutIncrementSeconds: options.recyclerIncrementTimeoutNFS ?? NFS_RECYCLER_INCREMENT_TIMEOUT_SECONDS,
      podTemplate: options.recyclerPodTemplateNFS,
      pollIntervalMs: options.recyclerPollIntervalMs,
    }),
    new FCPlugin(),
    new ISCSIPlugin(),
    ...(options.csi ? [new CSIPlugin(options.csi)] : []),
  ];
}

/** The PV binder's plugins (upstream ProbeProvisionableRecyclableVolumePlugins). */
export function provisionableRecyclablePlugins(options: DefaultPluginsOptions): VolumePlugin[] {
  return defaultPlugins(options).filter((p) => isProvisionable(p) || isDeletable(p) || isRecyclable(p));
}

/** The attach/detach controller's plugins (upstream ProbeAttachableVolumePlugins). */
export function attachablePlugins(options: DefaultPluginsOptions): VolumePlugin[] {
  return defaultPlugins(options).filter(isAttachable);
}
