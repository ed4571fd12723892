import type { V1AttachedVolume } from "@kubernetes/client-node";
import type { Clock } from "../../runtime/clock.js";
import { silentLogger, type LogSink } from "../../runtime/logger.js";
import type { VolumeSpec } from "../../volume/plugin.js";
import { resolveAttachableVolume, type AttachablePluginFinder } from "./desired-state-of-world.js";
import { CountedChanges } from "./counted-changes.js";

/**
 * Attached: the storage confirmed the attachment. Uncertain: an attach or detach failed or is only
 * known from a VolumeAttachment, so the volume may be attached; it is detached like an attached one
 * but not reported in node status. Detached: the ASW has no entry.
 */
export type AttachState = "Attached" | "Uncertain" | "Detached";

/** A (volume, node) pair the controller believes is, or may be, attached (upstream AttachedVolume). */
export interface AttachedVolume {
  readonly volumeName: string;
  /** Undefined for volumes known only from node status at startup; detach then goes by name. */
  readonly volumeSpec: VolumeSpec | undefined;
  readonly nodeName: string;
  /** Per volume, not per node, as upstream: the last attach's device path (CSI: ""). */
  readonly devicePath: string;
  /**
   * Whether the node reports the volume in use (status.volumesInUse), so detaching is unsafe.
   * True from the moment the pair is added until the node says otherwise.
   */
  readonly mountedByNode: boolean;
  /** Clock time the reconciler first wanted to detach, for the max-wait-for-unmount timeout. */
  readonly detachRequestedTime: number | undefined;
}

/** A node whose status.volumesAttached the controller maintains (upstream nodeToUpdateStatusFor). */
export interface NodeToUpdateStatusFor {
  readonly nodeName: string;
  /** The report changed since the node status updater last read it. */
  readonly statusUpdateNeeded: boolean;
  /** Attached volumes minus those about to be detached: kubelet mounts only what is listed. */
  readonly volumesToReportAsAttached: ReadonlySet<string>;
}

interface VolumeEntry {
  spec: VolumeSpec | undefined;
  devicePath: string;
  readonly nodes: Map<string, { attachedConfirmed: boolean; detachRequestedTime: number | undefined }>;
}

interface ReportEntry {
  statusUpdateNeeded: boolean;
  readonly volumes: Set<string>;
}

/**
 * Which volumes are or may be attached to which nodes (upstream attachdetach/cache
 * ActualStateOfWorld), with the per-node lists written to node status. A volume is reported attached
 * only once confirmed and is removed from the report before it is detached, so the kubelet never
 * starts mounting a volume on its way out.
 */
export class ActualStateOfWorld extends CountedChanges {
  readonly #volumes = new Map<string, VolumeEntry>();
  readonly #reports = new Map<string, ReportEntry>();
  /** Per node, the volumes it reports in use; an added pair counts as in use until the node says otherwise. */
  readonly #inUse = new Map<string, Set<string>>();
  readonly #plugins: AttachablePluginFinder;
  readonly #clock: Clock;
  readonly #log: LogSink;

  constructor(plugins: AttachablePluginFinder, clock: Clock, log: LogSink = silentLogger) {
    super();
    this.#plugins = plugins;
    this.#clock = clock;
    this.#log = log;
  }

  /** Records a successful attach: Attached, and reported in node status. Returns the unique name. */
  markVolumeAsAttached(
    volumeName: string | undefined,
    volumeSpec: VolumeSpec | undefined,
    nodeName: string,
    devicePath: string,
  ): string {
    return this.addVolumeNode(volumeName, volumeSpec, nodeName, devicePath, true);
  }

  /**
   * Records that the volume may be attached (failed attach or detach): Uncertain, so the reconciler
   * detaches it if unwanted and attaches it again if wanted. Clears the device path, as upstream.
   */
  markVolumeAsUncertain(
    volumeName: string | undefined,
    volumeSpec: VolumeSpec | undefined,
    nodeName: string,
  ): string {
    return this.addVolumeNode(volumeName, volumeSpec, nodeName, "", false);
  }

