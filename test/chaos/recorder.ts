import type { IncomingMessage } from "node:http";
import { request } from "node:https";
import { createInterface } from "node:readline";
import { setTimeout as sleep } from "node:timers/promises";
import { probe } from "../../src/controlplane/https-probe.js";
import {
  emptyWorld,
  keyOf,
  type Kind,
  type LeaseTerm,
  type ObjectKinds,
  type Observation,
  type World,
} from "./history.js";
import type { Explanation } from "./invariants.js";

/**
 * Records what the chaos run's invariants read: every state of the volume objects, from watches of
 * its own written here against the apiserver's HTTP API (no informer, and nothing of kvc's: a bug of
 * kvc's informers cannot hide what it shows), and the Lease's terms. A watch that ends resumes from
 * the last resourceVersion it delivered (bookmarks keep that recent), so no state between is
 * skipped. Only a 410 Gone (that resourceVersion compacted away, or older than a restarted
 * apiserver's watch cache) makes it list again: then the states between the last one seen and the
 * list are gone from the apiserver; the list's changed objects are recorded, objects missing from it
 * recorded as deleted right after their last state seen (the earliest they can have gone, so a check
 * never sees an overlap the gap made up), and the gap is counted (`gaps`). Its world is also the
 * stand-in kubelet's and provisioner's view of the cluster.
 */
export class Recorder {
  readonly observations: Observation[] = [];
  readonly terms: LeaseTerm[] = [];
  readonly world: World = emptyWorld();
  /**
   * Relists after a 410 Gone: the states of `kind` between `fromRv` and `toRv` were not seen;
   * `changed` objects differ from their last state seen (none: nothing was lost).
   */
  readonly gaps: { kind: Kind; fromRv: number; toRv: number; at: number; changed: number }[] = [];
  /** Watches resumed from the last resourceVersion delivered after a stream ended (a timeout, a cut, a failure). */
  resumes = 0;
  readonly #listeners = new Set<(o: Observation) => void>();
  readonly #lastRv = new Map<Kind, number>();

  constructor(
    readonly api: ApiAccess,
    readonly lease: { namespace: string; name: string },
  ) {}

