import { CoordinationV1Api, CoreV1Api, type KubeConfig } from "@kubernetes/client-node";
import { InformerFactory } from "../../src/runtime/informer/index.js";
import type { SharedInformer } from "../../src/runtime/informer/shared-informer.js";
import type { LogSink } from "../../src/runtime/logger.js";
import { realClock } from "../../src/runtime/clock.js";
import { until } from "../../src/util/wait.js";
import {
  keyOf,
  type Kind,
  type LeaseTerm,
  type ObjectKinds,
  type Observation,
  type World,
} from "./history.js";
import type { Explanation } from "./invariants.js";

/**
 * Records what the chaos run's invariants read: every state of the volume objects as its own watches
 * deliver them (the informers relist after a cut or a 410 Gone, as kvc's do), and the Lease's terms.
 * Its stores are also the stand-in kubelet's and provisioner's view of the cluster.
 */
export class Recorder {
  readonly observations: Observation[] = [];
  readonly terms: LeaseTerm[] = [];
  readonly world: World;
  readonly #listeners = new Set<(o: Observation) => void>();
  readonly #informers: InformerFactory;
  readonly #coordination: CoordinationV1Api;
  readonly #core: CoreV1Api;

  constructor(
    kubeConfig: KubeConfig,
    log: LogSink,
    readonly lease: { namespace: string; name: string },
  ) {
    this.#informers = new InformerFactory({ kubeConfig, logger: log });
    this.#coordination = kubeConfig.makeApiClient(CoordinationV1Api);
    this.#core = kubeConfig.makeApiClient(CoreV1Api);
    const f = this.#informers;
    this.world = {
      PersistentVolume: this.#record("PersistentVolume", f.persistentVolumes()),
      PersistentVolumeClaim: this.#record("PersistentVolumeClaim", f.persistentVolumeClaims()),
      VolumeAttachment: this.#record("VolumeAttachment", f.volumeAttachments()),
      Node: this.#record("Node", f.nodes()),
      Pod: this.#record("Pod", f.pods()),
    };
  }

  /** Runs the informers and the Lease poll until `signal` aborts; resolves once the caches synced. */
  async start(signal: AbortSignal): Promise<void> {
    const running = this.#informers.start(signal);
    void running.catch(() => {});
    void this.#pollLease(signal);
    await this.#informers.waitForCacheSync(signal);
  }

  /** The current holder of the Lease, as last polled. */
  get holder(): string | undefined {
    return this.terms.at(-1)?.holder;
  }

  /** The events that explain a waiting claim or volume (by uid and reason). */
  async explanations(): Promise<Explanation[]> {
    const events = await this.#core.listEventForAllNamespaces();
    return events.items.map((e) => ({ uid: e.involvedObject.uid ?? "", reason: e.reason ?? "" }));
  }

  /** Calls `listener` with each state the watches deliver, once the world holds it, until the return is called. */
  subscribe(listener: (o: Observation) => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /** A copy of the world as the watches last saw it. */
  snapshot(): World {
    const w = this.world;
    return {
      PersistentVolume: new Map(w.PersistentVolume),
      PersistentVolumeClaim: new Map(w.PersistentVolumeClaim),
      VolumeAttachment: new Map(w.VolumeAttachment),
      Node: new Map(w.Node),
      Pod: new Map(w.Pod),
    };
  }

  #record<K extends Kind>(kind: K, informer: SharedInformer<ObjectKinds[K]>): Map<string, ObjectKinds[K]> {
    const map = new Map<string, ObjectKinds[K]>();
    const push = (object: ObjectKinds[K], deleted: boolean) => {
      const rv = Number(object.metadata?.resourceVersion);
      const o = { kind, rv, at: Date.now(), object, deleted } as Observation;
      this.observations.push(o);
      if (deleted) map.delete(keyOf(object));
      else map.set(keyOf(object), object);
      for (const l of this.#listeners) l(o);
    };
    informer.addEventHandler({
      onAdd: (o) => {
        push(o, false);
      },
      onUpdate: (_, o) => {
        push(o, false);
      },
      onDelete: (o) => {
        push(o, true);
      },
    });
    return map;
  }

  async #pollLease(signal: AbortSignal): Promise<void> {
    await until(
      async () => {
        try {
          const l = await this.#coordination.readNamespacedLease(this.lease);
          const holder = l.spec?.holderIdentity ?? "";
          const acquiredAt = new Date(l.spec?.acquireTime ?? 0).getTime();
          const last = this.terms.at(-1);
          if (holder && (last?.holder !== holder || last.acquiredAt !== acquiredAt)) {
            this.terms.push({ holder, acquiredAt });
          }
        } catch {
          // Not created yet, or the apiserver is down (a fault): the next poll tells.
        }
      },
      100,
      { clock: realClock, signal },
    );
  }
}