  /** Records a successful detach (or a verify that found it gone): the pair is forgotten. */
  markVolumeAsDetached(volumeName: string, nodeName: string): void {
    this.deleteVolumeNode(volumeName, nodeName);
  }

  /**
   * Adds or updates the (volume, node) pair and returns the unique volume name, resolved from the spec
   * through the plugins when `uniqueName` is empty. The volume's spec and device path are overwritten;
   * a new pair starts mounted and without a detach request; `attached` sets it confirmed or uncertain,
   * and a confirmed one is (re)added to the node's report. Throws when the name cannot be resolved.
   */
  addVolumeNode(
    uniqueName: string | undefined,
    volumeSpec: VolumeSpec | undefined,
    nodeName: string,
    devicePath: string,
    attached: boolean,
  ): string {
    let volumeName = uniqueName ?? "";
    if (volumeName === "") {
      if (!volumeSpec) throw new Error("volumeSpec cannot be nil if volumeName is empty");
      volumeName = resolveAttachableVolume(this.#plugins, volumeSpec).volumeName;
    }
    this.changed();
    let volume = this.#volumes.get(volumeName);
    if (volume) {
      volume.spec = volumeSpec;
      volume.devicePath = devicePath;
    } else {
      volume = { spec: volumeSpec, devicePath, nodes: new Map() };
      this.#volumes.set(volumeName, volume);
    }
    const node = volume.nodes.get(nodeName);
    if (node) {
      node.attachedConfirmed = attached;
    } else {
      volume.nodes.set(nodeName, { attachedConfirmed: attached, detachRequestedTime: undefined });
      // Assume mounted until the node's volumesInUse says otherwise: detaching a mounted volume loses data.
      this.#inUseOn(nodeName).add(volumeName);
    }
    if (attached) this.#addToReport(volumeName, nodeName);
    return volumeName;
  }

  /** Forgets the pair (and the volume with its last node) and drops it from the node's report. */
  deleteVolumeNode(volumeName: string, nodeName: string): void {
    const volume = this.#volumes.get(volumeName);
    if (!volume) return;
    if (volume.nodes.delete(nodeName)) this.changed();
    if (volume.nodes.size === 0) this.#volumes.delete(volumeName);
    this.#removeFromReport(volumeName, nodeName);
  }

  /**
   * Replaces the set of volumes the node reports in use (node.status.volumesInUse). It may name volumes
   * not (yet) attached; they count as mounted once attached.
   */
  setVolumesMountedByNode(volumeNames: readonly string[] | undefined, nodeName: string): void {
    const volumes = new Set(volumeNames);
    const before = this.#inUse.get(nodeName);
    this.#inUse.set(nodeName, volumes);
    // Node updates come often (heartbeats, conditions) and seldom change what is in use.
    if (before?.size !== volumes.size || [...volumes].some((v) => !before.has(v))) this.changed();
  }

  getAttachState(volumeName: string, nodeName: string): AttachState {
    const node = this.#volumes.get(volumeName)?.nodes.get(nodeName);
    if (!node) return "Detached";
    return node.attachedConfirmed ? "Attached" : "Uncertain";
  }

  /**
   * Starts the detach clock for the pair if not started and returns the milliseconds since it
   * started. Throws when the pair is not in the ASW.
   */
  setDetachRequestTime(volumeName: string, nodeName: string): number {
    const node = this.#volumes.get(volumeName)?.nodes.get(nodeName);
    if (!node) {
      throw new Error(
        `failed to set detach request time with error: ${notAttached(volumeName, nodeName).message}`,
      );
    }
    if (node.detachRequestedTime === undefined) {
      node.detachRequestedTime = this.#clock.now();
      this.changed();
    }
    return this.#clock.now() - node.detachRequestedTime;
  }

  /** Stops the detach clock: the volume is wanted on the node again. */
  resetDetachRequestTime(volumeName: string, nodeName: string): void {
    const node = this.#volumes.get(volumeName)?.nodes.get(nodeName);
    if (!node) {
      this.#log.error(
        { err: notAttached(volumeName, nodeName) },
        "Failed to ResetDetachRequestTime with error",
      );
      return;
    }
    if (node.detachRequestedTime === undefined) return;
    node.detachRequestedTime = undefined;
    this.changed();
  }

