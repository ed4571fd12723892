import {
  CoreV1Api,
  StorageV1Api,
  type KubeConfig,
  type V1PersistentVolumeClaim,
  type V1Pod,
  type V1StorageClass,
} from "@kubernetes/client-node";
import { isNotFound } from "../../src/runtime/api-errors.js";
import type { World } from "./history.js";
import { TOUCHED } from "./invariants.js";
import { PROVISIONER } from "./stand-ins.js";
import { mergePatch, strategicMergePatch } from "../../src/runtime/client.js";

/*
 * The seeded generator: it keeps creating and deleting PVs of every reclaim policy, claims of every
 * kind (static, WaitForFirstConsumer, provisioned by the hostPath plugin and by the stand-in external
 * provisioner) and pods with attachable CSI volumes that move between nodes. Each step picks from
 * what the recorder's caches show, so a run with one seed makes the same kinds of choices.
 */

export const NAMESPACE = "default";
const CLASSES = {
  static: { provisioner: "kubernetes.io/no-provisioner", volumeBindingMode: "Immediate" },
  hostpath: { provisioner: "kubernetes.io/host-path", volumeBindingMode: "Immediate" },
  csi: { provisioner: PROVISIONER, volumeBindingMode: "Immediate" },
  "csi-wffc": { provisioner: PROVISIONER, volumeBindingMode: "WaitForFirstConsumer" },
} as const;
const POLICIES = ["Retain", "Delete", "Recycle"] as const;

/** The storage classes the workload creates, by name (the settled check's matcher oracle reads them). */
export function storageClasses(): Map<string, V1StorageClass> {
  return new Map(
    Object.entries(CLASSES).map(([name, c]) => [
      `chaos-${name}`,
      { metadata: { name: `chaos-${name}` }, ...c, reclaimPolicy: "Delete" },
    ]),
  );
}

export interface WorkloadOptions {
  claims: number;
  /** Pods alive at most at once. */
  pods: number;
  /** Pod moves (deleted on one node, recreated on another with the same claim). */
  moves: number;
  nodes: number;
  random: () => number;
}

export class Workload {
  claimsCreated = 0;
  movesDone = 0;
  readonly #core: CoreV1Api;
  readonly #storage: StorageV1Api;
  readonly #nodes: string[];
  #serial = 0;
  readonly #pods = new Map<string, { claim: string; node: string }>();

  constructor(
    kc: KubeConfig,
    readonly world: World,
    readonly o: WorkloadOptions,
  ) {
    this.#core = kc.makeApiClient(CoreV1Api);
    this.#storage = kc.makeApiClient(StorageV1Api);
    this.#nodes = Array.from({ length: o.nodes }, (_, i) => `chaos-node-${i}`);
  }

  get done(): boolean {
    return this.claimsCreated >= this.o.claims && this.movesDone >= this.o.moves;
  }

