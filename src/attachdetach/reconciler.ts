import type { V1Node } from "@kubernetes/client-node";
import { sleep, Wakeup, type Clock } from "../runtime/clock.js";
import { objectReference } from "../runtime/events/reference.js";
import type { LogSink } from "../runtime/logger.js";
import type { EventSink } from "../runtime/events/event-sink.js";
import type { ActualStateOfWorld } from "./cache/actual-state-of-world.js";
import type { DesiredStateOfWorld, VolumeToAttach } from "./cache/desired-state-of-world.js";
import { isMultiAttachAllowed, volumeMessage, type OperationExecutor } from "./operation-executor.js";

/** The taint that lets the controller detach at once from a node an administrator declared down. */
export const TAINT_NODE_OUT_OF_SERVICE = "node.kubernetes.io/out-of-service";

/** What the reconciler reads about a node; both answers are false for a node it cannot find. */
export interface NodeHealth {
  /** The node's Ready condition is True. */
  isReady(nodeName: string): boolean;
  /** The node carries the out-of-service taint, of any effect (upstream TaintKeyExists). */
  hasOutOfServiceTaint(nodeName: string): boolean;
}

/** NodeHealth over a node lister (an informer cache): `get` returns undefined for an unknown node. */
export function nodeHealthFrom(get: (nodeName: string) => V1Node | undefined): NodeHealth {
  return {
    isReady: (nodeName) =>
      get(nodeName)?.status?.conditions?.some((c) => c.type === "Ready" && c.status === "True") ?? false,
    hasOutOfServiceTaint: (nodeName) =>
      get(nodeName)?.spec?.taints?.some((t) => t.key === TAINT_NODE_OUT_OF_SERVICE) ?? false,
  };
}

/** Writes the ASW's reports to node status.volumesAttached (upstream statusupdater.NodeStatusUpdater). */
export interface NodeStatusUpdater {
  /** Writes the node's report now; rejects when the write failed. */
  updateNodeStatusForNode(nodeName: string): Promise<void>;
  /** Writes every report that changed; a failed write flags its node for the next pass. */
  updateNodeStatuses(): Promise<void>;
}

export type ForceDetachReason = "timeout" | "out-of-service";

/** attachdetach_controller_forced_detaches. */
export interface ReconcilerMetrics {
  forcedDetach(reason: ForceDetachReason): void;
}

export interface ReconcilerOptions {
  dsw: DesiredStateOfWorld;
  asw: ActualStateOfWorld;
  executor: Pick<
    OperationExecutor,
    | "isOperationPending"
    | "isOperationSafeToRetry"
    | "hasRunningOperations"
    | "attachVolume"
    | "prepareDetach"
    | "verifyVolumesAreAttached"
  >;
  nodeStatusUpdater: NodeStatusUpdater;
  nodes: NodeHealth;
  events: EventSink;
  clock: Clock;
  log: LogSink;
  metrics?: ReconcilerMetrics;
  /** Pause between passes; upstream 100 ms. */
  loopPeriodMs?: number;
  /** How long a still-mounted volume on an unhealthy node waits before a forced detach; upstream 6 min. */
  maxWaitForUnmountMs?: number;
  /** --attach-detach-reconcile-sync-period: how often attachments are verified with the plugins. */
  syncPeriodMs?: number;
  /** --disable-attach-detach-reconcile-sync. */
  disableReconciliationSync?: boolean;
  /** --disable-force-detach-on-timeout: only the out-of-service taint may force a detach. */
  disableForceDetachOnTimeout?: boolean;
}

/**
 * Whether the loop's tick runs a pass (issue 30 goal 2: idle cost). A pass that ended idle (nothing
 * to detach, attach, report or wait for: see Reconciler.#idle) recorded the caches' generation; until
 * they change or the sync period falls due, another pass would find the same and do nothing, so it is
 * skipped. Every timed behaviour (the max wait for unmount, the operations' backoff, the retried node
 * status write) belongs to a state that is not idle, where every tick passes, as upstream's.
 */
