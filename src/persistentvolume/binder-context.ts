import type {
  V1Node,
  V1PersistentVolume,
  V1PersistentVolumeClaim,
  V1Pod,
  V1StorageClass,
} from "@kubernetes/client-node";
import type { Clock } from "../runtime/clock.js";
import type { EventType } from "../runtime/events/recorder.js";
import type { LogSink } from "../runtime/logger.js";
import type { CsiMigration } from "../volume/csimigration/plugin-manager.js";
import type { VolumePluginManager } from "../volume/plugin-manager.js";
import type { BinderApi } from "./binder-api.js";
import type { ControllerCache } from "./controller-cache.js";
import type { BinderMetrics } from "./metrics.js";
import type { OperationScheduler } from "./operations.js";
import type { WaitingClaims } from "./waiting-claims.js";

/*
 * The ports of the binder's decisions: what syncClaim, syncVolume and the operations they start read
 * and write. PersistentVolumeController (pv-controller.ts) fills them in; the decisions import only
 * this module, never the controller.
 */

/** The read side of an informer cache; objects are shared and frozen. Keys: "name" or "namespace/name". */
export interface Lister<T> {
  get(key: string): T | undefined;
  list(): T[];
}

/** The pod informer's cache with the POD_PVC_INDEX index (volume/common) registered. */
export interface PodIndexer {
  byIndex(indexName: string, value: string): V1Pod[];
}

/** The plugin lookups the binder makes; VolumePluginManager fits. */
export type PluginFinder = Pick<
  VolumePluginManager,
  | "findProvisionablePluginByName"
  | "findDeletablePluginByName"
  | "findDeletablePluginBySpec"
  | "findRecyclablePluginBySpec"
  | "findPluginBySpec"
>;

export interface PersistentVolumeControllerOptions {
  /** --enable-dynamic-provisioning. */
  enableDynamicProvisioning: boolean;
  /** Attempts to create a provisioned PV object, and to delete its storage if all fail (upstream 5). */
  provisionRetries?: number;
  /** Wait between those attempts (upstream 10 s). */
  provisionRetryIntervalMs?: number;
  /** Shadow mode (src/shadow): writes are recorded, never made; other controllers' objects exist. */
  shadow?: boolean;
}

/** What the sync functions work with: the controller's state and I/O, one per controller. */
export interface BinderContext {
  readonly api: BinderApi;
  readonly cache: ControllerCache;
  readonly classes: Lister<V1StorageClass>;
  /** The claim informer: consulted before the API when a bound claim is missing from the cache. */
  readonly claimInformer: Lister<V1PersistentVolumeClaim>;
  /** The volume informer: shadow mode tells a replayed version (UnsyncedVersions) from its latest. */
  readonly volumeInformer: Lister<V1PersistentVolume>;
  readonly nodes: Lister<V1Node>;
  readonly plugins: PluginFinder;
  readonly migration: CsiMigration;
  readonly operations: OperationScheduler;
  /** Claims a volume turning Available wakes before the resync; undefined: none (shadow mode). */
  readonly waitingClaims: WaitingClaims | undefined;
  /** Operation timings and counters (upstream operationTimestamps); undefined records nothing. */
  readonly metrics: BinderMetrics | undefined;
  readonly clock: Clock;
  readonly log: LogSink;
  readonly options: Required<PersistentVolumeControllerOptions>;
  /** Aborted on shutdown; long operations (provision retries, recycling) stop on it. */
  readonly signal: AbortSignal;
  volumeEvent(volume: V1PersistentVolume, type: EventType, reason: string, message: string): void;
  claimEvent(claim: V1PersistentVolumeClaim, type: EventType, reason: string, message: string): void;
  /** Pods using the claim that are not terminated. */
  activePodsUsingClaim(namespace: string, name: string): V1Pod[];
  /** Asks for a sync of the claim, whose version here the controller decided on (see the deps'). */
  enqueueClaim(claim: V1PersistentVolumeClaim): void;
}
