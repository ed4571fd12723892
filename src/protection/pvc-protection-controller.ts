import type { CoreV1Api, V1PersistentVolumeClaim, V1Pod } from "@kubernetes/client-node";
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
  PVC_PROTECTION_FINALIZER,
  removeFinalizerPatch,
} from "./finalizer.js";
import { NamespaceBatches } from "./namespace-batches.js";
import { handleSyncError } from "./sync-error.js";
import { addPodPVCIndexerIfNotPresent, POD_PVC_INDEX, podPVCKeys } from "../volume/common/common.js";
import { isPodTerminated } from "../volume/util/pod.js";
import { podUsesPVCForDeletion, podUsesPVCForUnusedSince } from "./pod-usage.js";
import {
  findUnusedCondition,
  unusedConditionChange,
  unusedConditionValue,
  withUnusedCondition,
} from "./unused-condition.js";
import { mergePatch } from "../runtime/client.js";

export interface PVCProtectionControllerOptions {
  clients: {
    core: Pick<
      CoreV1Api,
      | "listNamespacedPod"
      | "patchNamespacedPersistentVolumeClaim"
      | "patchNamespacedPersistentVolumeClaimStatus"
    >;
  };
  informers: Pick<InformerFactory, "persistentVolumeClaims" | "pods">;
  logger: LogSink;
  clock?: Clock;
  /** Workers handling namespaces' batches of claims; kube-controller-manager runs 1. */
  workers?: number;
  metrics?: WorkqueueMetrics;
  /**
   * Feature gate PersistentVolumeClaimUnusedSinceTime (beta, on by default in 1.37): keep the Unused
   * condition of bound claims current.
   */
  unusedCondition?: boolean;
  /**
   * Shadow mode (src/shadow): a deletion candidate KCM released, or a claim whose Unused condition KCM
   * changed, before our worker saw it is still judged.
   */
  shadow?: boolean;
}

type PodUsage = (pod: V1Pod, pvc: V1PersistentVolumeClaim) => boolean;

/** One live pod list per namespace batch, made only if some claim there needs it (upstream LazyLivePodList). */
type LivePods = () => Promise<V1Pod[]>;

/**
 * The pvc-protection controller: removes kubernetes.io/pvc-protection from a claim being deleted
 * once no pod uses it, and adds the finalizer to claims that lack it (created before the admission
 * plugin was on). As upstream, one loop takes claim keys off a rate-limited queue and groups them by
 * namespace; workers handle a namespace's claims together.
 */
export class PVCProtectionController {
  readonly #core: PVCProtectionControllerOptions["clients"]["core"];
  readonly #pvcs: SharedInformer<V1PersistentVolumeClaim>;
  readonly #pods: SharedInformer<V1Pod>;
  readonly #queue: RateLimitingQueue;
  readonly #log: LogSink;
  readonly #workers: number;
  readonly #unusedCondition: boolean;
  readonly #unsynced: UnsyncedVersions<V1PersistentVolumeClaim> | undefined;