export function passDue(idleGeneration: number | undefined, generation: number, syncDue: boolean): boolean {
  return idleGeneration === undefined || generation !== idleGeneration || syncDue;
}

/**
 * Drives the actual state of the world toward the desired one (upstream attachdetach reconciler):
 * each pass detaches what is no longer wanted, then attaches what is, then writes node statuses; every
 * sync period it also verifies the attachments with the plugins. A volume the node still reports
 * mounted is not detached unless the node is unhealthy and the unmount wait expired, or the node is
 * tainted out-of-service: detaching a mounted volume loses data. Unlike upstream, a tick whose pass
 * would do nothing is skipped (passDue).
 */
export class Reconciler {
  readonly #o: ReconcilerOptions;
  readonly #loopPeriodMs: number;
  readonly #maxWaitForUnmountMs: number;
  readonly #syncPeriodMs: number;
  #lastSync: number;
  /** The caches' generation when the last pass ended idle; undefined when it did not. */
  #idleGeneration: number | undefined;
  /** Ends run()'s sleep through an idle stretch. */
  readonly #wakeup: Wakeup;

  constructor(options: ReconcilerOptions) {
    this.#o = options;
    this.#loopPeriodMs = options.loopPeriodMs ?? 100;
    this.#maxWaitForUnmountMs = options.maxWaitForUnmountMs ?? 6 * 60_000;
    this.#syncPeriodMs = options.syncPeriodMs ?? 60_000;
    this.#lastSync = options.clock.now();
    this.#wakeup = new Wakeup(options.clock);
    const wake = () => {
      this.#wakeup.wake();
    };
    options.dsw.onChange(wake);
    options.asw.onChange(wake);
  }

  /**
   * Ticks every loop period until `signal` aborts (upstream wait.Until). While idle it sleeps instead,
   * until a cache changes or the sync period falls due, and then ticks at once: a timer firing ten
   * times a second costs an idle process more than the passes it skips (issue 30 goal 2).
   */
  async run(signal: AbortSignal): Promise<void> {
    const { clock } = this.#o;
    try {
      for (;;) {
        signal.throwIfAborted();
        await this.tick();
        await sleep(clock, this.#loopPeriodMs, signal);
        if (!this.#due()) await this.#untilDue(signal);
      }
    } catch {
      // aborted
    }
  }

  /** The loop's step: a pass, unless the last one ended idle and nothing changed since (passDue). */
  async tick(): Promise<void> {
    if (this.#due()) await this.reconcile();
  }

  #due(): boolean {
    return passDue(this.#idleGeneration, this.#generation(), this.#syncDue());
  }

  /** Resolves when a cache changes or the sync period falls due; rejects when `signal` aborts. */
  #untilDue(signal: AbortSignal): Promise<void> {
    if (!this.#syncEnabled()) return this.#wakeup.until(signal);
    return this.#wakeup.until(signal, this.#lastSync + this.#syncPeriodMs + 1 - this.#o.clock.now());
  }

  /** One pass of the loop (upstream reconciliationLoopFunc). Operations it starts run on after it returns. */
  async reconcile(): Promise<void> {
    await this.#detachUndesiredVolumes();
    this.#attachDesiredVolumes();
    try {
      await this.#o.nodeStatusUpdater.updateNodeStatuses();
    } catch (err) {
      this.#o.log.info({ err }, "UpdateNodeStatuses failed");
    }
    if (this.#syncDue()) {
      this.#o.executor.verifyVolumesAreAttached(this.#o.asw.getAttachedVolumesPerNode());
      this.#lastSync = this.#o.clock.now();
    }
    this.#idleGeneration = this.#idle() ? this.#generation() : undefined;
  }

  #syncEnabled(): boolean {
    // As upstream, a sync period under a second turns the verification off.
    return !this.#o.disableReconciliationSync && this.#syncPeriodMs >= 1000;
  }

  #syncDue(): boolean {
    return this.#syncEnabled() && this.#o.clock.now() - this.#lastSync > this.#syncPeriodMs;
  }

  #generation(): number {
    return this.#o.dsw.generation + this.#o.asw.generation;
  }

