import type { V1Node, V1Pod } from "@kubernetes/client-node";
import type { Registry } from "prom-client";
import { isNotFound } from "../runtime/api-errors.js";
import { abortableRequest, type ApiClients } from "../runtime/client.js";
import { realClock, sleep, type Clock } from "../runtime/clock.js";
import type { InformerFactory } from "../runtime/informer/index.js";
import { objectKey } from "../runtime/informer/store.js";
import type { LogSink } from "../runtime/logger.js";
import {
  newRateLimitingQueue,
  runWorkers,
  type RateLimitingQueue,
  type WorkqueueMetrics,
} from "../runtime/workqueue/index.js";
import type { EventSink } from "../runtime/events/event-sink.js";
import { addPodPVCIndexerIfNotPresent, POD_PVC_INDEX } from "../volume/common/common.js";
import { isPodTerminated } from "../volume/util/pod.js";
import type { VolumeSpec } from "../volume/plugin.js";
import type { VolumePluginManager } from "../volume/plugin-manager.js";
import { ActualStateOfWorld } from "./cache/actual-state-of-world.js";
import { DesiredStateOfWorld } from "./cache/desired-state-of-world.js";
import { AttachDetachMetrics } from "./metrics.js";
import { OperationExecutor } from "./operation-executor.js";
import { DesiredStateOfWorldPopulator } from "./populator/desired-state-of-world-populator.js";
import { nodeHealthFrom, Reconciler } from "./reconciler.js";
import {
  populateActualStateOfWorld,
  populateDesiredStateOfWorld,
  type StateRecoveryContext,
} from "./state-recovery.js";
import { APINodeStatusUpdater } from "./statusupdater/node-status-updater.js";
import { CONTROLLER_MANAGED_ATTACH_ANNOTATION, createVolumeSpec, processPodVolumes } from "./util.js";

/** The informers the controller reads (upstream's listers). */
function informersOf(f: InformerFactory) {
  return {
    pods: f.pods(),
    nodes: f.nodes(),
    pvcs: f.persistentVolumeClaims(),
    pvs: f.persistentVolumes(),
    csiNodes: f.csiNodes(),
    csiDrivers: f.csiDrivers(),
    volumeAttachments: f.volumeAttachments(),
  };
}

function nodeName(node: V1Node): string {
  return node.metadata?.name ?? "";
}

/** Upstream's TimerConfig: production defaults; tests shorten them. */
export interface TimerConfig {
  reconcilerLoopPeriodMs: number;
  /** How long a mounted volume on an unhealthy node waits before a forced detach. */
  maxWaitForUnmountMs: number;
  desiredStateOfWorldPopulatorLoopPeriodMs: number;
  desiredStateOfWorldPopulatorListPodsRetryDurationMs: number;
}

export const DEFAULT_TIMER_CONFIG: TimerConfig = {
  reconcilerLoopPeriodMs: 100,
  maxWaitForUnmountMs: 6 * 60_000,
  desiredStateOfWorldPopulatorLoopPeriodMs: 60_000,
  desiredStateOfWorldPopulatorListPodsRetryDurationMs: 3 * 60_000,
};

export interface AttachDetachControllerOptions {
  clients: Pick<ApiClients, "core">;
  informers: InformerFactory;
  /** Attachable plugins (CSI, FlexVolume, …); probers added to it are refreshed when they have news. */
  plugins: VolumePluginManager;
  events: EventSink;
  logger: LogSink;
  registry?: Registry;
  workqueueMetrics?: WorkqueueMetrics;
  clock?: Clock;
  /** --attach-detach-reconcile-sync-period. */
  reconcilerSyncPeriodMs: number;
  /** --disable-attach-detach-reconcile-sync. */
  disableReconciliationSync: boolean;
  /** --disable-force-detach-on-timeout. */
  disableForceDetachOnTimeout: boolean;
  timers?: Partial<TimerConfig>;
}