  /** Registers the informers, the pods-by-claim index and the handlers: call before the factory starts. */
  constructor(opts: PVCProtectionControllerOptions) {
    this.#core = opts.clients.core;
    this.#log = opts.logger;
    this.#workers = opts.workers ?? 1;
    this.#unusedCondition = opts.unusedCondition ?? true;
    this.#unsynced = opts.shadow ? new UnsyncedVersions() : undefined;
    this.#queue = newRateLimitingQueue({ name: "pvcprotection", clock: opts.clock, metrics: opts.metrics });
    this.#pvcs = opts.informers.persistentVolumeClaims();
    this.#pods = opts.informers.pods();
    addPodPVCIndexerIfNotPresent(this.#pods);
    this.#pvcs.addEventHandler({
      onAdd: (pvc) => {
        this.#pvcAddedUpdated(pvc);
      },
      onUpdate: (old, pvc) => {
        // Shadow mode: the version KCM released, or changed the Unused condition of, is judged too
        // (kvc's worker may only meet the next one, which already holds KCM's answer). Kept even when
        // synced already: the pods around it may have changed since.
        if (
          this.#unsynced &&
          (isDeletionCandidate(old, PVC_PROTECTION_FINALIZER) ||
            (this.#unusedCondition && unusedConditionValue(old) !== unusedConditionValue(pvc)))
        ) {
          this.#unsynced.keep(old);
          this.#queue.add(objectKey(old));
        }
        this.#pvcAddedUpdated(pvc);
      },
      onDelete: (pvc) => {
        // Deleted once KCM removed the finalizer: the deletion shows the version it removed it from.
        if (this.#unsynced && isDeletionCandidate(pvc, PVC_PROTECTION_FINALIZER)) {
          this.#unsynced.keep(pvc);
          this.#queue.add(objectKey(pvc));
        }
      },
    });
    this.#pods.addEventHandler({
      onAdd: (pod) => {
        this.#enqueuePVCs(pod, false);
      },
      onUpdate: (old, pod) => {
        this.#enqueuePVCs(pod, false);
        // An update may stand for a deleted pod and a new one of the same name: the old pod may have
        // blocked a claim the new one does not use.
        if (old.metadata?.uid !== pod.metadata?.uid) this.#enqueuePVCs(old, true);
      },
      onDelete: (pod) => {
        this.#enqueuePVCs(pod, true);
      },
    });
  }

  /** Waits for the caches, then works until `signal` is aborted; resolves once the workers have stopped. */
  async run(signal: AbortSignal): Promise<void> {
    this.#log.info({}, "Starting PVC protection controller");
    const stop = () => {
      this.#queue.shutDown();
    };
    signal.addEventListener("abort", stop, { once: true });
    try {
      const synced = await Promise.all([
        this.#pvcs.waitForCacheSync(signal),
        this.#pods.waitForCacheSync(signal),
      ]).then(
        () => true,
        () => false, // aborted
      );
      if (!synced) return;
      const batches = new NamespaceBatches();
      await Promise.all([
        this.#batchKeys(batches),
        runWorkers(
          batches.namespaces,
          this.#workers,
          (namespace) => this.#processNamespace(batches, namespace),
          signal,
          (namespace, err) => {
            this.#log.error({ err, namespace }, "processing PVCs of namespace failed");
          },
        ),
      ]);
    } finally {
      signal.removeEventListener("abort", stop);
      this.#queue.shutDown();
      this.#log.info({}, "Shutting down PVC protection controller");
    }
  }

  /** Moves keys from the queue into their namespace's batch; each stays "processing" until handled. */
  async #batchKeys(batches: NamespaceBatches): Promise<void> {
    for (let key = await this.#queue.get(); key !== undefined; key = await this.#queue.get()) {
      batches.add(key.slice(0, key.indexOf("/")), key);
    }
  }

  async #processNamespace(batches: NamespaceBatches, namespace: string): Promise<void> {
    let pods: V1Pod[] | undefined;
    const livePods: LivePods = async () =>
      (pods ??= (await this.#core.listNamespacedPod({ namespace })).items);
    for (const key of batches.take(namespace)) {
      try {
        await this.#processPVC(key, livePods);
        this.#queue.forget(key);
      } catch (err) {
        handleSyncError(this.#queue, this.#log, "PVC", key, err);
      } finally {
        this.#queue.done(key);
      }
    }
  }

  async #processPVC(key: string, livePods: LivePods): Promise<void> {
    for (const earlier of this.#unsynced?.take(key) ?? []) await this.#process(earlier, livePods);
    const pvc = this.#pvcs.store.get(key);
    if (!pvc) {
      this.#log.debug({ pvc: key }, "PVC not found, ignoring");
      return;
    }
    await this.#process(pvc, livePods);
  }

  async #process(pvc: V1PersistentVolumeClaim, livePods: LivePods): Promise<void> {
    // Only bound claims get the condition, so as not to race the PV controller's binding.
    if (this.#unusedCondition && !pvc.metadata?.deletionTimestamp && pvc.status?.phase === "Bound") {
      const user = await this.#podUsing(pvc, livePods, podUsesPVCForUnusedSince);
      pvc = await this.#updateUnusedCondition(pvc, user !== undefined);
    }
    if (isDeletionCandidate(pvc, PVC_PROTECTION_FINALIZER)) {
      const user = await this.#podUsing(pvc, livePods, podUsesPVCForDeletion);
      if (!user) {
        await this.#patchFinalizers(pvc, removeFinalizerPatch(pvc, PVC_PROTECTION_FINALIZER));
        this.#log.debug({ pvc: objectRef(pvc) }, "Removed protection finalizer from PVC");
        return;
      }
      this.#log.info({ pvc: objectRef(pvc), pod: objectRef(user) }, "Keeping PVC because it is being used");
    }
    if (needToAddFinalizer(pvc, PVC_PROTECTION_FINALIZER)) {
      await this.#patchFinalizers(pvc, addFinalizerPatch(pvc, PVC_PROTECTION_FINALIZER));
      this.#log.debug({ pvc: objectRef(pvc) }, "Added protection finalizer to PVC");
    }
  }

  /**
   * A pod using the claim: from the cache's index when it knows one, which settles it without a list;
   * otherwise from a live list, since a pod not yet in the cache may still use the claim.
   */
  async #podUsing(
    pvc: V1PersistentVolumeClaim,
    livePods: LivePods,
    uses: PodUsage,
  ): Promise<V1Pod | undefined> {
    const cached = this.#pods.store.byIndex(POD_PVC_INDEX, objectKey(pvc)).find((pod) => uses(pod, pvc));
    if (cached) return cached;
    this.#log.debug({ pvc: objectRef(pvc) }, "No pod using PVC in the cache; checking a live list");
    return (await livePods()).find((pod) => uses(pod, pvc));
  }

  /** Returns the claim as written, so a finalizer added next carries its new resourceVersion. */
  async #updateUnusedCondition(
    pvc: V1PersistentVolumeClaim,
    used: boolean,
  ): Promise<V1PersistentVolumeClaim> {
    const change = unusedConditionChange(pvc, used);
    if (!change) return pvc;
    const updated = await this.#core.patchNamespacedPersistentVolumeClaimStatus(
      {
        ...nameAndNamespace(pvc),
        body: {
          metadata: { resourceVersion: pvc.metadata?.resourceVersion },
          status: { conditions: withUnusedCondition(pvc, change, new Date()) },
        },
      },
      mergePatch,
    );
    this.#log.debug({ pvc: objectRef(pvc), status: change.status }, "Updated Unused condition in PVC status");
    return updated;
  }

  async #patchFinalizers(pvc: V1PersistentVolumeClaim, body: object): Promise<void> {
    await this.#core.patchNamespacedPersistentVolumeClaim({ ...nameAndNamespace(pvc), body }, mergePatch);
  }

  #pvcAddedUpdated(pvc: V1PersistentVolumeClaim): void {
    if (
      (this.#unusedCondition && !findUnusedCondition(pvc)) ||
      needToAddFinalizer(pvc, PVC_PROTECTION_FINALIZER) ||
      isDeletionCandidate(pvc, PVC_PROTECTION_FINALIZER)
    )
      this.#queue.add(objectKey(pvc));
  }

  #enqueuePVCs(pod: V1Pod, deleted: boolean): void {
    // Without the Unused condition only events that may release a claim matter: a deletion, a
    // termination, or an unscheduled pod (which never holds one).
    if (!this.#unusedCondition && !deleted && !isPodTerminated(pod) && pod.spec?.nodeName) return;
    for (const key of podPVCKeys(pod)) this.#queue.add(key);
  }
}

function nameAndNamespace(pvc: V1PersistentVolumeClaim): { name: string; namespace: string } {
  return { name: pvc.metadata?.name ?? "", namespace: pvc.metadata?.namespace ?? "" };
}
