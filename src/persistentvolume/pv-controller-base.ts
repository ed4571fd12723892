import type { V1PersistentVolume, V1PersistentVolumeClaim } from "@kubernetes/client-node";
import { realClock, type Clock } from "../runtime/clock.js";
import type { ApiClients } from "../runtime/client.js";
import type { EventSink } from "../runtime/events/event-sink.js";
import { objectKey, type InformerFactory, type SharedInformer } from "../runtime/informer/index.js";
import type { Logger } from "../runtime/logger.js";
import {
  newRateLimitingQueue,
  runWorkers,
  type RateLimitingQueue,
  type WorkqueueMetrics,
} from "../runtime/workqueue/index.js";
import { addPodPVCIndexerIfNotPresent } from "../volume/common/common.js";
import type { VolumePluginManager } from "../volume/plugin-manager.js";
import { UnsyncedVersions } from "../shadow/unsynced-versions.js";
import { CoreV1BinderApi } from "./binder-api.js";
import { pauseAfterBindWrite } from "./crash-seam.js";
import type { PersistentVolumeMetrics } from "./metrics.js";
import { PersistentVolumeController } from "./pv-controller.js";

export interface PersistentVolumeControllerRunnerOptions {
  clients: Pick<ApiClients, "requestJson">;
  informers: Pick<
    InformerFactory,
    "persistentVolumes" | "persistentVolumeClaims" | "storageClasses" | "pods" | "nodes"
  >;
  plugins: VolumePluginManager;
  events: EventSink;
  /** The process logger; the binder logs through a child bound to its controller name. */
  logger: Logger;
  clock?: Clock;
  workqueueMetrics?: WorkqueueMetrics;
  /** The binder's own metrics: the pv_collector gauges, operation timings, retroactive class assignments. */
  metrics?: PersistentVolumeMetrics;
  /** --pvclaimbinder-sync-period: every claim, then every volume, is re-queued this often. */
  resyncPeriodMs: number;
  /**
   * --concurrent-pvclaimbinder-syncs: claim keys, and volume keys, synced at once; default 1, as
   * upstream. Shadow mode syncs one at a time whatever this says: it compares kvc's decisions with
   * KCM's one worker's, and concurrent claims may choose among equal volumes in another order.
   */
  concurrentSyncs?: number;
  /** --enable-dynamic-provisioning. */
  enableDynamicProvisioning: boolean;
  /** Crash-safety tests only: see crash-seam.ts. */
  pauseAfterBindWrite?: number;
  /** Shadow mode (src/shadow): every version of an object is synced (UnsyncedVersions), not only the latest. */
  shadow?: boolean;
}

/**
 * Runs a PersistentVolumeController (upstream's one type is split in two: pv_controller.go's
 * decisions there, pv_controller_base.go's informers, queues and Run here, as the files are): the
 * shared informers feed two queues, "claims" and "volumes", each drained by one worker upstream;
 * here by `concurrentSyncs` workers (the queue never hands one key to two; ControllerCache's
 * reservations keep two claim syncs from choosing one volume); a periodic resync re-queues
 * everything. A worker reads the key's object from the informer; an object the informer no longer
 * has is a delete, handled with the controller's cached copy. As upstream v1.37, a failed sync is
 * re-queued rate-limited (5 ms doubling per key, with a global bucket) and a good one forgets the
 * key; operations carry their own backoff.
 */
export class PersistentVolumeControllerRunner {
  readonly #volumes: SharedInformer<V1PersistentVolume>;
  readonly #claims: SharedInformer<V1PersistentVolumeClaim>;
  readonly #synced: Pick<SharedInformer<never>, "waitForCacheSync">[];
  readonly #volumeQueue: RateLimitingQueue;
  readonly #claimQueue: RateLimitingQueue;
  readonly #controller: PersistentVolumeController;
  readonly #clock: Clock;
  readonly #resyncPeriodMs: number;
  readonly #concurrentSyncs: number;
  /** Shadow mode: versions the informers replaced before the workers synced them. */
  readonly #unsynced:
    | {
        volumes: UnsyncedVersions<V1PersistentVolume>;
        claims: UnsyncedVersions<V1PersistentVolumeClaim>;
      }
    | undefined;

