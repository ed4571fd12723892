import type {
  V1Node,
  V1PersistentVolume,
  V1PersistentVolumeClaim,
  V1StorageClass,
} from "@kubernetes/client-node";
import { isConflict } from "../runtime/api-errors.js";
import type { Clock } from "../runtime/clock.js";
import type { EventSink } from "../runtime/events/event-sink.js";
import { objectReference } from "../runtime/events/reference.js";
import { objectKey } from "../runtime/informer/store.js";
import { objectRef, type LogSink } from "../runtime/logger.js";
import { POD_PVC_INDEX } from "../volume/common/common.js";
import { isPodTerminated } from "../volume/util/pod.js";
import type { BinderApi } from "./binder-api.js";
import type {
  BinderContext,
  Lister,
  PersistentVolumeControllerOptions,
  PluginFinder,
  PodIndexer,
} from "./binder-context.js";
import { syncClaim } from "./claim-sync.js";
import { ControllerCache } from "./controller-cache.js";
import type { PersistentVolumeMetrics } from "./metrics.js";
import { OperationScheduler } from "./operations.js";
import { claimKey, isDelayBindingMode } from "./pv-helpers.js";
import { WaitingClaims } from "./waiting-claims.js";
import { syncVolume } from "./volume-sync.js";
import { inTreeCsiMigration, type CsiMigration } from "../volume/csimigration/plugin-manager.js";

export interface PersistentVolumeControllerDeps {
  api: BinderApi;
  /** Informer-backed listers. */
  classes: Lister<V1StorageClass>;
  claims: Lister<V1PersistentVolumeClaim>;
  volumes: Lister<V1PersistentVolume>;
  nodes: Lister<V1Node>;
  pods: PodIndexer;
  events: EventSink;
  plugins: PluginFinder;
  clock: Clock;
  log: LogSink;
  /**
   * Adds a claim key ("namespace/name") / volume name to the controller's work queues. `decidedOn`:
   * the claim's version a volume's sync found unbound; shadow mode syncs it again if the informer
   * has moved on (UnsyncedVersions.again).
   */
  enqueueClaim(key: string, decidedOn?: V1PersistentVolumeClaim): void;
  enqueueVolume(name: string): void;
  options: PersistentVolumeControllerOptions;
  /** Defaults to inTreeCsiMigration. */
  migration?: CsiMigration;
  /** Tests pass one that observes scheduling. */
  operations?: OperationScheduler;
  /** Where the binder's metrics go; none are recorded without. */
  metrics?: PersistentVolumeMetrics;
}

/**
 * The PersistentVolume binder's decisions (upstream pv_controller.go) behind the entry points its
 * queue workers call. PersistentVolumeControllerRunner (pv-controller-base.ts) calls initializeCaches
 * once the informers have synced, then, per dequeued key, updateClaim/updateVolume with the
 * informer's object or, when the informer no longer has it, deleteClaim/deleteVolume with the cached
 * one.
 *
 * Syncs of different claims (and of different volumes) may run at once; two syncs of one object may
 * not (the work queue never hands out a key twice). Two concurrent syncClaims never bind one volume
 * to two claims: bind() reserves the volume in the cache before its first write (ControllerCache).
 */
export class PersistentVolumeController {
  readonly #ctx: BinderContext;
  readonly #deps: PersistentVolumeControllerDeps;
  readonly #shutdown = new AbortController();