  /**
   * Takes the volume out of the node's report before a detach, flagging the node for a status update.
   * Throws when it was not reported.
   */
  removeVolumeFromReportAsAttached(volumeName: string, nodeName: string): void {
    if (!this.#removeFromReport(volumeName, nodeName)) {
      throw new Error(
        `volume "${volumeName}" does not exist in volumesToReportAsAttached list or node "${nodeName}" does not exist in nodesToUpdateStatusFor list`,
      );
    }
  }

  /** Puts the volume back in the node's report after a detach did not happen; ignored once it is gone. */
  addVolumeToReportAsAttached(volumeName: string, nodeName: string): void {
    this.#addToReport(volumeName, nodeName);
  }

  /** Flags the node's status for another write, e.g. after a failed patch or a node re-created. */
  setNodeStatusUpdateNeeded(nodeName: string): void {
    const report = this.#reports.get(nodeName);
    if (!report) {
      this.#log.info(
        { nodeName },
        `Failed to set statusUpdateNeeded to needed true, because nodeName="${nodeName}" does not exist`,
      );
      return;
    }
    if (report.statusUpdateNeeded) return;
    report.statusUpdateNeeded = true;
    this.changed();
  }

  /** Whether some node's report waits to be written to its status. */
  nodeStatusUpdateNeeded(): boolean {
    for (const report of this.#reports.values()) if (report.statusUpdateNeeded) return true;
    return false;
  }

  /** Every pair, Attached or Uncertain: the reconciler's detach pass. */
  getAttachedVolumes(): AttachedVolume[] {
    const result: AttachedVolume[] = [];
    for (const [volumeName, volume] of this.#volumes) {
      for (const [nodeName, node] of volume.nodes) {
        result.push(this.#attachedVolume(volumeName, volume, nodeName, node.detachRequestedTime));
      }
    }
    return result;
  }

  /** Every pair on the node, Attached or Uncertain. */
  getAttachedVolumesForNode(nodeName: string): AttachedVolume[] {
    const result: AttachedVolume[] = [];
    for (const [volumeName, volume] of this.#volumes) {
      const node = volume.nodes.get(nodeName);
      if (node) result.push(this.#attachedVolume(volumeName, volume, nodeName, node.detachRequestedTime));
    }
    return result;
  }

  /** Confirmed attachments by node, for the periodic VolumesAreAttached sync. */
  getAttachedVolumesPerNode(): Map<string, AttachedVolume[]> {
    const result = new Map<string, AttachedVolume[]>();
    for (const [volumeName, volume] of this.#volumes) {
      for (const [nodeName, node] of volume.nodes) {
        if (!node.attachedConfirmed) continue;
        const list = result.get(nodeName) ?? [];
        list.push(this.#attachedVolume(volumeName, volume, nodeName, node.detachRequestedTime));
        result.set(nodeName, list);
      }
    }
    return result;
  }

  /**
   * The nodes other than `nodeName` that hold the volume, for the multi-attach check of an attach to
   * `nodeName` (upstream GetNodesForAttachedVolume). Stricter than upstream, which counts only
   * confirmed attachments: an Uncertain one (a detach or an attach that failed, so the storage may
   * still have it attached) counts too, or a detach that failed once would let the volume attach to a
   * second node (kubernetes#124334). Not while `nodeName` holds an Uncertain attachment itself:
   * attaching there again adds no node, and two nodes holding Uncertain ones (left by a controller
   * that allowed it) would otherwise wait for each other.
   */
  getNodesForAttachedVolume(volumeName: string, nodeName: string): string[] {
    const volume = this.#volumes.get(volumeName);
    if (!volume) return [];
    const uncertainHere = volume.nodes.get(nodeName)?.attachedConfirmed === false;
    return [...volume.nodes]
      .filter(([other, node]) => other !== nodeName && (node.attachedConfirmed || !uncertainHere))
      .map(([other]) => other);
  }

  /**
   * status.volumesAttached for every node whose report changed, clearing the flags: the node status
   * updater writes them next and calls setNodeStatusUpdateNeeded for any write that fails.
   */
  getVolumesToReportAttached(): Map<string, V1AttachedVolume[]> {
    const result = new Map<string, V1AttachedVolume[]>();
    for (const [nodeName, report] of this.#reports) {
      if (report.statusUpdateNeeded) result.set(nodeName, this.#attachedVolumesOf(report));
      report.statusUpdateNeeded = false;
    }
    return result;
  }

  /** As getVolumesToReportAttached for one node; undefined when its report has not changed. */
  getVolumesToReportAttachedForNode(nodeName: string): V1AttachedVolume[] | undefined {
    const report = this.#reports.get(nodeName);
    if (!report?.statusUpdateNeeded) return undefined;
    report.statusUpdateNeeded = false;
    return this.#attachedVolumesOf(report);
  }

  /** A snapshot of every node's report and flag. */
  getNodesToUpdateStatusFor(): Map<string, NodeToUpdateStatusFor> {
    const result = new Map<string, NodeToUpdateStatusFor>();
    for (const [nodeName, report] of this.#reports) {
      result.set(nodeName, {
        nodeName,
        statusUpdateNeeded: report.statusUpdateNeeded,
        volumesToReportAsAttached: new Set(report.volumes),
      });
    }
    return result;
  }

  #inUseOn(nodeName: string): Set<string> {
    let volumes = this.#inUse.get(nodeName);
    if (!volumes) {
      volumes = new Set();
      this.#inUse.set(nodeName, volumes);
    }
    return volumes;
  }

  #attachedVolume(
    volumeName: string,
    volume: VolumeEntry,
    nodeName: string,
    detachRequestedTime: number | undefined,
  ): AttachedVolume {
    return {
      volumeName,
      volumeSpec: volume.spec,
      nodeName,
      devicePath: volume.devicePath,
      mountedByNode: this.#inUse.get(nodeName)?.has(volumeName) ?? false,
      detachRequestedTime,
    };
  }

  #attachedVolumesOf(report: ReportEntry): V1AttachedVolume[] {
    return [...report.volumes].map((name) => ({
      name,
      devicePath: this.#volumes.get(name)?.devicePath ?? "",
    }));
  }

  /** Reports the pair unless it left the ASW meanwhile (a detach finished first). */
  #addToReport(volumeName: string, nodeName: string): void {
    if (!this.#volumes.get(volumeName)?.nodes.has(nodeName)) return;
    let report = this.#reports.get(nodeName);
    if (!report) {
      report = { statusUpdateNeeded: true, volumes: new Set() };
      this.#reports.set(nodeName, report);
    }
    if (report.volumes.has(volumeName)) return;
    report.volumes.add(volumeName);
    report.statusUpdateNeeded = true;
    this.changed();
  }

  #removeFromReport(volumeName: string, nodeName: string): boolean {
    const report = this.#reports.get(nodeName);
    if (!report?.volumes.delete(volumeName)) return false;
    report.statusUpdateNeeded = true;
    this.changed();
    return true;
  }
}

function notAttached(volumeName: string, nodeName: string): Error {
  return new Error(`volume ${volumeName} is no longer attached to the node "${nodeName}"`);
}
