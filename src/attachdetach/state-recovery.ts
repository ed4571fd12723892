import type { V1Node, V1Pod, V1VolumeAttachment } from "@kubernetes/client-node";
import { isPodTerminated } from "../volume/util/pod.js";
import { isMigratable, translateInTreeSpecToCSI } from "../volume/csimigration/plugin-manager.js";
import { specFromPersistentVolume } from "../volume/plugin.js";
import type { ActualStateOfWorld } from "./cache/actual-state-of-world.js";
import { resolveAttachableVolume } from "./cache/desired-state-of-world.js";
import {
  CONTROLLER_MANAGED_ATTACH_ANNOTATION,
  createVolumeSpec,
  processPodVolumes,
  type PodVolumesContext,
} from "./util.js";

/*
 * What a starting controller knows before its first reconcile (upstream attachDetachController.Run):
 * the actual state is rebuilt from what the cluster records, so a restart (or a new leader) neither
 * detaches a volume a pod still uses nor loses track of one that is attached.
 */

/** The states being rebuilt and what rebuilding them reads. */
export interface StateRecoveryContext extends PodVolumesContext {
  asw: ActualStateOfWorld;
}

/**
 * Every node's status.volumesAttached becomes Attached in the ASW (spec unknown for now) and every
 * VolumeAttachment the nodes do not list becomes Uncertain; then each node's volumesInUse says which are
 * mounted, and managed nodes join the DSW (upstream populateActualStateOfWorld). Unlike upstream, the
 * mounted flags are applied after the VolumeAttachments: upstream leaves those pairs "mounted" until
 * the node's next status update, so a dangling attachment waited for an unrelated kubelet write.
 */
export function populateActualStateOfWorld(
  nodes: readonly V1Node[],
  vas: readonly V1VolumeAttachment[],
  ctx: StateRecoveryContext,
): void {
  const { asw, dsw, log } = ctx;
  for (const node of nodes) {
    const nodeName = node.metadata?.name ?? "";
    for (const attached of node.status?.volumesAttached ?? []) {
      try {
        asw.markVolumeAsAttached(attached.name, undefined, nodeName, attached.devicePath);
      } catch (err) {
        log.error(
          { node: nodeName, volumeName: attached.name, err },
          "Failed to mark the volume as attached",
        );
      }
    }
  }
  processVolumeAttachments(vas, ctx);
  for (const node of nodes) {
    const nodeName = node.metadata?.name ?? "";
    asw.setVolumesMountedByNode(node.status?.volumesInUse, nodeName);
    if (node.metadata?.annotations?.[CONTROLLER_MANAGED_ATTACH_ANNOTATION] !== undefined)
      dsw.addNode(nodeName);
  }
}

/**
 * A VolumeAttachment whose pair the nodes do not report (the controller stopped between creating it
 * and writing node status) becomes Uncertain: attached again if a pod wants it, detached if none does
 * (upstream processVolumeAttachments). Call after the nodes' attachments are in the ASW.
 */
function processVolumeAttachments(
  vas: readonly V1VolumeAttachment[],
  { lookups, plugins, asw, log }: StateRecoveryContext,
): void {
  for (const va of vas) {
    const nodeName = va.spec.nodeName;
    const pvName = va.spec.source.persistentVolumeName;
    const ref = { node: nodeName, va: va.metadata?.name ?? "" };
    if (pvName === undefined) {
      log.info(ref, "Skipping the va as its pvName is nil");
      continue;
    }
    const pv = lookups.getVolume(pvName);
    if (!pv) {
      log.error({ ...ref, pv: pvName }, "Unable to lookup pv object");
      continue;
    }
    let spec = specFromPersistentVolume(pv, false);
    // A migrated in-tree PV is its CSI driver's (the pod namespace only matters to inline azureFile).
    if (isMigratable(spec)) {
      try {
        spec = translateInTreeSpecToCSI(spec, "");
      } catch (err) {
        log.error(
          { ...ref, pv: pvName, err },
          "Failed to translate intree volumeSpec to CSI volumeSpec for volume",
        );
        continue;
      }
    }
    let volumeName: string;
    try {
      if (!plugins.findAttachablePluginBySpec(spec)) throw new Error("plugin is not attachable");
      volumeName = resolveAttachableVolume(plugins, spec).volumeName;
    } catch (err) {
      log.info(
        { ...ref, pv: pvName, err },
        "Skipping processing the volume on node, no attacher interface found",
      );
      continue;
    }
    if (asw.getAttachState(volumeName, nodeName) === "Detached") {
      log.info({ ...ref, volumeName }, "Marking volume attachment as uncertain as volume is not attached");
      asw.markVolumeAsUncertain(volumeName, spec, nodeName);
    }
  }
}

/**
 * Adds every scheduled, active pod to the DSW and gives the attachments known only by name (from node
 * status) their specs, keeping the device path the node reported (upstream populateDesiredStateOfWorld).
 */
export function populateDesiredStateOfWorld(
  pods: readonly V1Pod[],
  nodes: { get(nodeName: string): V1Node | undefined },
  ctx: StateRecoveryContext,
): void {
  const { asw, plugins, lookups, log } = ctx;
  for (const pod of pods) {
    const nodeName = pod.spec?.nodeName ?? "";
    if (nodeName === "") continue; // not scheduled
    processPodVolumes(pod, !isPodTerminated(pod), ctx);
    for (const podVolume of pod.spec?.volumes ?? []) {
      let volumeName: string;
      let spec;
      try {
        spec = createVolumeSpec(pod, podVolume, lookups);
        if (!plugins.attachablePluginFor(spec)) continue;
        volumeName = resolveAttachableVolume(plugins, spec).volumeName;
      } catch {
        continue; // logged by processPodVolumes
      }
      if (asw.getAttachState(volumeName, nodeName) !== "Attached") continue;
      const reported = nodes.get(nodeName)?.status?.volumesAttached?.find((v) => v.name === volumeName);
      if (!reported) {
        log.error({ node: nodeName, volumeName }, "Failed to find device path: volume not found on node");
        continue;
      }
      asw.markVolumeAsAttached(volumeName, spec, nodeName, reported.devicePath);
    }
  }
}