  /**
   * Whether a pass now would do nothing: every attachment is confirmed, wanted and without a detach
   * clock running, every wanted volume is attached, no node status waits to be written and no
   * operation runs (its end changes the caches, or leaves a backoff that only a non-idle state reads).
   */
  #idle(): boolean {
    const { dsw, asw, executor } = this.#o;
    if (executor.hasRunningOperations() || asw.nodeStatusUpdateNeeded()) return false;
    for (const v of asw.getAttachedVolumes()) {
      if (v.detachRequestedTime !== undefined || !dsw.volumeExists(v.volumeName, v.nodeName)) return false;
    }
    return dsw.getVolumesToAttach().every((v) => asw.getAttachState(v.volumeName, v.nodeName) === "Attached");
  }

  async #detachUndesiredVolumes(): Promise<void> {
    const { dsw, asw, executor, nodes, log } = this.#o;
    for (const volume of asw.getAttachedVolumes()) {
      const { volumeName, nodeName } = volume;
      if (dsw.volumeExists(volumeName, nodeName)) continue;
      // Checked first: the other checks could pass while an operation finishes, detaching twice.
      const nodeKey = isMultiAttachAllowed(volume.volumeSpec) ? nodeName : "";
      if (!executor.isOperationSafeToRetry(volumeName, nodeKey, "volume_detach")) continue;
      // A detach that just finished removed it from the ASW after the snapshot above.
      if (asw.getAttachState(volumeName, nodeName) === "Detached") continue;

      let elapsedMs: number;
      try {
        elapsedMs = asw.setDetachRequestTime(volumeName, nodeName);
      } catch (err) {
        log.error({ err }, "Cannot trigger detach because it fails to set detach request time");
        continue;
      }
      const expired = elapsedMs > this.#maxWaitForUnmountMs;
      const forceTimeout = expired && !this.#o.disableForceDetachOnTimeout;
      // A healthy node is never force-detached: it may still be writing to the volume.
      const forceDetach = forceTimeout && !nodes.isReady(nodeName);
      const outOfService = nodes.hasOutOfServiceTaint(nodeName);
      if (volume.mountedByNode && !forceDetach && !outOfService) {
        log.debug({ volumeName, node: nodeName }, "Cannot detach volume because it is still mounted");
        continue;
      }

      // Resolved before the node status is touched (upstream after): a volume no plugin can detach
      // stays reported, its key backs off, and the node's status is not rewritten twice per pass.
      let startDetach: (verifySafeToDetach: boolean) => boolean;
      try {
        startDetach = executor.prepareDetach(volume);
      } catch (err) {
        log.error({ volumeName, node: nodeName, err }, "attacherDetacher.DetachVolume failed to start");
        continue;
      }

      // The node status must drop the volume before the detach, so the kubelet does not mount it again.
      try {
        asw.removeVolumeFromReportAsAttached(volumeName, nodeName);
      } catch (err) {
        log.debug({ volumeName, node: nodeName, err }, "RemoveVolumeFromReportAsAttached failed");
      }
      try {
        await this.#o.nodeStatusUpdater.updateNodeStatusForNode(nodeName);
      } catch (err) {
        log.error(
          { volumeName, node: nodeName, err },
          "UpdateNodeStatusForNode failed while attempting to report volume as attached",
        );
        asw.addVolumeToReportAsAttached(volumeName, nodeName);
        continue;
      }
      // Not in upstream: a pod may have claimed the volume again while the status was written. Only a
      // confirmed attachment goes back to volumesAttached: an Uncertain one (an attach that failed
      // meanwhile) must not tell the kubelet it may mount; the attach pass retries it.
      if (dsw.volumeExists(volumeName, nodeName)) {
        if (asw.getAttachState(volumeName, nodeName) === "Attached") {
          asw.addVolumeToReportAsAttached(volumeName, nodeName);
        }
        continue;
      }

      // Without verification the detach goes ahead even though the node may still use the volume.
      const verifySafeToDetach = !forceTimeout && !outOfService;
      const started = startDetach(verifySafeToDetach);
      if (!started) {
        asw.addVolumeToReportAsAttached(volumeName, nodeName);
        continue;
      }
      if (verifySafeToDetach) {
        log.info({ volumeName, node: nodeName }, "attacherDetacher.DetachVolume started");
      } else if (forceTimeout) {
        this.#o.metrics?.forcedDetach("timeout");
        log.info(
          { volumeName, node: nodeName, durationMs: this.#maxWaitForUnmountMs },
          "attacherDetacher.DetachVolume started: this volume is not safe to detach, but maxWaitForUnmountDuration expired, force detaching",
        );
      } else {
        this.#o.metrics?.forcedDetach("out-of-service");
        log.info(
          { volumeName, node: nodeName },
          "attacherDetacher.DetachVolume started: node has out-of-service taint, force detaching",
        );
      }
    }
  }

  #attachDesiredVolumes(): void {
    const { dsw, asw, executor, log } = this.#o;
    for (const volume of dsw.getVolumesToAttach()) {
      const { volumeName, nodeName } = volume;
      const multiAttach = isMultiAttachAllowed(volume.volumeSpec);
      // Checked before the ASW: an attach updates the ASW before it stops being pending.
      if (executor.isOperationPending(volumeName, multiAttach ? nodeName : "")) continue;
      if (asw.getAttachState(volumeName, nodeName) === "Attached") {
        asw.resetDetachRequestTime(volumeName, nodeName);
        continue;
      }
      // Uncertain attachments elsewhere count too: stricter than upstream (see getNodesForAttachedVolume).
      if (!multiAttach) {
        const attachedTo = asw.getNodesForAttachedVolume(volumeName, nodeName);
        if (attachedTo.length > 0) {
          if (!volume.multiAttachErrorReported) {
            this.#reportMultiAttachError(volume, attachedTo);
            dsw.setMultiAttachError(volumeName, nodeName);
          }
          continue;
        }
      }
      if (executor.attachVolume(volume)) {
        log.info({ volumeName, node: nodeName }, "attacherDetacher.AttachVolume started");
      }
    }
  }

  /**
   * Tells each pod waiting for the volume why (upstream reportMultiAttachError, whose v1.37 wording
   * is "Waiting for detach"): the pods on the other nodes holding it are named only to pods of their
   * own namespace, and counted for the rest.
   */
  #reportMultiAttachError(volume: VolumeToAttach, otherNodes: readonly string[]): void {
    const holders = this.#o.dsw.getVolumePodsOnNodes(otherNodes, volume.volumeName);
    const warn = (pod: VolumeToAttach["scheduledPods"][number], suffix: string) => {
      this.#o.events.event(
        objectReference(pod, "Pod"),
        "Warning",
        "FailedAttachVolume",
        volumeMessage(volume.volumeSpec, "Waiting for detach", suffix),
      );
    };
    if (holders.length === 0) {
      for (const pod of volume.scheduledPods) {
        warn(
          pod,
          "Volume is already exclusively attached to one node, waiting on detach before it can be attached to another node",
        );
      }
      this.#o.log.info(
        { volumeName: volume.volumeName, node: volume.nodeName, attachedTo: otherNodes },
        "Waiting for detach: volume is already exclusively attached, waiting on detach before it can be attached to another node",
      );
      return;
    }
    for (const pod of volume.scheduledPods) {
      const namespace = pod.metadata?.namespace;
      const local = holders
        .filter((h) => h.metadata?.namespace === namespace)
        .map((h) => h.metadata?.name ?? "");
      const others = holders.length - local.length;
      let suffix: string;
      if (local.length > 0) {
        suffix = `Volume is already used by pod(s) ${local.join(", ")}`;
        if (others > 0) suffix += ` and ${others} pod(s) in different namespaces`;
      } else {
        suffix = `Volume is already used by ${others} pod(s) in different namespaces`;
      }
      warn(pod, suffix);
    }
    this.#o.log.info(
      { volumeName: volume.volumeName, node: volume.nodeName, attachedTo: otherNodes, pods: holders.length },
      "Waiting for detach: volume is in use by pods",
    );
  }
}