  constructor(opts: PersistentVolumeControllerRunnerOptions) {
    this.#clock = opts.clock ?? realClock;
    // Named by the controller manager (the `controller` binding, as klog.LoggerWithName upstream).
    const log = opts.logger;
    this.#resyncPeriodMs = opts.resyncPeriodMs;
    this.#concurrentSyncs = opts.shadow ? 1 : (opts.concurrentSyncs ?? 1);
    this.#unsynced = opts.shadow
      ? // A volume's last synced version again: the release needs it. A claim's not: replayed after
        // its deletion began, it repeated a binding KCM did not (kvc-only; test/integration/shadow).
        { volumes: new UnsyncedVersions({ againWhenReplaced: true }), claims: new UnsyncedVersions() }
      : undefined;
    const { informers } = opts;
    this.#volumes = informers.persistentVolumes();
    this.#claims = informers.persistentVolumeClaims();
    const classes = informers.storageClasses();
    const pods = informers.pods();
    const nodes = informers.nodes();
    addPodPVCIndexerIfNotPresent(pods);
    this.#synced = [this.#volumes, this.#claims, classes, pods, nodes];

    const metrics = opts.workqueueMetrics;
    this.#volumeQueue = newRateLimitingQueue({ name: "volumes", clock: this.#clock, metrics });
    this.#claimQueue = newRateLimitingQueue({ name: "claims", clock: this.#clock, metrics });
    const enqueueVolume = (name: string) => {
      this.#volumeQueue.add(name);
    };
    const enqueueClaim = (key: string) => {
      this.#claimQueue.add(key);
    };
    // Shadow mode: a volume's sync found kvc's version of the claim unbound while the informer may
    // hold KCM's later one (bound to the volume KCM provisioned): kvc's binding comes from its own.
    const enqueueClaimDecidedOn = (key: string, decidedOn?: V1PersistentVolumeClaim) => {
      if (decidedOn) this.#unsynced?.claims.again(decidedOn, this.#claims.store.get(key));
      enqueueClaim(key);
    };
    this.#volumes.addEventHandler({
      onAdd: (pv) => {
        enqueueVolume(objectKey(pv));
      },
      onUpdate: (old, pv) => {
        // A resync redelivers the same object: nothing was replaced.
        if (old !== pv) this.#unsynced?.volumes.keep(old, this.#controller.cachedVolume(objectKey(old)));
        enqueueVolume(objectKey(pv));
      },
      onDelete: (pv) => {
        enqueueVolume(objectKey(pv));
      },
    });
    this.#claims.addEventHandler({
      onAdd: (pvc) => {
        enqueueClaim(objectKey(pvc));
      },
      onUpdate: (old, pvc) => {
        if (old !== pvc) this.#unsynced?.claims.keep(old, this.#controller.cachedClaim(objectKey(old)));
        enqueueClaim(objectKey(pvc));
      },
      onDelete: (pvc) => {
        enqueueClaim(objectKey(pvc));
      },
    });

    this.#controller = new PersistentVolumeController({
      api: opts.pauseAfterBindWrite
        ? pauseAfterBindWrite(new CoreV1BinderApi(opts.clients.requestJson), opts.pauseAfterBindWrite, log)
        : new CoreV1BinderApi(opts.clients.requestJson),
      classes: classes.store,
      claims: this.#claims.store,
      volumes: this.#volumes.store,
      nodes: nodes.store,
      pods: pods.store,
      events: opts.events,
      plugins: opts.plugins,
      clock: this.#clock,
      log,
      enqueueClaim: enqueueClaimDecidedOn,
      enqueueVolume,
      options: {
        enableDynamicProvisioning: opts.enableDynamicProvisioning,
        shadow: opts.shadow ?? false,
      },
      ...(opts.metrics && { metrics: opts.metrics }),
    });
  }

  /** Waits for the informers, fills the controller's cache, then works until `signal` aborts. */
  async run(signal: AbortSignal): Promise<void> {
    await Promise.all(this.#synced.map((i) => i.waitForCacheSync(signal)));
    this.#controller.initializeCaches(this.#volumes.store.list(), this.#claims.store.list());
    const stopResync = this.#scheduleResync();
    // The controller has logged the sync error already.
    const retry = (queue: RateLimitingQueue) => (key: string) => {
      queue.addRateLimited(key);
    };
    const forgetting =
      (queue: RateLimitingQueue, work: (key: string) => Promise<void>) => async (key: string) => {
        await work(key);
        queue.forget(key);
      };
    try {
      await Promise.all([
        runWorkers(
          this.#volumeQueue,
          this.#concurrentSyncs,
          forgetting(this.#volumeQueue, (name) => this.#volumeWorker(name)),
          signal,
          retry(this.#volumeQueue),
        ),
        runWorkers(
          this.#claimQueue,
          this.#concurrentSyncs,
          forgetting(this.#claimQueue, (key) => this.#claimWorker(key)),
          signal,
          retry(this.#claimQueue),
        ),
      ]);
    } finally {
      stopResync();
      await this.#controller.shutdown();
    }
  }

  // The informer's objects are frozen and the controller copies before it changes one, so it is
  // handed the informer's own (copying it for every sync only cost CPU and garbage).
  async #volumeWorker(name: string): Promise<void> {
    for (const earlier of this.#unsynced?.volumes.take(name) ?? []) {
      await this.#controller.updateVolume(earlier);
    }
    const volume = this.#volumes.store.get(name);
    if (volume) {
      await this.#controller.updateVolume(volume);
      return;
    }
    const cached = this.#controller.cachedVolume(name);
    if (cached) this.#controller.deleteVolume(cached);
  }

  async #claimWorker(key: string): Promise<void> {
    for (const earlier of this.#unsynced?.claims.take(key) ?? []) {
      await this.#controller.updateClaim(earlier);
    }
    const claim = this.#claims.store.get(key);
    if (claim) {
      await this.#controller.updateClaim(claim);
      return;
    }
    const cached = this.#controller.cachedClaim(key);
    if (cached) this.#controller.deleteClaim(cached);
  }

  #scheduleResync(): () => void {
    let cancel = () => {};
    const tick = () => {
      this.#controller.resync();
      cancel = this.#clock.setTimer(tick, this.#resyncPeriodMs);
    };
    cancel = this.#clock.setTimer(tick, this.#resyncPeriodMs);
    return () => {
      cancel();
    };
  }
}