/**
 * The attach/detach controller (upstream attachdetach.attachDetachController): informer handlers and
 * the populator keep the desired state (which pods on managed nodes need which attachable volumes);
 * the reconciler drives the actual state toward it through the plugins and writes
 * node.status.volumesAttached. At start-up the actual state is rebuilt from node statuses and
 * VolumeAttachments before anything runs, so a restart neither detaches a volume in use nor forgets
 * one that is attached.
 */
export class AttachDetachController {
  readonly dsw: DesiredStateOfWorld;
  readonly asw: ActualStateOfWorld;
  readonly #o: AttachDetachControllerOptions;
  readonly #timers: TimerConfig;
  readonly #clock: Clock;
  readonly #log: LogSink;
  readonly #informers: ReturnType<typeof informersOf>;
  /** What processPodVolumes and the state recovery read and write. */
  readonly #world: StateRecoveryContext;
  readonly #pvcQueue: RateLimitingQueue;
  readonly #stop = new AbortController();
  readonly #metrics: AttachDetachMetrics | undefined;
  readonly #executor: OperationExecutor;
  readonly #reconciler: Reconciler;
  readonly #populator: DesiredStateOfWorldPopulator;
  /** run() has rebuilt the actual and desired states from the caches. */
  #populated = false;

  /**
   * Registers informers, the pods-by-claim index and the handlers: call before the factory starts.
   * The steps follow upstream NewAttachDetachController.
   */
  constructor(options: AttachDetachControllerOptions) {
    this.#o = options;
    this.#timers = { ...DEFAULT_TIMER_CONFIG, ...options.timers };
    this.#clock = options.clock ?? realClock;
    this.#log = options.logger;
    this.#informers = informersOf(options.informers);
    const { pvcs, pvs } = this.#informers;
    this.dsw = new DesiredStateOfWorld(options.plugins);
    this.asw = new ActualStateOfWorld(options.plugins, this.#clock, this.#log);
    this.#world = {
      dsw: this.dsw,
      asw: this.asw,
      plugins: options.plugins,
      lookups: {
        getClaim: (namespace, name) => pvcs.store.get(`${namespace}/${name}`),
        getVolume: (name) => pvs.store.get(name),
      },
      log: this.#log,
    };
    this.#pvcQueue = newRateLimitingQueue({
      name: "pvcs",
      clock: this.#clock,
      metrics: options.workqueueMetrics,
    });
    this.#metrics = options.registry && this.#newMetrics(options.registry);
    this.#executor = this.#newOperationExecutor();
    this.#reconciler = this.#newReconciler();
    this.#populator = this.#newPopulator();
    this.#addEventHandlers();
  }

  /**
   * The state gauges report nothing until run() has rebuilt the states: a warm standby's handlers
   * fill the desired state long before the actual one exists, and its gauges beside the leader's
   * would double every sum (KubeVolumeControllerDesiredNotAttached). A standby KCM has no controller.
   */
  #newMetrics(registry: Registry): AttachDetachMetrics {
    const whenRunning =
      <T>(list: () => Iterable<T>) =>
      (): Iterable<T> =>
        this.#populated ? list() : [];
    return new AttachDetachMetrics(registry, {
      desiredVolumeSpecs: whenRunning(() => this.dsw.getVolumesToAttach().map((v) => v.volumeSpec)),
      actualVolumeSpecs: whenRunning(() => this.asw.getAttachedVolumes().map((v) => v.volumeSpec)),
      podVolumes: whenRunning(() => this.#scheduledPodVolumes()),
      findPluginBySpec: (spec) => this.#o.plugins.findPluginBySpec(spec),
      volumeAttachments: whenRunning(() => this.#informers.volumeAttachments.store.list()),
    });
  }

  #newOperationExecutor(): OperationExecutor {
    const { core } = this.#o.clients;
    return new OperationExecutor({
      plugins: this.#o.plugins,
      asw: this.asw,
      nodes: {
        getNode: async (name, signal) => {
          try {
            return await core.readNode({ name }, signal && abortableRequest(signal));
          } catch (err) {
            if (isNotFound(err)) return undefined;
            throw err;
          }
        },
      },
      events: this.#o.events,
      clock: this.#clock,
      log: this.#log,
      signal: this.#stop.signal,
      ...(this.#metrics && { metrics: this.#metrics }),
    });
  }

  #newReconciler(): Reconciler {
    const { nodes } = this.#informers;
    return new Reconciler({
      dsw: this.dsw,
      asw: this.asw,
      executor: this.#executor,
      nodeStatusUpdater: new APINodeStatusUpdater({
        core: this.#o.clients.core,
        getNode: (name) => nodes.store.get(name),
        asw: this.asw,
        log: this.#log,
      }),
      nodes: nodeHealthFrom((name) => nodes.store.get(name)),
      events: this.#o.events,
      clock: this.#clock,
      log: this.#log,
      ...(this.#metrics && { metrics: this.#metrics }),
      loopPeriodMs: this.#timers.reconcilerLoopPeriodMs,
      maxWaitForUnmountMs: this.#timers.maxWaitForUnmountMs,
      syncPeriodMs: this.#o.reconcilerSyncPeriodMs,
      disableReconciliationSync: this.#o.disableReconciliationSync,
      disableForceDetachOnTimeout: this.#o.disableForceDetachOnTimeout,
    });
  }

  #newPopulator(): DesiredStateOfWorldPopulator {
    return new DesiredStateOfWorldPopulator({
      ...this.#world,
      pods: this.#informers.pods.store,
      clock: this.#clock,
      loopPeriodMs: this.#timers.desiredStateOfWorldPopulatorLoopPeriodMs,
      listPodsRetryDurationMs: this.#timers.desiredStateOfWorldPopulatorListPodsRetryDurationMs,
    });
  }

  /** The pod, node and claim handlers, and the pods-by-claim index the claim worker reads. */
  #addEventHandlers(): void {
    const { pods, nodes, pvcs } = this.#informers;
    addPodPVCIndexerIfNotPresent(pods);
    pods.addEventHandler({
      onAdd: (pod) => {
        this.#podAddedOrUpdated(pod);
      },
      onUpdate: (_, pod) => {
        this.#podAddedOrUpdated(pod);
      },
      onDelete: (pod) => {
        processPodVolumes(pod, false, this.#world);
      },
    });
    nodes.addEventHandler({
      onAdd: (node) => {
        this.#nodeUpdated(node);
        // A re-created node object starts without volumesAttached: write the report again (upstream #37586).
        this.asw.setNodeStatusUpdateNeeded(nodeName(node));
      },
      onUpdate: (_, node) => {
        this.#nodeUpdated(node);
      },
      onDelete: (node) => {
        this.#nodeDeleted(node);
      },
    });
    pvcs.addEventHandler({
      onAdd: (pvc) => {
        this.#pvcQueue.add(objectKey(pvc));
      },
      onUpdate: (_, pvc) => {
        this.#pvcQueue.add(objectKey(pvc));
      },
    });
  }

  /**
   * Waits for the caches, rebuilds the actual and desired states, then runs the reconciler, the
   * populator and the claims worker until `signal` aborts; resolves once their operations finished.
   */
  async run(signal: AbortSignal): Promise<void> {
    this.#log.info({}, "Starting attach detach controller");
    const abort = () => {
      this.#stop.abort(signal.reason);
      this.#pvcQueue.shutDown();
    };
    signal.addEventListener("abort", abort, { once: true });
    try {
      const synced = await Promise.all(
        Object.values(this.#informers).map((i) => i.waitForCacheSync(signal)),
      ).then(
        () => true,
        () => false, // aborted
      );
      if (!synced) return;
      this.#populateActualStateOfWorld();
      this.#populateDesiredStateOfWorld();
      this.#populated = true;
      await Promise.all([
        this.#reconciler.run(signal),
        this.#populator.run(signal),
        this.#refreshProbedPlugins(signal),
        runWorkers(
          this.#pvcQueue,
          1,
          (key) => {
            this.#syncPVCByKey(key);
            this.#pvcQueue.forget(key);
            return Promise.resolve();
          },
          signal,
          (key, err) => {
            this.#pvcQueue.addRateLimited(key);
            this.#log.error({ pvc: key, err }, "failed to sync pvc, will retry again");
          },
        ),
      ]);
    } finally {
      signal.removeEventListener("abort", abort);
      abort();
      await this.#executor.waitForCompletion();
      this.#metrics?.close();
      this.#log.info({}, "Shutting down attach detach controller");
    }
  }

  /** Every node's attached volumes from its status, then every VolumeAttachment the nodes do not list. */
  #populateActualStateOfWorld(): void {
    const { nodes, volumeAttachments } = this.#informers;
    populateActualStateOfWorld(nodes.store.list(), volumeAttachments.store.list(), this.#world);
  }

  #populateDesiredStateOfWorld(): void {
    populateDesiredStateOfWorld(this.#informers.pods.store.list(), this.#informers.nodes.store, this.#world);
  }

  #podAddedOrUpdated(pod: V1Pod): void {
    if (!pod.spec?.nodeName) return; // not scheduled
    processPodVolumes(pod, !isPodTerminated(pod), this.#world);
  }

  #nodeUpdated(node: V1Node): void {
    if (node.metadata?.annotations?.[CONTROLLER_MANAGED_ATTACH_ANNOTATION] !== undefined) {
      this.dsw.addNode(nodeName(node));
    }
    this.asw.setVolumesMountedByNode(node.status?.volumesInUse, nodeName(node));
  }

  #nodeDeleted(node: V1Node): void {
    try {
      this.dsw.deleteNode(nodeName(node));
    } catch (err) {
      // Expected while a drained node still has volumes; they are detached first.
      this.#log.info({ node: nodeName(node), err }, "Error removing node from desired-state-of-world");
    }
    this.asw.setVolumesMountedByNode(node.status?.volumesInUse, nodeName(node));
  }

  /** A claim became bound: the pods that wait for it can now have its volume attached. */
  #syncPVCByKey(key: string): void {
    const pvc = this.#informers.pvcs.store.get(key);
    if (!pvc || pvc.status?.phase !== "Bound" || !pvc.spec?.volumeName) return;
    for (const pod of this.#informers.pods.store.byIndex(POD_PVC_INDEX, key)) {
      if (!pod.spec?.nodeName || isPodTerminated(pod)) continue;
      processPodVolumes(pod, true, this.#world);
    }
  }

  /**
   * Applies plugins the probers found or lost; new ones may make skipped pod volumes attachable. At
   * most once a loop period, and only when a prober may have something to report (issue 30 goal 2).
   */
  async #refreshProbedPlugins(signal: AbortSignal): Promise<void> {
    const { plugins } = this.#o;
    try {
      for (;;) {
        if (await plugins.refreshProbedPlugins()) this.#populator.findAndAddActivePods();
        await plugins.whenProbeNeeded(signal);
        // A loop period after the news, as the poll this replaces: a driver being installed is
        // looked at once its files are in place, not at its directory's first event.
        await sleep(this.#clock, this.#timers.reconcilerLoopPeriodMs, signal);
      }
    } catch {
      // aborted
    }
  }

  *#scheduledPodVolumes(): Iterable<{ nodeName: string; spec: VolumeSpec }> {
    for (const pod of this.#informers.pods.store.list()) {
      const node = pod.spec?.nodeName;
      if (!node) continue;
      for (const volume of pod.spec?.volumes ?? []) {
        try {
          yield { nodeName: node, spec: createVolumeSpec(pod, volume, this.#world.lookups) };
        } catch {
          // not countable, as upstream
        }
      }
    }
  }
}