  constructor(deps: PersistentVolumeControllerDeps) {
    this.#deps = deps;
    const { api, classes, claims, nodes, pods, events, plugins, clock, log, options } = deps;
    const cache = new ControllerCache(log);
    this.#ctx = {
      api,
      cache,
      classes,
      claimInformer: claims,
      volumeInformer: deps.volumes,
      nodes,
      plugins,
      migration: deps.migration ?? inTreeCsiMigration,
      operations: deps.operations ?? new OperationScheduler(clock, log),
      // Shadow mode compares decisions with KCM's, whose claims wait for the resync: waking them
      // earlier would only report kvc's timing (kvc-only until KCM's resync).
      waitingClaims: options.shadow ? undefined : new WaitingClaims(),
      metrics: deps.metrics?.forController(
        {
          volumes: () => cache.listVolumes(),
          claims: () => cache.listClaims(),
          findPluginBySpec: (spec) => plugins.findPluginBySpec(spec),
          delaysBinding: (claim) => isDelayBindingMode(claim, classes) === true,
        },
        clock,
      ),
      clock,
      log,
      options: {
        enableDynamicProvisioning: options.enableDynamicProvisioning,
        provisionRetries: options.provisionRetries ?? 5,
        provisionRetryIntervalMs: options.provisionRetryIntervalMs ?? 10_000,
        shadow: options.shadow ?? false,
      },
      signal: this.#shutdown.signal,
      volumeEvent: (volume, type, reason, message) => {
        events.event(objectReference(volume, "PersistentVolume"), type, reason, message);
      },
      claimEvent: (claim, type, reason, message) => {
        events.event(objectReference(claim, "PersistentVolumeClaim"), type, reason, message);
      },
      activePodsUsingClaim: (namespace, name) =>
        pods.byIndex(POD_PVC_INDEX, `${namespace}/${name}`).filter((pod) => !isPodTerminated(pod)),
      enqueueClaim: (claim) => {
        deps.enqueueClaim(claimKey(claim), claim);
      },
    };
  }

  /** Fills the cache from the synced informers before the first sync (upstream initializeCaches). */
  initializeCaches(volumes: readonly V1PersistentVolume[], claims: readonly V1PersistentVolumeClaim[]): void {
    const { cache, log } = this.#ctx;
    for (const volume of volumes) {
      try {
        cache.storeVolume(volume);
      } catch (err) {
        log.error({ err, volumeName: volume.metadata?.name }, "Error updating volume cache");
      }
    }
    cache.settleVolumes();
    for (const claim of claims) {
      try {
        cache.storeClaim(claim);
      } catch (err) {
        log.error({ err, PVC: objectRef(claim) }, "Error updating claim cache");
      }
    }
  }

  /**
   * A volume was added, updated or resynced: caches it and syncs it, unless the cache already holds
   * a newer version (then the event is stale and the newer one was or will be synced). Rejects with
   * the sync's error, already logged, for the caller to retry.
   */
  async updateVolume(volume: V1PersistentVolume): Promise<void> {
    const name = volume.metadata?.name ?? "";
    try {
      if (!this.#ctx.cache.storeVolume(volume)) return;
      await syncVolume(this.#ctx, volume);
      this.#ctx.cache.volumeSynced(name, true);
    } catch (err) {
      this.#ctx.cache.volumeSynced(name, false);
      this.#logSyncError(err, "Could not sync volume", { volumeName: name });
      throw err;
    }
  }

  /** As updateVolume, for claims. */
  async updateClaim(claim: V1PersistentVolumeClaim): Promise<void> {
    try {
      if (!this.#ctx.cache.storeClaim(claim)) return;
      await syncClaim(this.#ctx, claim);
    } catch (err) {
      this.#logSyncError(err, "Could not sync claim", { PVC: objectRef(claim) });
      throw err;
    }
  }

  /** The decision for one claim, without the cache update updateClaim makes first. */
  syncClaim(claim: V1PersistentVolumeClaim): Promise<void> {
    return syncClaim(this.#ctx, claim);
  }

  /** The decision for one volume, without the cache update updateVolume makes first. */
  syncVolume(volume: V1PersistentVolume): Promise<void> {
    return syncVolume(this.#ctx, volume);
  }

  /** The volume is gone from the API: forgets it and enqueues its claim so the claim turns Lost promptly. */
  deleteVolume(volume: V1PersistentVolume): void {
    const name = volume.metadata?.name ?? "";
    this.#ctx.cache.deleteVolume(name);
    this.#ctx.log.debug({ volumeName: name }, "volume deleted");
    // The end of a delete operation's lifecycle, if one was started for the volume.
    this.#ctx.metrics?.operationSucceeded(name);
    const ref = volume.spec?.claimRef;
    if (!ref) return;
    this.#deps.enqueueClaim(`${ref.namespace ?? ""}/${ref.name ?? ""}`);
  }

  /** The claim is gone from the API: forgets it and enqueues its volume so the volume is released promptly. */
  deleteClaim(claim: V1PersistentVolumeClaim): void {
    const key = claimKey(claim);
    this.#ctx.cache.deleteClaim(key);
    this.#ctx.waitingClaims?.forget(key);
    this.#ctx.log.debug({ PVC: objectRef(claim) }, "Claim deleted");
    // An unfinished provisioning is never observed.
    this.#ctx.metrics?.forgetOperation(key);
    const volumeName = claim.spec?.volumeName;
    if (!volumeName) return;
    this.#deps.enqueueVolume(volumeName);
  }

  /** The controller's last version of a volume: what deleteVolume needs when the informer lost it. */
  cachedVolume(name: string): V1PersistentVolume | undefined {
    return this.#ctx.cache.getVolume(name);
  }

  /** As cachedVolume, by claim key "namespace/name". */
  cachedClaim(key: string): V1PersistentVolumeClaim | undefined {
    return this.#ctx.cache.getClaim(key);
  }

  /** Enqueues every claim, then every volume, from the informers (upstream resync, every sync period). */
  resync(): void {
    for (const claim of this.#deps.claims.list()) this.#deps.enqueueClaim(objectKey(claim));
    for (const volume of this.#deps.volumes.list()) this.#deps.enqueueVolume(objectKey(volume));
  }

  /** Resolves once no provision/delete/recycle operation is running. */
  waitForOperations(): Promise<void> {
    return this.#ctx.operations.waitForCompletion();
  }

  /** Aborts running operations' waits and resolves when they have finished; the gauges stop counting its cache. */
  async shutdown(): Promise<void> {
    this.#shutdown.abort(new Error("persistent volume controller is shutting down"));
    await this.waitForOperations();
    this.#ctx.metrics?.close();
  }

  #logSyncError(err: unknown, msg: string, fields: object): void {
    // Conflicts are routine: another writer (or our own earlier write) got there first.
    if (isConflict(err)) this.#ctx.log.debug({ ...fields, err }, msg);
    else this.#ctx.log.error({ ...fields, err }, msg);
  }
}