  /** Storage classes and Ready nodes whose volumes the attach/detach controller manages. */
  async setup(): Promise<void> {
    for (const body of storageClasses().values()) await this.#storage.createStorageClass({ body });
    for (const name of this.#nodes) {
      await this.#core.createNode({
        body: {
          metadata: {
            name,
            annotations: { "volumes.kubernetes.io/controller-managed-attach-detach": "true" },
          },
        },
      });
      await this.#core.patchNodeStatus(
        { name, body: { status: { conditions: [{ type: "Ready", status: "True", reason: "Chaos" }] } } },
        strategicMergePatch,
      );
    }
  }

  /** One random step; what it did, for the log. */
  async step(): Promise<string> {
    const r = this.o.random();
    const pods = this.#ownPods();
    if (this.claimsCreated < this.o.claims && r < 0.45) return this.#createClaim();
    if (r < 0.6) {
      const free = this.#freeCsiClaims();
      if (pods.length < this.o.pods && free.length > 0)
        return this.#createPod(this.#pick(free), this.#pick(this.#nodes));
    }
    if (r < 0.8 && pods.length > 0 && this.movesDone < this.o.moves) return this.#movePod(this.#pick(pods));
    if (r < 0.85 && pods.length > 0) return this.#deletePod(this.#pick(pods));
    if (r < 0.95) {
      const idle = [...this.world.PersistentVolumeClaim.values()].filter(
        (c) =>
          c.metadata?.name?.startsWith("chaos-") &&
          !c.metadata.deletionTimestamp &&
          !this.#usedBy(c.metadata.name),
      );
      if (idle.length > 0) return this.#deleteClaim(this.#pick(idle));
    }
    const retained = [...this.world.PersistentVolume.values()].filter(
      (pv) =>
        pv.metadata?.name?.startsWith("chaos-") &&
        ["Released", "Available"].includes(pv.status?.phase ?? "") &&
        pv.spec?.persistentVolumeReclaimPolicy === "Retain",
    );
    if (retained.length > 0) {
      const name = this.#pick(retained).metadata?.name ?? "";
      await this.#core.deletePersistentVolume({ name });
      return `delete retained PV ${name}`;
    }
    return this.claimsCreated < this.o.claims ? this.#createClaim() : "nothing";
  }

  /**
   * A step that starts the work a targeted kill waits for, while the workload has some left: a new
   * claim (a bind); a pod created, or moved (an attach). Else a random step.
   */
  async stepToward(work: "bind" | "attach"): Promise<string> {
    if (work === "bind" && this.claimsCreated < this.o.claims) return this.#createClaim();
    if (work === "attach") {
      // A new pod before a move: moves are few, and the other rounds need some.
      const pods = this.#ownPods();
      const free = this.#freeCsiClaims();
      if (pods.length < this.o.pods && free.length > 0)
        return this.#createPod(this.#pick(free), this.#pick(this.#nodes));
      if (pods.length > 0 && this.movesDone < this.o.moves) return this.#movePod(this.#pick(pods));
    }
    return this.step();
  }

  #pick<T>(xs: readonly T[]): T {
    return xs[Math.floor(this.o.random() * xs.length)]!;
  }

  /** The live pods it made. Its own record, not the watch cache: a pod just created may not be there yet. */
  #ownPods(): V1Pod[] {
    return [...this.#pods.entries()].map(([name, { claim, node }]) => ({
      metadata: { name },
      spec: {
        nodeName: node,
        containers: [],
        volumes: [{ name: "data", persistentVolumeClaim: { claimName: claim } }],
      },
    }));
  }

  #usedBy(claim: string): boolean {
    return [...this.#pods.values()].some((p) => p.claim === claim);
  }

  /** Bound CSI claims no pod of its uses: a pod for one needs an attach. */
  #freeCsiClaims(): V1PersistentVolumeClaim[] {
    return this.#boundCsiClaims().filter((c) => !this.#usedBy(c.metadata?.name ?? ""));
  }

  #boundCsiClaims(): V1PersistentVolumeClaim[] {
    return [...this.world.PersistentVolumeClaim.values()].filter(
      (c) =>
        c.status?.phase === "Bound" &&
        !c.metadata?.deletionTimestamp &&
        this.world.PersistentVolume.get(c.spec?.volumeName ?? "")?.spec?.csi !== undefined,
    );
  }

  async #createClaim(): Promise<string> {
    const n = ++this.#serial;
    const name = `chaos-${n}`;
    const kind = this.#pick([
      "static",
      "static",
      "hostpath",
      "csi",
      "csi",
      "csi-wffc",
      "wffc-unscheduled",
    ] as const);
    const cls = kind === "wffc-unscheduled" ? "csi-wffc" : kind;
    const annotations: Record<string, string> = {};
    if (kind === "csi-wffc") annotations["volume.kubernetes.io/selected-node"] = this.#pick(this.#nodes);
    if (kind === "static") {
      const policy = this.#pick(POLICIES);
      await this.#core.createPersistentVolume({
        body: {
          metadata: { name },
          spec: {
            capacity: { storage: "1Gi" },
            accessModes: ["ReadWriteOnce"],
            storageClassName: "chaos-static",
            persistentVolumeReclaimPolicy: policy,
            hostPath: { path: `/tmp/kvc-chaos/${name}` },
          },
        },
      });
    }
    await this.#core.createNamespacedPersistentVolumeClaim({
      namespace: NAMESPACE,
      body: {
        metadata: { name, annotations },
        spec: {
          accessModes: ["ReadWriteOnce"],
          storageClassName: `chaos-${cls}`,
          resources: { requests: { storage: "1Gi" } },
        },
      },
    });
    this.claimsCreated++;
    return `create ${kind} claim ${name}`;
  }

  async #createPod(claim: V1PersistentVolumeClaim, node: string): Promise<string> {
    const name = `chaos-pod-${++this.#serial}`;
    const claimName = claim.metadata?.name ?? "";
    // Recorded first: a create that failed on the client may still have happened (a fault mid-request),
    // and a claim must never get a second pod on another node.
    this.#pods.set(name, { claim: claimName, node });
    await this.#core.createNamespacedPod({
      namespace: NAMESPACE,
      body: {
        metadata: { name },
        spec: {
          nodeName: node,
          containers: [{ name: "c", image: "registry.k8s.io/pause:3.10" }],
          volumes: [{ name: "data", persistentVolumeClaim: { claimName } }],
        },
      },
    });
    return `create pod ${name} on ${node} with ${claimName}`;
  }

  async #deletePod(pod: V1Pod): Promise<string> {
    const name = pod.metadata?.name ?? "";
    try {
      await this.#core.deleteNamespacedPod({ namespace: NAMESPACE, name, gracePeriodSeconds: 0 });
    } catch (err) {
      if (!isNotFound(err)) throw err;
    }
    this.#pods.delete(name);
    return `delete pod ${name}`;
  }

  async #movePod(pod: V1Pod): Promise<string> {
    const claim = pod.spec?.volumes?.[0]?.persistentVolumeClaim?.claimName ?? "";
    const from = pod.spec?.nodeName ?? "";
    await this.#deletePod(pod);
    const c = this.world.PersistentVolumeClaim.get(`${NAMESPACE}/${claim}`);
    if (!c) return `delete pod ${pod.metadata?.name} (its claim is gone)`;
    this.movesDone++;
    const to = this.#pick(this.#nodes.filter((n) => n !== from));
    return `move: ${await this.#createPod(c, to)} (from ${from})`;
  }

  async #deleteClaim(c: V1PersistentVolumeClaim): Promise<string> {
    const name = c.metadata?.name ?? "";
    await this.#core.deleteNamespacedPersistentVolumeClaim({ namespace: NAMESPACE, name });
    return `delete claim ${name}`;
  }

  /** A second writer (409s for kvc): marks a random claim or PV, with the resourceVersion it saw. */
  async touch(): Promise<void> {
    const claims = [...this.world.PersistentVolumeClaim.values()];
    const pvs = [...this.world.PersistentVolume.values()];
    const body = { metadata: { annotations: { [TOUCHED]: String(++this.#serial) } } };
    if (this.o.random() < 0.5 && claims.length > 0) {
      const c = this.#pick(claims);
      await this.#core.patchNamespacedPersistentVolumeClaim(
        {
          namespace: NAMESPACE,
          name: c.metadata?.name ?? "",
          body: { ...body, metadata: { ...body.metadata, resourceVersion: c.metadata?.resourceVersion } },
        },
        mergePatch,
      );
    } else if (pvs.length > 0) {
      const pv = this.#pick(pvs);
      await this.#core.patchPersistentVolume(
        {
          name: pv.metadata?.name ?? "",
          body: { ...body, metadata: { ...body.metadata, resourceVersion: pv.metadata?.resourceVersion } },
        },
        mergePatch,
      );
    }
  }
}
