import {
  CoreV1Api,
  CoreV1Event,
  KubernetesObjectApi,
  PatchStrategy,
  setHeaderOptions,
  StorageV1Api,
  type KubernetesObject,
} from "@kubernetes/client-node";
import { copyFile, mkdir, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { LocalControlPlane } from "../../src/controlplane/local-control-plane.js";
import { isNotFound } from "../../src/runtime/api-errors.js";
import { waitFor } from "../../src/util/wait.js";
import { startKvc } from "../support/kvc-process.js";

/**
 * Runs conformance scenarios against one implementation of the volume loops (upstream
 * kube-controller-manager or kvc) on its own embedded control plane, and returns a normalised snapshot
 * of each scenario's outcome for comparison. Scenarios run one after another on that control plane;
 * each gets its own namespace, and everything it created is removed before the next starts.
 */

export type Implementation = "kube-controller-manager" | "kvc";

/** The loops compared, with KCM's names; both run with the same flags. */
export const CONTROLLERS = [
  "persistentvolume-binder-controller",
  "persistentvolume-attach-detach-controller",
  "persistentvolumeclaim-protection-controller",
  "persistentvolume-protection-controller",
];
const FLEX_FIXTURE = fileURLToPath(new URL("../fixtures/flexvolume/fake-driver.sh", import.meta.url));
const FLAGS = ["--pvclaimbinder-sync-period=1s", "--enable-hostpath-provisioner"];

export type Step =
  /** Creates objects; namespaced ones go to the scenario's namespace. */
  | { create: KubernetesObject[] }
  | { delete: { kind: string; name: string } }
  /** A merge patch of an object (status with `status: true`). */
  | { patch: { kind: string; name: string; body: object; status?: boolean } }
  /** Plays the kubelet: the node's volumesInUse (unique volume names), Ready condition, out-of-service taint. */
  | { kubelet: { node: string; volumesInUse?: string[]; ready?: boolean; outOfService?: boolean } }
  /** Plays the kubelet running the PV's recycler pod (default/recycler-for-<pv>): waits for it, sets its phase. */
  | { recyclerPod: { pv: string; phase: "Succeeded" | "Failed" } }
  /** Installs test/fixtures/flexvolume/fake-driver.sh as `<directory>/<driver>` with its `.mode`. */
  | { flexDriver: { directory: string; mode: string } }
  /** Plays the CSI external-attacher: every VolumeAttachment is marked attached. */
  | { attachAll: true }
  /** Plays an external provisioner: creates a PV for the claim, bound by claimRef, as external-provisioner does. */
  | { provision: { claim: string; pv: object } }
  /** Waits until the compared state stops changing. */
  | { settle: true }
  /** Stops the implementation and starts it again. */
  | { restart: true };

export interface Scenario {
  name: string;
  steps: Step[];
  /** A deliberate difference from upstream: the scenario is run but not compared, and says why. */
  differs?: string;
}

/** What is compared: the scenario's objects, normalised. */
export type Snapshot = Record<string, unknown>;

const mergePatch = setHeaderOptions("Content-Type", PatchStrategy.MergePatch);
const strategicPatch = setHeaderOptions("Content-Type", PatchStrategy.StrategicMergePatch);

/** Annotations the loops write; others (the test's own) are left out of the comparison. */
const COMPARED_ANNOTATIONS = [
  "pv.kubernetes.io/bind-completed",
  "pv.kubernetes.io/bound-by-controller",
  "pv.kubernetes.io/provisioned-by",
  "volume.kubernetes.io/storage-provisioner",
  "volume.beta.kubernetes.io/storage-provisioner",
  "volume.kubernetes.io/selected-node",
];

interface Running {
  stop(): Promise<void>;
}

export class ConformanceRunner {
  readonly #impl: Implementation;
  #cp!: LocalControlPlane;
  #running: Running | undefined;
  #core!: CoreV1Api;
  #storage!: StorageV1Api;
  #objects!: KubernetesObjectApi;
  #seq = 0;

  constructor(impl: Implementation) {
    this.#impl = impl;
  }

  async start(): Promise<void> {
    this.#cp = await LocalControlPlane.start();
    const kc = this.#cp.kubeConfig();
    this.#core = kc.makeApiClient(CoreV1Api);
    this.#storage = kc.makeApiClient(StorageV1Api);
    this.#objects = KubernetesObjectApi.makeApiClient(kc);
    this.#running = await this.#startImplementation();
  }

  async stop(): Promise<void> {
    await this.#running?.stop();
    await this.#cp.stop();
  }

  /** Each implementation's own FlexVolume plugin directory, where `flexDriver` installs drivers. */
  get #flexDir(): string {
    return `${this.#cp.dir}/flexvolume`;
  }

  async #startImplementation(): Promise<Running> {
    if (this.#impl === "kube-controller-manager") {
      const kcm = await this.#cp.startKubeControllerManager({
        controllers: CONTROLLERS,
        args: [...FLAGS, `--flex-volume-plugin-dir=${this.#flexDir}`],
      });
      return { stop: () => kcm.stop() };
    }
    const kvc = await startKvc(this.#cp.kubeconfigPath, [
      "--leader-elect=false",
      `--controllers=${CONTROLLERS.join(",")}`,
      `--flex-volume-plugin-dir=${this.#flexDir}`,
      ...FLAGS,
    ]);
    await kvc.ready();
    return {
      stop: async () => {
        kvc.child.kill("SIGTERM");
        await kvc.exited;
      },
    };
  }

  /** Runs the scenario and returns its settled, normalised outcome; cleans up after it. */
  async run(scenario: Scenario): Promise<Snapshot> {
    const ns = `c${++this.#seq}`;
    await this.#core.createNamespace({ body: { metadata: { name: ns } } });
    try {
      for (const step of scenario.steps) await this.#step(step, ns);
      await this.#settle(ns);
      return await this.#snapshot(ns);
    } finally {
      await this.#cleanup(ns);
    }
  }

  async #step(step: Step, ns: string): Promise<void> {
    if ("create" in step) {
      // PVs first, each until its controller has initialised it (Pending → Available or Bound): a claim
      // racing a PV created a moment before it is decided by scheduling in either implementation.
      const pvs = step.create.filter((o) => o.kind === "PersistentVolume");
      const ordered = [...pvs, ...step.create.filter((o) => o.kind !== "PersistentVolume")];
      for (const [i, obj] of ordered.entries()) {
        if (i === pvs.length && pvs.length > 0) {
          await waitFor(
            async () => {
              const phases = await Promise.all(
                pvs.map(
                  async (p) =>
                    (await this.#core.readPersistentVolume({ name: p.metadata!.name! })).status?.phase,
                ),
              );
              return phases.every((ph) => ph !== undefined && ph !== "Pending");
            },
            { timeoutMs: 30_000, what: `${this.#impl}: the new PVs to be initialised` },
          );
        }
        const body = structuredClone(obj) as KubernetesObject & {
          spec?: { claimRef?: { namespace?: string } };
        };
        if (isNamespaced(body.kind)) body.metadata = { ...body.metadata, namespace: ns };
        if (body.spec?.claimRef?.namespace === "NS") body.spec.claimRef.namespace = ns;
        await this.#objects.create(body);
      }
    } else if ("delete" in step) {
      const { kind, name } = step.delete;
      await this.#objects.delete(ref(kind, name, ns), undefined, undefined, 0);
    } else if ("patch" in step) {
      const { kind, name, body, status } = step.patch;
      if (status && kind === "PersistentVolumeClaim") {
        await this.#core.patchNamespacedPersistentVolumeClaimStatus(
          { namespace: ns, name, body },
          mergePatch,
        );
      } else {
        await this.#objects.patch(
          { ...ref(kind, name, ns), ...body },
          undefined,
          undefined,
          undefined,
          undefined,
          PatchStrategy.MergePatch,
        );
      }
    } else if ("kubelet" in step) {
      const { node, volumesInUse, ready, outOfService } = step.kubelet;
      const status: Record<string, unknown> = {};
      if (volumesInUse) status.volumesInUse = volumesInUse.length ? volumesInUse : null;
      if (ready !== undefined) {
        status.conditions = [
          { type: "Ready", status: ready ? "True" : "False", reason: "Conformance", message: "" },
        ];
      }
      if (Object.keys(status).length)
        await this.#core.patchNodeStatus({ name: node, body: { status } }, strategicPatch);
      if (outOfService !== undefined) {
        const taints = outOfService
          ? [{ key: "node.kubernetes.io/out-of-service", value: "nodeshutdown", effect: "NoExecute" }]
          : null;
        await this.#core.patchNode({ name: node, body: { spec: { taints } } }, mergePatch);
      }
    } else if ("recyclerPod" in step) {
      const name = `recycler-for-${step.recyclerPod.pv}`;
      await waitFor(
        () =>
          this.#core.readNamespacedPod({ namespace: "default", name }).then(
            () => true,
            (err: unknown) => {
              if (isNotFound(err)) return false;
              throw err;
            },
          ),
        { timeoutMs: 60_000, what: `${this.#impl}: recycler pod ${name}` },
      );
      await this.#core.patchNamespacedPodStatus(
        { namespace: "default", name, body: { status: { phase: step.recyclerPod.phase } } },
        mergePatch,
      );
    } else if ("flexDriver" in step) {
      const { directory, mode } = step.flexDriver;
      const driverDir = join(this.#flexDir, directory);
      await mkdir(driverDir, { recursive: true });
      await writeFile(join(driverDir, ".mode"), mode);
      // Executable last: the prober looks at the driver when its executable appears.
      await copyFile(FLEX_FIXTURE, join(driverDir, directory.slice(directory.indexOf("~") + 1)));
    } else if ("attachAll" in step) {
      await this.#settle(ns);
      for (const va of (await this.#storage.listVolumeAttachment()).items) {
        if (va.status?.attached) continue;
        await this.#storage.patchVolumeAttachmentStatus(
          { name: va.metadata!.name!, body: { status: { attached: true } } },
          mergePatch,
        );
      }
    } else if ("provision" in step) {
      await this.#settle(ns);
      const pvc = await this.#core.readNamespacedPersistentVolumeClaim({
        namespace: ns,
        name: step.provision.claim,
      });
      await this.#core.createPersistentVolume({
        body: {
          ...step.provision.pv,
          spec: {
            ...((step.provision.pv as { spec?: object }).spec ?? {}),
            claimRef: { namespace: ns, name: step.provision.claim, uid: pvc.metadata!.uid! },
          },
        },
      });
    } else if ("settle" in step) {
      await this.#settle(ns);
    } else {
      await this.#settle(ns);
      await this.#running?.stop();
      this.#running = await this.#startImplementation();
    }
  }

  /** Waits until the snapshot is unchanged for 3 s (both loops sync every second). */
  async #settle(ns: string): Promise<void> {
    let last = "";
    let stableSince = Date.now();
    await waitFor(
      async () => {
        const now = JSON.stringify(await this.#snapshot(ns));
        if (now !== last) {
          last = now;
          stableSince = Date.now();
        }
        return Date.now() - stableSince >= 3_000;
      },
      { timeoutMs: 90_000, intervalMs: 250, what: `${this.#impl}: the scenario to settle` },
    );
  }

  async #snapshot(ns: string): Promise<Snapshot> {
    const [pvs, pvcs, vas, nodes, events] = await Promise.all([
      this.#core.listPersistentVolume(),
      this.#core.listNamespacedPersistentVolumeClaim({ namespace: ns }),
      this.#storage.listVolumeAttachment(),
      this.#core.listNode(),
      this.#core
        .listNamespacedEvent({ namespace: ns })
        .then(async (l) => [
          ...l.items,
          ...(await this.#core.listNamespacedEvent({ namespace: "default" })).items,
        ]),
    ]);
    // Provisioned PVs are named pvc-<claim UID>: name them by their claim instead.
    // (Their claim may be gone: the PV's own claimRef names it too.)
    const claimByUID = new Map(pvcs.items.map((c) => [c.metadata?.uid ?? "", c.metadata?.name ?? ""]));
    for (const pv of pvs.items) {
      const ref = pv.spec?.claimRef;
      if (ref?.uid) claimByUID.set(ref.uid, ref.name ?? "");
    }
    const pvName = (name: string | undefined) => {
      const uid = name?.startsWith("pvc-") ? name.slice(4) : undefined;
      return uid !== undefined && claimByUID.has(uid) ? `pvc-for-${claimByUID.get(uid)}` : (name ?? "");
    };
    // By UID: cluster-scoped objects' events land in "default", where earlier scenarios' namesakes left theirs.
    const reasons = (uid: string | undefined) =>
      [
        ...new Set(
          events.filter((e: CoreV1Event) => e.involvedObject.uid === uid).map((e) => e.reason ?? ""),
        ),
      ].sort();
    const snapshot: Snapshot = {};
    for (const pv of pvs.items) {
      const name = pv.metadata?.name ?? "";
      snapshot[`PV ${pvName(name)}`] = {
        phase: pv.status?.phase,
        claim: pv.spec?.claimRef
          ? `${pv.spec.claimRef.namespace === ns ? "" : pv.spec.claimRef.namespace}/${pv.spec.claimRef.name}`
          : undefined,
        reclaim: pv.spec?.persistentVolumeReclaimPolicy,
        class: pv.spec?.storageClassName,
        capacity: pv.spec?.capacity?.storage,
        annotations: pick(pv.metadata?.annotations),
        finalizers: [...(pv.metadata?.finalizers ?? [])].sort(),
        events: reasons(pv.metadata?.uid),
      };
    }
    for (const pvc of pvcs.items) {
      const name = pvc.metadata?.name ?? "";
      snapshot[`PVC ${name}`] = {
        phase: pvc.status?.phase,
        volume: pvc.spec?.volumeName ? pvName(pvc.spec.volumeName) : undefined,
        class: pvc.spec?.storageClassName,
        capacity: pvc.status?.capacity?.storage,
        annotations: pick(pvc.metadata?.annotations),
        finalizers: [...(pvc.metadata?.finalizers ?? [])].sort(),
        events: reasons(pvc.metadata?.uid),
      };
    }
    for (const va of vas.items) {
      snapshot[`VolumeAttachment ${va.metadata?.name}`] = {
        attacher: va.spec.attacher,
        node: va.spec.nodeName,
        pv: pvName(va.spec.source.persistentVolumeName),
        inlineVolumeSpec: va.spec.source.inlineVolumeSpec,
        deleting: va.metadata?.deletionTimestamp !== undefined,
      };
    }
    for (const node of nodes.items) {
      snapshot[`Node ${node.metadata?.name}`] = {
        volumesAttached: (node.status?.volumesAttached ?? []).map((v) => v.name).sort(),
      };
    }
    const pods = await this.#core.listNamespacedPod({ namespace: ns });
    for (const pod of pods.items)
      snapshot[`Pod ${pod.metadata?.name}`] = { events: reasons(pod.metadata?.uid) };
    return snapshot;
  }

  /** Removes everything the scenario created, finalizers and all, so the next one starts clean. */
  async #cleanup(ns: string): Promise<void> {
    const stripAndDelete = async (obj: KubernetesObject) => {
      try {
        if (obj.metadata?.finalizers?.length) {
          await this.#objects.patch(
            {
              apiVersion: obj.apiVersion,
              kind: obj.kind,
              metadata: { name: obj.metadata.name, namespace: obj.metadata.namespace, finalizers: null },
            } as never,
            undefined,
            undefined,
            undefined,
            undefined,
            PatchStrategy.MergePatch,
          );
        }
        await this.#objects.delete(obj, undefined, undefined, 0);
      } catch (err) {
        if (!isNotFound(err)) throw err;
      }
    };
    const withKind = <T extends KubernetesObject>(items: T[], apiVersion: string, kind: string) =>
      items.map((o) => ({ ...o, apiVersion, kind }));
    for (const pod of (await this.#core.listNamespacedPod({ namespace: ns })).items) {
      await stripAndDelete({ ...pod, apiVersion: "v1", kind: "Pod" });
    }
    await waitFor(async () => (await this.#core.listNamespacedPod({ namespace: ns })).items.length === 0, {
      timeoutMs: 30_000,
      what: "pods gone",
    });
    const all = [
      ...withKind(
        (await this.#core.listNamespacedPersistentVolumeClaim({ namespace: ns })).items,
        "v1",
        "PersistentVolumeClaim",
      ),
      ...withKind((await this.#core.listPersistentVolume()).items, "v1", "PersistentVolume"),
      ...withKind(
        (await this.#storage.listVolumeAttachment()).items,
        "storage.k8s.io/v1",
        "VolumeAttachment",
      ),
      ...withKind((await this.#core.listNode()).items, "v1", "Node"),
      ...withKind((await this.#storage.listStorageClass()).items, "storage.k8s.io/v1", "StorageClass"),
      ...withKind((await this.#storage.listCSIDriver()).items, "storage.k8s.io/v1", "CSIDriver"),
    ];
    for (const obj of all) await stripAndDelete(obj);
    await waitFor(
      async () =>
        (await this.#core.listPersistentVolume()).items.length === 0 &&
        (await this.#core.listNamespacedPersistentVolumeClaim({ namespace: ns })).items.length === 0 &&
        (await this.#storage.listVolumeAttachment()).items.length === 0,
      { timeoutMs: 30_000, what: "the scenario's objects to be gone" },
    );
  }
}

function isNamespaced(kind: string | undefined): boolean {
  return kind === "PersistentVolumeClaim" || kind === "Pod";
}

function ref(kind: string, name: string, ns: string): KubernetesObject {
  const apiVersion = ["StorageClass", "CSIDriver", "VolumeAttachment"].includes(kind)
    ? "storage.k8s.io/v1"
    : "v1";
  return { apiVersion, kind, metadata: { name, ...(isNamespaced(kind) && { namespace: ns }) } };
}

function pick(annotations: Record<string, string> | undefined): Record<string, string> {
  return Object.fromEntries(
    Object.entries(annotations ?? {})
      .filter(([k]) => COMPARED_ANNOTATIONS.includes(k))
      .sort(([a], [b]) => a.localeCompare(b)),
  );
}
