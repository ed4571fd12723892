import type { V1Pod } from "@kubernetes/client-node";
import {
  specName,
  uniqueVolumeName,
  type AttachableVolumePlugin,
  type VolumeSpec,
} from "../../volume/plugin.js";
import type { VolumePluginManager } from "../../volume/plugin-manager.js";
import { CountedChanges } from "./counted-changes.js";

/** What the attach/detach caches need from the plugin manager. */
export type AttachablePluginFinder = Pick<
  VolumePluginManager,
  "findAttachablePluginBySpec" | "attachablePluginFor"
>;

/**
 * The attachable plugin for `spec` and the controller's key for the volume, e.g.
 * "kubernetes.io/csi/ebs.csi.aws.com^vol-1" (upstream FindAttachablePluginBySpec then
 * GetUniqueVolumeNameFromSpec). Throws when no plugin attaches the spec or it yields no name.
 */
export function resolveAttachableVolume(
  plugins: AttachablePluginFinder,
  spec: VolumeSpec,
): { plugin: AttachableVolumePlugin; volumeName: string } {
  let plugin: AttachableVolumePlugin | undefined;
  try {
    plugin = plugins.findAttachablePluginBySpec(spec);
    if (!plugin) throw new Error("plugin do not support attachment");
  } catch (err) {
    throw new Error(
      `failed to get AttachablePlugin from volumeSpec for volume "${specName(spec)}" err=${message(err)}`,
      { cause: err },
    );
  }
  let name: string;
  try {
    name = plugin.getVolumeName(spec);
    if (name === "") throw new Error("empty volume name");
  } catch (err) {
    throw new Error(
      `failed to get UniqueVolumeName from volumeSpec for plugin="${plugin.name}" and volume="${specName(spec)}" err=${message(err)}`,
      { cause: err },
    );
  }
  return { plugin, volumeName: uniqueVolumeName(plugin.name, name) };
}