  /** Runs the watches and the Lease poll until `signal` aborts; resolves once every kind was listed. */
  async start(signal: AbortSignal): Promise<void> {
    const listed = (Object.keys(PATHS) as Kind[]).map((kind) => this.#run(kind, signal));
    void this.#pollLease(signal);
    await Promise.all(listed.map((l) => l.listed));
  }

  /** The current holder of the Lease, as last polled. */
  get holder(): string | undefined {
    return this.terms.at(-1)?.holder;
  }

  /** The Lease as the apiserver has it now (not as last polled), or undefined without one. */
  async readLease(): Promise<LeaseState | undefined> {
    const { namespace, name } = this.lease;
    const res = await probe(
      `${this.api.server}/apis/coordination.k8s.io/v1/namespaces/${namespace}/leases/${name}`,
      this.#probeOptions(),
    );
    if (res.status !== 200) return undefined;
    const spec = (JSON.parse(res.body) as { spec?: LeaseSpec }).spec ?? {};
    if (!spec.holderIdentity) return undefined;
    return {
      holder: spec.holderIdentity,
      acquiredAt: Date.parse(spec.acquireTime ?? "") || 0,
      renewedAt: Date.parse(spec.renewTime ?? "") || 0,
      durationMs: (spec.leaseDurationSeconds ?? 0) * 1000,
    };
  }

  /** The events that explain a waiting claim or volume (by uid and reason). */
  async explanations(): Promise<Explanation[]> {
    const list = await this.#getJson<{ items: { involvedObject: { uid?: string }; reason?: string }[] }>(
      "/api/v1/events",
    );
    return list.items.map((e) => ({ uid: e.involvedObject.uid ?? "", reason: e.reason ?? "" }));
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

  /** List, then watch from the list's resourceVersion, resuming or relisting until `signal` aborts. */
  #run(kind: Kind, signal: AbortSignal): { listed: Promise<void> } {
    let resolveListed!: () => void;
    const listed = new Promise<void>((resolve) => (resolveListed = resolve));
    const loop = async () => {
      let listed = false;
      /** Whether the next watch answered is the first after a list (not a resumption). */
      let fresh = true;
      const answered = () => {
        if (!fresh) this.resumes++;
        fresh = false;
      };
      while (!signal.aborted) {
        try {
          if (!listed) {
            await this.#list(kind);
            listed = true;
            fresh = true;
            resolveListed();
          }
          // From the last resourceVersion delivered, also when the previous stream failed midway.
          const rv = String(this.#lastRv.get(kind));
          if ((await this.#watch(kind, rv, signal, answered)) === "gone") listed = false;
        } catch {
          // The apiserver is restarting, or the request was aborted: try again shortly.
          await sleep(200, undefined, { signal }).catch(() => {});
        }
      }
    };
    void loop();
    return { listed };
  }

  /**
   * Lists `kind` and records what changed since the last state seen (all of it, the first time);
   * an object the list lacks is recorded deleted. Watches resume from the list's resourceVersion.
   */
  async #list(kind: Kind): Promise<void> {
    const list = await this.#getJson<{ metadata: { resourceVersion: string }; items: ObjectKinds[Kind][] }>(
      PATHS[kind],
    );
    const map = this.world[kind] as Map<string, ObjectKinds[Kind]>;
    const lastRv = this.#lastRv.get(kind);
    const changes = relistChanges(map, list.items);
    if (lastRv !== undefined) {
      const toRv = Number(list.metadata.resourceVersion);
      this.gaps.push({ kind, fromRv: lastRv, toRv, at: Date.now(), changed: changes.length });
    }
    for (const c of changes) this.#push(kind, c.object, c.deleted);
    this.#lastRv.set(kind, Number(list.metadata.resourceVersion));
  }

  /** One watch stream from `rv`, until it ends, or "gone" (410: relist); `answered` once it streams. */
  async #watch(kind: Kind, rv: string, signal: AbortSignal, answered: () => void): Promise<"ended" | "gone"> {
    const res = await this.#get(
      `${PATHS[kind]}?watch=1&allowWatchBookmarks=true&timeoutSeconds=300&resourceVersion=${rv}`,
      signal,
    );
    if (res.statusCode === 410) {
      res.resume();
      return "gone";
    }
    if (res.statusCode !== 200) {
      res.resume();
      throw new Error(`watch ${kind}: HTTP ${res.statusCode}`);
    }
    answered();
    for await (const line of createInterface({ input: res })) {
      if (line.trim() === "") continue;
      const event = JSON.parse(line) as {
        type: string;
        object: ObjectKinds[Kind] & { code?: number };
      };
      if (event.type === "ERROR") {
        if (event.object.code === 410) return "gone";
        throw new Error(`watch ${kind}: ${line}`);
      }
      this.#lastRv.set(kind, Number(event.object.metadata?.resourceVersion));
      if (event.type === "BOOKMARK") continue;
      this.#push(kind, event.object, event.type === "DELETED");
    }
    return "ended";
  }

  #push(kind: Kind, object: ObjectKinds[Kind], deleted: boolean): void {
    const o = {
      kind,
      rv: Number(object.metadata?.resourceVersion),
      at: Date.now(),
      object,
      deleted,
    } as Observation;
    this.observations.push(o);
    const map = this.world[kind] as Map<string, ObjectKinds[Kind]>;
    if (deleted) map.delete(keyOf(object));
    else map.set(keyOf(object), object);
    for (const l of this.#listeners) l(o);
  }

  async #pollLease(signal: AbortSignal): Promise<void> {
    while (!signal.aborted) {
      try {
        const l = await this.readLease();
        const last = this.terms.at(-1);
        if (l && (last?.holder !== l.holder || last.acquiredAt !== l.acquiredAt)) {
          this.terms.push({ holder: l.holder, acquiredAt: l.acquiredAt });
        }
      } catch {
        // The apiserver is down (a fault): the next poll tells.
      }
      await sleep(100, undefined, { signal }).catch(() => {});
    }
  }

  #probeOptions() {
    return { ca: this.api.ca, token: this.api.token, timeoutMs: 30_000 };
  }

  async #getJson<T>(path: string): Promise<T> {
    const res = await probe(`${this.api.server}${path}`, this.#probeOptions());
    if (res.status !== 200) throw new Error(`GET ${path}: HTTP ${res.status}: ${res.body.slice(0, 200)}`);
    return JSON.parse(res.body) as T;
  }

  #get(path: string, signal: AbortSignal): Promise<IncomingMessage> {
    return new Promise((resolve, reject) => {
      const req = request(
        new URL(path, this.api.server),
        { ca: this.api.ca, headers: { authorization: `Bearer ${this.api.token}` }, signal },
        resolve,
      );
      req.on("error", reject);
      req.end();
    });
  }
}

/**
 * What a list shows that the last states seen do not: each object gone (or replaced by one of the
 * same name and another uid) as deleted with its last state seen, then each new or changed one.
 */
export function relistChanges<
  T extends { metadata?: { namespace?: string; name?: string; uid?: string; resourceVersion?: string } },
>(seen: ReadonlyMap<string, T>, listed: readonly T[]): { object: T; deleted: boolean }[] {
  const byKey = new Map(listed.map((o) => [keyOf(o), o]));
  const out: { object: T; deleted: boolean }[] = [];
  for (const [key, was] of seen) {
    const now = byKey.get(key);
    if (!now || now.metadata?.uid !== was.metadata?.uid) out.push({ object: was, deleted: true });
  }
  for (const o of listed) {
    const was = seen.get(keyOf(o));
    if (
      was?.metadata?.uid !== o.metadata?.uid ||
      was?.metadata?.resourceVersion !== o.metadata?.resourceVersion
    )
      out.push({ object: o, deleted: false });
  }
  return out;
}

/** How the recorder reaches the apiserver: its URL, CA bundle (PEM) and a bearer token. */
export interface ApiAccess {
  server: string;
  ca: string;
  token: string;
}

/** The Lease's holder and times (epoch ms; one machine, one clock). */
export interface LeaseState {
  holder: string;
  acquiredAt: number;
  renewedAt: number;
  durationMs: number;
}

interface LeaseSpec {
  holderIdentity?: string;
  acquireTime?: string;
  renewTime?: string;
  leaseDurationSeconds?: number;
}

const PATHS: Record<Kind, string> = {
  PersistentVolume: "/api/v1/persistentvolumes",
  PersistentVolumeClaim: "/api/v1/persistentvolumeclaims",
  VolumeAttachment: "/apis/storage.k8s.io/v1/volumeattachments",
  Node: "/api/v1/nodes",
  Pod: "/api/v1/pods",
};
