import type { V1Pod } from "@kubernetes/client-node";
import type { Clock } from "../../runtime/clock.js";
import { until } from "../../util/wait.js";
import type { LogSink } from "../../runtime/logger.js";
import { isPodTerminated } from "../../volume/util/pod.js";
import type { AttachablePluginFinder, DesiredStateOfWorld } from "../cache/desired-state-of-world.js";
import { processPodVolumes, type VolumeLookups } from "../util.js";

export interface DesiredStateOfWorldPopulatorOptions {
  /** The pod informer's cache, by "namespace/name". */
  pods: { get(key: string): V1Pod | undefined; list(): V1Pod[] };
  lookups: VolumeLookups;
  dsw: DesiredStateOfWorld;
  plugins: AttachablePluginFinder;
  clock: Clock;
  log: LogSink;
  /** Pause between passes; upstream 1 min. */
  loopPeriodMs: number;
  /** Least time between two re-lists of every pod; upstream 3 min. */
  listPodsRetryDurationMs: number;
}

/**
 * The backstop behind the pod handlers (upstream DesiredStateOfWorldPopulator): a handler can miss a
 * change (a delete seen only as a relist, a claim bound after its pod was processed), so every pass
 * removes DSW pods that are gone, replaced (new UID) or terminated, and volumes that no longer need
 * attaching (e.g. their CSIDriver now says attachRequired=false); every few passes it re-adds every
 * active pod. Unlike upstream, which removes one volume of a vanished pod per pass, a pass removes
 * the pod from all of its volumes.
 */
export class DesiredStateOfWorldPopulator {
  readonly #o: DesiredStateOfWorldPopulatorOptions;
  #lastListPods: number | undefined;

  constructor(options: DesiredStateOfWorldPopulatorOptions) {
    this.#o = options;
  }

  async run(signal: AbortSignal): Promise<void> {
    await until(
      () => {
        this.populate();
      },
      this.#o.loopPeriodMs,
      { clock: this.#o.clock, signal },
    );
  }

  /** One pass (upstream populatorLoopFunc). */
  populate(): void {
    this.findAndRemoveDeletedPods();
    const last = this.#lastListPods;
    if (last !== undefined && this.#o.clock.now() - last < this.#o.listPodsRetryDurationMs) return;
    this.findAndAddActivePods();
  }

  findAndRemoveDeletedPods(): void {
    const { dsw, pods, plugins, log } = this.#o;
    for (const volume of dsw.getVolumesToAttach()) {
      let attachable: boolean;
      try {
        attachable = plugins.findAttachablePluginBySpec(volume.volumeSpec) !== undefined;
      } catch {
        attachable = false; // its plugin is gone (a FlexVolume driver removed)
      }
      if (!attachable) {
        log.info({ volumeName: volume.volumeName }, "Volume changes from attachable to non-attachable");
      }
      for (const pod of volume.scheduledPods) {
        const uid = pod.metadata?.uid ?? "";
        if (attachable) {
          const current = pods.get(`${pod.metadata?.namespace ?? ""}/${pod.metadata?.name ?? ""}`);
          if (current && current.metadata?.uid === uid && !isPodTerminated(current)) continue;
          log.info(
            { pod: `${pod.metadata?.namespace ?? ""}/${pod.metadata?.name ?? ""}`, podUID: uid },
            "Removing pod from dsw because it does not exist in pod informer",
          );
        }
        dsw.deletePod(uid, volume.volumeName, volume.nodeName);
      }
    }
  }

  /** Adds every active pod again (upstream findAndAddActivePods); also run when a plugin appears. */
  findAndAddActivePods(): void {
    this.#lastListPods = this.#o.clock.now();
    for (const pod of this.#o.pods.list()) {
      if (isPodTerminated(pod)) continue;
      processPodVolumes(pod, true, this.#o);
    }
  }
}
