import type { CoreV1Api, V1PersistentVolume } from "@kubernetes/client-node";
import type { Clock } from "../runtime/clock.js";
import { UnsyncedVersions } from "../shadow/unsynced-versions.js";
import { objectKey, type InformerFactory, type SharedInformer } from "../runtime/informer/index.js";
import { objectRef, type LogSink } from "../runtime/logger.js";
import {
  newRateLimitingQueue,
  runWorkers,
  type RateLimitingQueue,
  type WorkqueueMetrics,
} from "../runtime/workqueue/index.js";
import {
  addFinalizerPatch,
  isDeletionCandidate,
  needToAddFinalizer,
  PV_PROTECTION_FINALIZER,
  removeFinalizerPatch,
} from "./finalizer.js";
import { handleSyncError } from "./sync-error.js";
import { mergePatch } from "../runtime/client.js";

export interface PVProtectionControllerOptions {
  clients: { core: Pick<CoreV1Api, "patchPersistentVolume"> };
  informers: Pick<InformerFactory, "persistentVolumes">;
  logger: LogSink;
  clock?: Clock;
  /** kube-controller-manager runs 1. */
  workers?: number;
  metrics?: WorkqueueMetrics;
  /** Shadow mode (src/shadow): a deletion candidate KCM released before our worker saw it is still judged. */
  shadow?: boolean;
}

/**
 * Upstream isBeingUsed: a volume is in use while its status says Bound, which the PV controller
 * keeps current; the claim side is protected by the pvc-protection controller.
 */
export function isVolumeBound(pv: V1PersistentVolume): boolean {
  return pv.status?.phase === "Bound";
}

/**
 * The pv-protection controller: removes kubernetes.io/pv-protection from a volume being deleted
 * once it is not bound, and adds the finalizer to volumes that lack it (created before the
 * admission plugin was on).
 */
export class PVProtectionController {
  readonly #core: PVProtectionControllerOptions["clients"]["core"];
  readonly #pvs: SharedInformer<V1PersistentVolume>;
  readonly #queue: RateLimitingQueue;
  readonly #log: LogSink;
  readonly #workers: number;
  readonly #unsynced: UnsyncedVersions<V1PersistentVolume> | undefined;

  /** Registers the informer and its handler: call before the factory starts. */
  constructor(opts: PVProtectionControllerOptions) {
    this.#core = opts.clients.core;
    this.#log = opts.logger;
    this.#workers = opts.workers ?? 1;
    this.#unsynced = opts.shadow ? new UnsyncedVersions() : undefined;
    this.#queue = newRateLimitingQueue({ name: "pvprotection", clock: opts.clock, metrics: opts.metrics });
    this.#pvs = opts.informers.persistentVolumes();
    this.#pvs.addEventHandler({
      onAdd: (pv) => {
        this.#pvAddedUpdated(pv);
      },
      onUpdate: (old, pv) => {
        if (this.#unsynced && isDeletionCandidate(old, PV_PROTECTION_FINALIZER)) {
          this.#unsynced.keep(old);
          this.#queue.add(objectKey(old));
        }
        this.#pvAddedUpdated(pv);
      },
      onDelete: (pv) => {
        // Deleted once KCM removed the finalizer: the deletion shows the version it removed it from.
        if (this.#unsynced && isDeletionCandidate(pv, PV_PROTECTION_FINALIZER)) {
          this.#unsynced.keep(pv);
          this.#queue.add(objectKey(pv));
        }
      },
    });
  }

  /** Waits for the cache, then works until `signal` is aborted; resolves once the workers have stopped. */
  async run(signal: AbortSignal): Promise<void> {
    this.#log.info({}, "Starting PV protection controller");
    try {
      const synced = await this.#pvs.waitForCacheSync(signal).then(
        () => true,
        () => false, // aborted
      );
      if (!synced) return;
      await runWorkers(
        this.#queue,
        this.#workers,
        async (name) => {
          await this.#processPV(name);
          this.#queue.forget(name);
        },
        signal,
        (name, err) => {
          handleSyncError(this.#queue, this.#log, "PV", name, err);
        },
      );
    } finally {
      this.#queue.shutDown();
      this.#log.info({}, "Shutting down PV protection controller");
    }
  }

  async #processPV(name: string): Promise<void> {
    for (const earlier of this.#unsynced?.take(name) ?? []) await this.#process(earlier);
    const pv = this.#pvs.store.get(name);
    if (!pv) {
      this.#log.debug({ pv: name }, "PV not found, ignoring");
      return;
    }
    await this.#process(pv);
  }

  async #process(pv: V1PersistentVolume): Promise<void> {
    if (isDeletionCandidate(pv, PV_PROTECTION_FINALIZER)) {
      if (!isVolumeBound(pv)) {
        await this.#patchFinalizers(pv, removeFinalizerPatch(pv, PV_PROTECTION_FINALIZER));
        this.#log.debug({ pv: objectRef(pv) }, "Removed protection finalizer from PV");
        return;
      }
      this.#log.debug({ pv: objectRef(pv) }, "Keeping PV because it is being used");
    }
    if (needToAddFinalizer(pv, PV_PROTECTION_FINALIZER)) {
      await this.#patchFinalizers(pv, addFinalizerPatch(pv, PV_PROTECTION_FINALIZER));
      this.#log.debug({ pv: objectRef(pv) }, "Added protection finalizer to PV");
    }
  }

  async #patchFinalizers(pv: V1PersistentVolume, body: object): Promise<void> {
    await this.#core.patchPersistentVolume({ name: pv.metadata?.name ?? "", body }, mergePatch);
  }

  #pvAddedUpdated(pv: V1PersistentVolume): void {
    if (needToAddFinalizer(pv, PV_PROTECTION_FINALIZER) || isDeletionCandidate(pv, PV_PROTECTION_FINALIZER))
      this.#queue.add(objectKey(pv));
  }
}