function message(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/** A volume that should be attached to a node (upstream VolumeToAttach). */
export interface VolumeToAttach {
  readonly volumeName: string;
  readonly volumeSpec: VolumeSpec;
  readonly nodeName: string;
  /** The pods on the node that use the volume: where attach events go. */
  readonly scheduledPods: readonly V1Pod[];
  /** Set by setMultiAttachError so the Multi-Attach event is emitted once. */
  readonly multiAttachErrorReported: boolean;
}

/** A pod known to the DSW, with one of its (volume, node) entries (upstream PodToAdd). */
export interface PodToAdd {
  readonly pod: V1Pod;
  readonly volumeName: string;
  readonly nodeName: string;
}

interface VolumeEntry {
  readonly spec: VolumeSpec;
  multiAttachErrorReported: boolean;
  /** By pod UID (upstream UniquePodName). */
  readonly scheduledPods: Map<string, V1Pod>;
}

/**
 * Which volumes should be attached to which nodes, and the pods that need them (upstream
 * attachdetach/cache DesiredStateOfWorld): managed node → unique volume name → scheduled pods. Only
 * nodes added with addNode (those whose kubelet lets the controller attach) are managed. Lookups by
 * names the DSW does not hold are no-ops, as the informer handlers race with each other.
 */
export class DesiredStateOfWorld extends CountedChanges {
  readonly #nodes = new Map<string, Map<string, VolumeEntry>>();
  readonly #plugins: AttachablePluginFinder;

  constructor(plugins: AttachablePluginFinder) {
    super();
    this.#plugins = plugins;
  }

  /** Starts managing the node; a no-op when already managed. */
  addNode(nodeName: string): void {
    if (this.#nodes.has(nodeName)) return;
    this.#nodes.set(nodeName, new Map());
    this.changed();
  }

  /**
   * Records that the pod on the node uses the volume, adding the volume if new, and returns its unique
   * name. Re-adding a pod keeps the first pod object and spec. Throws when the node is not managed or
   * no plugin attaches the spec.
   */
  addPod(podUID: string, pod: V1Pod, volumeSpec: VolumeSpec, nodeName: string): string {
    const volumes = this.#nodes.get(nodeName);
    if (!volumes) throw new Error(`no node with the name "${nodeName}" exists in the list of managed nodes`);
    const { volumeName } = resolveAttachableVolume(this.#plugins, volumeSpec);
    let volume = volumes.get(volumeName);
    if (!volume) {
      volume = { spec: volumeSpec, multiAttachErrorReported: false, scheduledPods: new Map() };
      volumes.set(volumeName, volume);
      this.changed();
    }
    if (!volume.scheduledPods.has(podUID)) {
      volume.scheduledPods.set(podUID, pod);
      this.changed();
    }
    return volumeName;
  }

  /**
   * Stops managing the node; a no-op when not managed. Throws, keeping the node, while volumes remain
   * to be attached to it: its pods must be removed first.
   */
  deleteNode(nodeName: string): void {
    const volumes = this.#nodes.get(nodeName);
    if (!volumes) return;
    if (volumes.size > 0) {
      throw new Error(
        `failed to delete node "${nodeName}" from list of nodes managed by attach/detach controller--the node still contains ${volumes.size} volumes in its list of volumes to attach`,
      );
    }
    this.#nodes.delete(nodeName);
    this.changed();
  }

  /** Removes the pod from the volume on the node, and the volume with its last pod. */
  deletePod(podUID: string, volumeName: string, nodeName: string): void {
    const volumes = this.#nodes.get(nodeName);
    const volume = volumes?.get(volumeName);
    if (!volume?.scheduledPods.delete(podUID)) return;
    if (volume.scheduledPods.size === 0) volumes?.delete(volumeName);
    this.changed();
  }

  nodeExists(nodeName: string): boolean {
    return this.#nodes.has(nodeName);
  }

  /** Whether the volume should be attached to the node. */
  volumeExists(volumeName: string, nodeName: string): boolean {
    return this.#nodes.get(nodeName)?.has(volumeName) ?? false;
  }

  /** Marks the Multi-Attach error reported for the volume on the node, so it is reported once. */
  setMultiAttachError(volumeName: string, nodeName: string): void {
    const volume = this.#nodes.get(nodeName)?.get(volumeName);
    if (!volume || volume.multiAttachErrorReported) return;
    volume.multiAttachErrorReported = true;
    this.changed();
  }

  /** Every (volume, node) that should be attached: the reconciler's attach pass. */
  getVolumesToAttach(): VolumeToAttach[] {
    const result: VolumeToAttach[] = [];
    for (const [nodeName, volumes] of this.#nodes) {
      for (const [volumeName, volume] of volumes) {
        result.push({
          volumeName,
          volumeSpec: volume.spec,
          nodeName,
          scheduledPods: [...volume.scheduledPods.values()],
          multiAttachErrorReported: volume.multiAttachErrorReported,
        });
      }
    }
    return result;
  }

  /**
   * Every pod in the DSW by UID (upstream UniquePodName), for the populator to find pods gone from the informer.
   * As upstream, a pod using several volumes appears once, with the last of its volumes.
   */
  getPodToAdd(): Map<string, PodToAdd> {
    const pods = new Map<string, PodToAdd>();
    for (const [nodeName, volumes] of this.#nodes) {
      for (const [volumeName, volume] of volumes) {
        for (const [podUID, pod] of volume.scheduledPods) pods.set(podUID, { pod, volumeName, nodeName });
      }
    }
    return pods;
  }

  /** The pods on the given nodes that need the volume: named in the Multi-Attach event. */
  getVolumePodsOnNodes(nodeNames: readonly string[], volumeName: string): V1Pod[] {
    const pods: V1Pod[] = [];
    for (const nodeName of nodeNames) {
      const volume = this.#nodes.get(nodeName)?.get(volumeName);
      if (volume) pods.push(...volume.scheduledPods.values());
    }
    return pods;
  }
}
