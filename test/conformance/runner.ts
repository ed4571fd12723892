import {
  CoreV1Api,
  CoreV1Event,
  KubernetesObjectApi,
  PatchStrategy,
  StorageV1Api,
  type KubernetesObject,
  type V1ObjectReference,
  type V1PersistentVolumeList,
} from "@kubernetes/client-node";
import { copyFile, mkdir, rename, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { LocalControlPlane } from "../../src/controlplane/local-control-plane.js";
import { isNotFound } from "../../src/runtime/api-errors.js";
import { waitFor } from "../../src/util/wait.js";
import { startKvc } from "../support/kvc-process.js";
import { ExplainCheck } from "./explain-check.js";
import { SHADOW_ENABLED, ShadowCheck, type ShadowVerdict } from "./shadow-check.js";
import { WriteLog, type Collection, type Write } from "./write-log.js";
import { mergePatch, strategicMergePatch } from "../../src/runtime/client.js";

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

/** An object a step names; namespaced ones default to the scenario's namespace. */
export interface Ref {
  kind: string;
  name: string;
  namespace?: string;
}

export type Step =
  /**
   * Creates objects; namespaced ones go to the scenario's namespace. They are created in dependency
   * order (classes, drivers, nodes and PVs; claims; pods and the rest), settled between the groups:
   * what a controller reads from its caches is there before what makes it read.
   */
  | { create: KubernetesObject[] }
  /** Deletes objects (several at once: they must not depend on each other). */
  | { delete: Ref | Ref[] }
  /** A merge patch of an object (status with `status: true`, for claims and pods). */
  | { patch: Ref & { body: object; status?: boolean } }
  /** Plays the kubelet: the node's volumesInUse (unique volume names), Ready condition, out-of-service taint. */
  | { kubelet: { node: string; volumesInUse?: string[]; ready?: boolean; outOfService?: boolean } }
  /** Plays the kubelet finishing a pod (e.g. `recycler-for-<pv>` in default): waits for it, sets its phase. */
  | { podPhase: { name: string; namespace?: string; phase: "Succeeded" | "Failed" } }
  /** Installs test/fixtures/flexvolume/fake-driver.sh as `<directory>/<driver>` with its `.mode`. */
  | { flexDriver: { directory: string; mode: string } }
  /**
   * Plays the CSI external-attacher: every VolumeAttachment is marked attached, once. With `pvs` and
   * `node`, it first waits until the attachment of each of those PVs to that node exists: an attach
   * started after the step would otherwise stay unattached in one implementation only.
   */
  | { attachAll: true | { pvs: string[]; node: string } }
  /** Plays an external provisioner: creates a PV for the claim, bound by claimRef, as external-provisioner does. */
  | { provision: { claim: string; pv: object } }
  /** Waits until the compared state stops changing (every step is followed by this anyway). */
  | { settle: true }
  /**
   * Takes the settled snapshot as it stands, compared as the final one is (key `Checkpoint <name>`):
   * what a periodic loop changes later is shown not to have happened before it.
   */
  | { checkpoint: string }
  /**
   * Waits (deadline `withinMs`) until the object is gone, e.g. a VolumeAttachment that only a
   * periodic loop removes; at the deadline the scenario carries on and the snapshot shows it there.
   */
  | { gone: Ref & { withinMs: number } }
  /**
   * Waits (deadline `withinMs`) until the node's status.volumesAttached lists a volume, e.g. after
   * an attach that only a retry past its backoff makes; at the deadline the scenario carries on.
   */
  | { reported: { node: string; withinMs: number } }
  /** Stops the implementation and starts it again. */
  | { restart: true }
  /**
   * Handover: stops the running implementation and starts this one on the same control plane. The
   * reference runner (kube-controller-manager) restarts itself instead, so the other side of the
   * comparison is KCM alone, restarted at the same point. The writes from the stop until the next
   * step (or the end) are the handover's: see `Scenario.handoverWrites`.
   */
  | { switchTo: Implementation };

export interface Scenario {
  name: string;
  steps: Step[];
  /** A deliberate difference from upstream: the scenario is run but not compared, and says why. */
  differs?: string;
  /** The implementation running when the scenario starts (default: the runner's own). */
  startOn?: Implementation;
  /**
   * Flags both implementations (and the shadow) run this scenario with, e.g. a feature gate: each is
   * restarted with them before the scenario and without them after it.
   */
  flags?: string[];
  /**
   * The writes a handover may make (`Write` lines as the snapshot's "Handover" key shows them), on
   * either side; default none: after a switch nothing is detached, re-bound, re-provisioned or created.
   */
  handoverWrites?: string[];
  /**
   * Claims (and volumes) that compete in one step: which claim gets which of equally good volumes is
   * up to the order the workers take them (upstream: informer order). Claims and PVs are then compared
   * as pools of equal shape (`poolTies` in compare.ts), and the binding invariant is asserted.
   */
  competing?: string;
  /**
   * The test itself writes as a third party (deletes a VolumeAttachment, strips a finalizer): the
   * shadow beside KCM takes every write it did not make for KCM's, so its agreement is not asked
   * (its writes, unparsed writes and minimum compared still are). Says why.
   */
  thirdParty?: string;
}

/** What is compared: the scenario's objects, normalised. */
export type Snapshot = Record<string, unknown>;

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
  impl: Implementation;
  stop(): Promise<void>;
}

/**
 * Creation order: what controllers look up (classes, drivers, nodes) with the PVs (whose own sync
 * reads none of it); then claims; then pods and the rest.
 */
const TIER: Record<string, number> = {
  StorageClass: 0,
  CSIDriver: 0,
  Node: 0,
  PersistentVolume: 0,
  PersistentVolumeClaim: 1,
};

const UUID = /[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/g;

/** One scenario's run on one control plane. */
interface Run {
  ns: string;
  /** Every UID the scenario's objects had, as "<Kind> <name>" (" #2" for a namesake created later). */
  identities: Map<string, string>;
  /** Set by every step that may change something; cleared by a settle. */
  dirty: boolean;
  /** The open handover write log, if a switch happened since the last acting step. */
  handover: WriteLog | undefined;
  /** The writes of each closed handover window, rendered. */
  windows: string[][];
  /** kvc explain's verdicts on the claims and pods created, checked after each settle. */
  explain: ExplainCheck;
  /** Snapshots taken by `checkpoint` steps, by name. */
  checkpoints: Snapshot;
}

export class ConformanceRunner {
  readonly #impl: Implementation;
  #cp!: LocalControlPlane;
  #running: Running | undefined;
  #core!: CoreV1Api;
  #storage!: StorageV1Api;
  #objects!: KubernetesObjectApi;
  #seq = 0;
  /** The running scenario's own flags (Scenario.flags), after FLAGS. */
  #flags: readonly string[] = [];
  /** The reference side's `kvc run --shadow` beside KCM (shadow-check.ts). */
  shadow: ShadowCheck | undefined;
  /** Its verdict on the last scenario, taken before the cleanup (or why there is none). */
  shadowVerdict: ShadowVerdict | Error | undefined;

  constructor(impl: Implementation) {
    this.#impl = impl;
  }

  async start(): Promise<void> {
    const shadow = SHADOW_ENABLED && this.#impl === "kube-controller-manager";
    this.#cp = await LocalControlPlane.start({ audit: shadow });
    // Before the shadow, which never creates it (KCM does, after): without it the shadow would run
    // without FlexVolume until its first restart, and a FlexVolume scenario run first would fail.
    await mkdir(this.#flexDir, { recursive: true });
    if (shadow) {
      const args = [`--controllers=${CONTROLLERS.join(",")}`, `--flex-volume-plugin-dir=${this.#flexDir}`];
      this.shadow = new ShadowCheck(this.#cp.kubeconfigPath, this.#cp.auditLogPath, [...args, ...FLAGS]);
    }
    const kc = this.#cp.kubeConfig();
    this.#core = kc.makeApiClient(CoreV1Api);
    this.#storage = kc.makeApiClient(StorageV1Api);
    this.#objects = KubernetesObjectApi.makeApiClient(kc);
    this.#running = await this.#startImplementation(this.#impl);
  }

  async stop(): Promise<void> {
    await this.#running?.stop();
    await this.#cp.stop();
  }

  /** Each implementation's own FlexVolume plugin directory, where `flexDriver` installs drivers. */
  get #flexDir(): string {
    return `${this.#cp.dir}/flexvolume`;
  }

  async #startImplementation(impl: Implementation): Promise<Running> {
    if (impl === "kube-controller-manager") {
      // The shadow is started and stopped with KCM, and watching before KCM starts: a decision KCM
      // makes at its start (an event on a resync) would otherwise be history to the shadow.
      await this.shadow?.start(this.#flags);
      const kcm = await this.#cp.startKubeControllerManager({
        controllers: CONTROLLERS,
        args: [...FLAGS, `--flex-volume-plugin-dir=${this.#flexDir}`, ...this.#flags],
      });
      return {
        impl,
        stop: async () => {
          await this.shadow?.stop();
          await kcm.stop();
        },
      };
    }
    const kvc = await startKvc(this.#cp.kubeconfigPath, [
      "--leader-elect=false",
      `--controllers=${CONTROLLERS.join(",")}`,
      `--flex-volume-plugin-dir=${this.#flexDir}`,
      ...FLAGS,
      ...this.#flags,
    ]);
    await kvc.ready();
    return {
      impl,
      stop: async () => {
        kvc.child.kill("SIGTERM");
        await kvc.exited;
      },
    };
  }

  /** Stops what runs and starts `impl` (the reference runner only ever runs KCM). */
  async #switchTo(impl: Implementation): Promise<void> {
    await this.#running?.stop();
    this.#running = undefined;
    this.#running = await this.#startImplementation(this.#impl === "kvc" ? impl : this.#impl);
  }

  /** Runs the scenario and returns its settled, normalised outcome; cleans up after it. */
  async run(scenario: Scenario): Promise<Snapshot> {
    const ns = `c${++this.#seq}`;
    const run: Run = {
      ns,
      identities: new Map(),
      dirty: false, // the previous scenario's cleanup waited until its objects were gone
      handover: undefined,
      windows: [],
      explain: new ExplainCheck(this.#cp.kubeconfigPath, ns),
      checkpoints: {},
    };
    if (scenario.flags) {
      this.#flags = scenario.flags;
      await this.#switchTo(scenario.startOn ?? this.#impl);
    } else if (this.#impl === "kvc" && scenario.startOn && scenario.startOn !== this.#running?.impl)
      await this.#switchTo(scenario.startOn);
    await this.#core.createNamespace({ body: { metadata: { name: run.ns } } });
    try {
      for (const step of scenario.steps) {
        // Every step starts from a settled state: no outcome depends on which informer event lands first.
        await this.#settle(run);
        await run.explain.verify();
        if (!("settle" in step || "switchTo" in step || "checkpoint" in step)) await this.#closeHandover(run);
        await this.#step(step, run);
        run.dirty = true;
      }
      await this.#settle(run);
      await run.explain.verify();
      await this.#closeHandover(run);
      const snapshot = { ...(await this.#snapshot(run)), ...run.checkpoints };
      snapshot.Bindings = await this.#bindingViolations(run);
      if (run.windows.length) snapshot.Handover = run.windows;
      snapshot.Explain = run.explain.result();
      return snapshot;
    } finally {
      await run.handover?.close().catch(() => undefined);
      this.shadowVerdict = await this.shadow?.verdict().catch((err: unknown) => err as Error);
      const scheduled = await this.#cleanup(run.ns);
      // What the shadow saw of the cleanup is the runner's doing, not KCM's: a fresh shadow follows.
      await this.shadow?.discard();
      // A pod on a node leaves attach/detach memory behind: deleted after its claim and PV, it cannot
      // be resolved to its volume, so it stays in the desired state (upstream ProcessPodVolumes too)
      // and its volume "attached" in the actual state until the populator's pass a minute later. A
      // namesake node and volume in the next scenario then got no VolumeAttachment until that pass or
      // the 60 s verification, at a moment set by the process's start: `random seed 1007` after 1006
      // failed so. A restart starts the next scenario from what the API holds, on both sides.
      const flagged = this.#flags.length > 0;
      this.#flags = [];
      if (scheduled || flagged || this.#running?.impl !== this.#impl) await this.#switchTo(this.#impl);
      else await this.shadow?.start();
    }
  }

  async #step(step: Step, run: Run): Promise<void> {
    const { ns } = run;
    if ("create" in step) {
      const tiers = Map.groupBy(step.create, (o) => TIER[o.kind ?? ""] ?? 2);
      let previous: KubernetesObject[] = [];
      for (const tier of [...tiers.keys()].sort()) {
        if (previous.every((o) => o.kind === "PersistentVolume")) await this.#initialised(previous);
        else await this.#settle(run);
        previous = tiers.get(tier)!;
        await run.explain.before(previous);
        const created: KubernetesObject[] = [];
        for (const obj of previous) {
          const body = structuredClone(obj) as KubernetesObject & {
            spec?: { claimRef?: { namespace?: string } };
          };
          if (isNamespaced(body.kind)) body.metadata = { ...body.metadata, namespace: ns };
          if (body.spec?.claimRef?.namespace === "NS") body.spec.claimRef.namespace = ns;
          const made = await this.#objects.create(body);
          created.push(made);
          this.#identify(run, made, body.kind);
        }
        run.explain.predict(created);
        run.dirty = true;
      }
    } else if ("delete" in step) {
      for (const r of [step.delete].flat()) await this.#objects.delete(ref(r, ns), undefined, undefined, 0);
    } else if ("patch" in step) {
      const { body, status } = step.patch;
      const { kind, metadata } = ref(step.patch, ns);
      if (status && kind === "PersistentVolumeClaim") {
        await this.#core.patchNamespacedPersistentVolumeClaimStatus(
          { namespace: metadata!.namespace!, name: metadata!.name!, body },
          mergePatch,
        );
      } else if (status && kind === "Pod") {
        await this.#core.patchNamespacedPodStatus(
          { namespace: metadata!.namespace!, name: metadata!.name!, body },
          mergePatch,
        );
      } else {
        const target = ref(step.patch, ns);
        const { metadata, ...rest } = body as KubernetesObject;
        await this.#objects.patch(
          { ...target, ...rest, metadata: { ...target.metadata, ...metadata } },
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
        await this.#core.patchNodeStatus({ name: node, body: { status } }, strategicMergePatch);
      if (outOfService !== undefined) {
        const taints = outOfService
          ? [{ key: "node.kubernetes.io/out-of-service", value: "nodeshutdown", effect: "NoExecute" }]
          : null;
        await this.#core.patchNode({ name: node, body: { spec: { taints } } }, mergePatch);
      }
    } else if ("podPhase" in step) {
      const { metadata } = ref({ ...step.podPhase, kind: "Pod" }, ns);
      const [namespace, name] = [metadata!.namespace!, metadata!.name!];
      await waitFor(() => this.#core.readNamespacedPod({ namespace, name }), {
        timeoutMs: 30_000,
        what: `${this.#impl}: pod ${namespace}/${name} to exist`,
      });
      await this.#core.patchNamespacedPodStatus(
        { namespace, name, body: { status: { phase: step.podPhase.phase } } },
        mergePatch,
      );
    } else if ("flexDriver" in step) {
      const { directory, mode } = step.flexDriver;
      const driverDir = join(this.#flexDir, directory);
      await mkdir(driverDir, { recursive: true });
      await writeFile(join(driverDir, ".mode"), mode);
      // Executable last, and whole: the prober looks at the driver when its executable appears, so it
      // is copied beside it under a dot-name (ignored, as upstream's prober does) and renamed. A copy in
      // place can let a loaded run's prober execute a half-written driver (failed inits, then backoff).
      const driver = join(driverDir, directory.slice(directory.indexOf("~") + 1));
      await copyFile(FLEX_FIXTURE, `${driverDir}/.installing`);
      await rename(`${driverDir}/.installing`, driver);
    } else if ("attachAll" in step) {
      if (step.attachAll !== true) await this.#attachmentsExist(step.attachAll.pvs, step.attachAll.node);
      for (const va of (await this.#storage.listVolumeAttachment()).items) {
        if (va.status?.attached) continue;
        await this.#storage.patchVolumeAttachmentStatus(
          { name: va.metadata!.name!, body: { status: { attached: true } } },
          mergePatch,
        );
      }
    } else if ("provision" in step) {
      const pvc = await this.#core.readNamespacedPersistentVolumeClaim({
        namespace: ns,
        name: step.provision.claim,
      });
      this.#identify(
        run,
        await this.#core.createPersistentVolume({
          body: {
            ...step.provision.pv,
            spec: {
              ...((step.provision.pv as { spec?: object }).spec ?? {}),
              claimRef: { namespace: ns, name: step.provision.claim, uid: pvc.metadata!.uid! },
            },
          },
        }),
        "PersistentVolume",
      );
    } else if ("checkpoint" in step) {
      run.checkpoints[`Checkpoint ${step.checkpoint}`] = await this.#snapshot(run);
    } else if ("gone" in step) {
      const { withinMs, ...target } = step.gone;
      const obj = ref(target, ns);
      await waitFor(
        () =>
          this.#objects.read(obj as never).then(
            () => false,
            (err: unknown) => {
              if (isNotFound(err)) return true;
              throw err;
            },
          ),
        { timeoutMs: withinMs, intervalMs: 500, what: `${target.kind} ${target.name} to be gone` },
      ).catch(() => undefined); // the snapshot shows it still there
    } else if ("reported" in step) {
      const { node, withinMs } = step.reported;
      await waitFor(
        async () => ((await this.#core.readNode({ name: node })).status?.volumesAttached ?? []).length > 0,
        { timeoutMs: withinMs, intervalMs: 500, what: `node ${node} to list an attached volume` },
      ).catch(() => undefined); // the snapshot shows it unlisted
    } else if ("restart" in step) {
      await this.#switchTo(this.#running?.impl ?? this.#impl);
    } else if ("switchTo" in step) {
      await this.#closeHandover(run);
      run.handover = await WriteLog.open(this.#cp.kubeConfig(), watchedCollections(ns));
      await this.#switchTo(step.switchTo);
    }
  }

  /**
   * Waits until the binder has given each PV a phase: it read the PV from the cache it matches claims
   * against, so a claim created next finds it there (cheaper than a settle, and exact).
   */
  async #initialised(pvs: KubernetesObject[]): Promise<void> {
    await waitFor(
      async () => {
        for (const p of pvs) {
          const phase = (await this.#core.readPersistentVolume({ name: p.metadata!.name! })).status?.phase;
          if (phase === undefined || phase === "Pending") return false;
        }
        return true;
      },
      { timeoutMs: 30_000, what: `${this.#impl}: the new PVs to be initialised` },
    );
  }

  /**
   * Waits until a VolumeAttachment of each PV to the node exists. A settle alone cannot tell an attach
   * that has not started yet from none: a quiet period of 3 s passed while one was still to come.
   */
  async #attachmentsExist(pvs: string[], node: string): Promise<void> {
    await waitFor(
      async () => {
        const present = new Set(
          (await this.#storage.listVolumeAttachment()).items
            .filter((va) => va.spec.nodeName === node)
            .map((va) => va.spec.source.persistentVolumeName),
        );
        return pvs.every((pv) => present.has(pv));
      },
      { timeoutMs: 30_000, what: `${this.#impl}: VolumeAttachments of ${pvs.join(", ")} to ${node}` },
    );
  }

  /** Names the UID of an object the scenario created, by kind and name (and creation count). */
  #identify(run: Run, obj: KubernetesObject, kind = obj.kind ?? ""): void {
    const base = `${kind} ${obj.metadata?.name ?? ""}`;
    const namesakes = [...run.identities.values()].filter((v) => v === base || v.startsWith(`${base} #`));
    run.identities.set(obj.metadata!.uid!, namesakes.length ? `${base} #${namesakes.length + 1}` : base);
  }

  /** Ends a handover window: its writes, normalised, become one entry of the snapshot's "Handover". */
  async #closeHandover(run: Run): Promise<void> {
    if (!run.handover) return;
    const writes = await run.handover.close();
    run.handover = undefined;
    const normalise = normaliser(run.ns, run.identities, await this.#core.listPersistentVolume());
    // Each collection has its own watch: only the order of one object's writes means anything.
    const byObject = (w: Write) => `${w.kind} ${w.name}`;
    run.windows.push(
      writes
        .toSorted((a, b) => byObject(a).localeCompare(byObject(b)))
        .map(
          (w) =>
            `${w.kind} ${normalise(w.name)} ${w.type}${w.fields.length ? ` (${w.fields.join(", ")})` : ""}`,
        ),
    );
  }

  /** Waits until the snapshot is unchanged for 3 s (both loops sync every second). */
  async #settle(run: Run): Promise<void> {
    if (!run.dirty) return;
    let last = "";
    let stableSince = Date.now();
    await waitFor(
      async () => {
        const now = JSON.stringify(await this.#snapshot(run));
        if (now !== last) {
          last = now;
          stableSince = Date.now();
        }
        return Date.now() - stableSince >= 3_000;
      },
      { timeoutMs: 90_000, intervalMs: 250, what: `${this.#impl}: the scenario to settle` },
    );
    run.dirty = false;
  }

  async #snapshot(run: Run): Promise<Snapshot> {
    const { ns } = run;
    const [pvs, pvcs, vas, nodes, pods, recyclers, events] = await Promise.all([
      this.#core.listPersistentVolume(),
      this.#core.listNamespacedPersistentVolumeClaim({ namespace: ns }),
      this.#storage.listVolumeAttachment(),
      this.#core.listNode(),
      this.#core.listNamespacedPod({ namespace: ns }),
      this.#core.listNamespacedPod({ namespace: "default" }),
      this.#core
        .listNamespacedEvent({ namespace: ns })
        .then(async (l) => [
          ...l.items,
          ...(await this.#core.listNamespacedEvent({ namespace: "default" })).items,
        ]),
    ]);
    const normalise = normaliser(run.ns, run.identities, pvs);
    // By UID: cluster-scoped objects' events land in "default", where earlier scenarios' namesakes left theirs.
    // With how often each was posted: once, or repeatedly. A periodic sync (every second here) posts
    // its event again on each pass, so how many passes fell before the snapshot is timing; an event
    // that must come once (ProvisioningSucceeded, a recycle) posted twice is a difference.
    const eventsOf = (uid: string | undefined) => {
      const counts = new Map<string, number>();
      for (const e of events.filter((e: CoreV1Event) => e.involvedObject.uid === uid)) {
        const text = `${e.type ?? ""} ${e.reason ?? ""}: ${normalise(e.message ?? "")}`;
        counts.set(text, (counts.get(text) ?? 0) + (e.count ?? 1));
      }
      return [...counts].map(([text, n]) => `${text} (${n === 1 ? "once" : "repeated"})`).sort();
    };
    const snapshot: Snapshot = {};
    for (const pv of pvs.items) {
      const claimRef = pv.spec?.claimRef;
      snapshot[`PV ${normalise(pv.metadata?.name ?? "")}`] = {
        phase: pv.status?.phase,
        claim: claimRef
          ? `${claimRef.namespace === ns ? "" : claimRef.namespace}/${claimRef.name}`
          : undefined,
        // Which claim the PV is bound to, not only its name: a namesake created later is another claim.
        claimUID: claimRef?.uid && (run.identities.get(claimRef.uid) ?? "an unknown UID"),
        reclaim: pv.spec?.persistentVolumeReclaimPolicy,
        class: pv.spec?.storageClassName,
        capacity: pv.spec?.capacity?.storage,
        accessModes: pv.spec?.accessModes,
        volumeMode: pv.spec?.volumeMode,
        nodeAffinity: pv.spec?.nodeAffinity,
        mountOptions: pv.spec?.mountOptions,
        labels: pv.metadata?.labels,
        reason: pv.status?.reason,
        message: pv.status?.message && normalise(pv.status.message),
        annotations: pick(pv.metadata?.annotations),
        finalizers: [...(pv.metadata?.finalizers ?? [])].sort(),
        deleting: pv.metadata?.deletionTimestamp !== undefined,
        events: eventsOf(pv.metadata?.uid),
      };
    }
    for (const pvc of pvcs.items) {
      snapshot[`PVC ${pvc.metadata?.name ?? ""}`] = {
        phase: pvc.status?.phase,
        volume: pvc.spec?.volumeName ? normalise(pvc.spec.volumeName) : undefined,
        class: pvc.spec?.storageClassName,
        request: pvc.spec?.resources?.requests?.storage,
        requestedModes: pvc.spec?.accessModes,
        capacity: pvc.status?.capacity?.storage,
        accessModes: pvc.status?.accessModes,
        allocatedResources: pvc.status?.allocatedResources,
        allocatedResourceStatuses: pvc.status?.allocatedResourceStatuses,
        conditions: (pvc.status?.conditions ?? [])
          .map((c) => ({
            type: c.type,
            status: c.status,
            reason: c.reason,
            message: c.message && normalise(c.message),
          }))
          .sort((a, b) => a.type.localeCompare(b.type)),
        annotations: pick(pvc.metadata?.annotations),
        finalizers: [...(pvc.metadata?.finalizers ?? [])].sort(),
        deleting: pvc.metadata?.deletionTimestamp !== undefined,
        events: eventsOf(pvc.metadata?.uid),
      };
    }
    for (const va of vas.items) {
      snapshot[`VolumeAttachment ${va.metadata?.name}`] = {
        attacher: va.spec.attacher,
        node: va.spec.nodeName,
        pv: normalise(va.spec.source.persistentVolumeName ?? ""),
        inlineVolumeSpec: va.spec.source.inlineVolumeSpec,
        attached: va.status?.attached ?? false,
        attachmentMetadata: va.status?.attachmentMetadata,
        // Without their times: when an error was seen is timing.
        attachError: va.status?.attachError?.message && normalise(va.status.attachError.message),
        detachError: va.status?.detachError?.message && normalise(va.status.detachError.message),
        labels: va.metadata?.labels,
        annotations: va.metadata?.annotations,
        finalizers: [...(va.metadata?.finalizers ?? [])].sort(),
        deleting: va.metadata?.deletionTimestamp !== undefined,
      };
    }
    for (const node of nodes.items) {
      snapshot[`Node ${node.metadata?.name}`] = {
        volumesAttached: (node.status?.volumesAttached ?? []).map((v) => normalise(v.name)).sort(),
      };
    }
    for (const pod of pods.items)
      snapshot[`Pod ${pod.metadata?.name}`] = { events: eventsOf(pod.metadata?.uid) };
    // Recycler pods: the binder's, in "default", named recycler-for-<pv>.
    for (const pod of recyclers.items) {
      const spec = pod.spec;
      snapshot[`Pod default/${pod.metadata?.name}`] = {
        phase: pod.status?.phase,
        deleting: pod.metadata?.deletionTimestamp !== undefined,
        // What the recycler sets (its template and the volume); the apiserver's defaults are the
        // same on both sides, the service account token volume's name is random.
        labels: pod.metadata?.labels,
        restartPolicy: spec?.restartPolicy,
        activeDeadlineSeconds: spec?.activeDeadlineSeconds,
        containers: spec?.containers.map((c) => ({
          name: c.name,
          image: c.image,
          command: c.command,
          args: c.args,
          volumeMounts: c.volumeMounts?.filter((m) => !m.name.startsWith("kube-api-access-")),
        })),
        volumes: spec?.volumes?.filter((v) => !v.name.startsWith("kube-api-access-")),
      };
    }
    return snapshot;
  }

  /**
   * The binding invariant, from the API (empty when it holds): a Bound claim's volume exists and its
   * claimRef names that claim (name and UID); no volume is the volume of two Bound claims; a Bound
   * volume's claim exists and names it. Checked absolutely, not only against the other side: two
   * implementations that double-bind alike would otherwise agree.
   */
  async #bindingViolations(run: Run): Promise<string[]> {
    const [pvs, pvcs] = await Promise.all([
      this.#core.listPersistentVolume(),
      this.#core.listNamespacedPersistentVolumeClaim({ namespace: run.ns }),
    ]);
    // Names as they are (a claim may be named like the namespace, c1); UIDs as the object they belong to.
    const describeRef = (r: V1ObjectReference | undefined) =>
      r
        ? `${r.namespace === run.ns ? "NS" : r.namespace}/${r.name} (${run.identities.get(r.uid ?? "") ?? r.uid ?? "no UID"})`
        : "none";
    const violations: string[] = [];
    const byName = new Map(pvs.items.map((v) => [v.metadata?.name ?? "", v]));
    const claimsOf = new Map<string, string[]>();
    for (const c of pvcs.items.filter((c) => c.status?.phase === "Bound")) {
      const name = c.metadata?.name ?? "";
      const volume = c.spec?.volumeName ?? "";
      claimsOf.set(volume, [...(claimsOf.get(volume) ?? []), name]);
      const r = byName.get(volume)?.spec?.claimRef;
      if (r?.namespace !== run.ns || r.name !== name || r.uid !== c.metadata?.uid)
        violations.push(
          `claim ${name} is Bound to ${volume || "no volume"}, whose claimRef is ${describeRef(r)}`,
        );
    }
    for (const [volume, claims] of claimsOf)
      if (claims.length > 1) violations.push(`volume ${volume} is bound to ${claims.join(", ")}`);
    const claimByName = new Map(pvcs.items.map((c) => [c.metadata?.name ?? "", c]));
    for (const v of pvs.items.filter((v) => v.status?.phase === "Bound")) {
      const r = v.spec?.claimRef;
      if (r?.namespace !== run.ns) continue; // another namespace's claim: a scenario's fixture
      const c = claimByName.get(r.name ?? "");
      if (c?.metadata?.uid !== r.uid || c?.spec?.volumeName !== v.metadata?.name)
        violations.push(
          `volume ${v.metadata?.name} is Bound to claim ${r.name}, which is ${c ? `bound to ${c.spec?.volumeName ?? "none"}` : "gone"}`,
        );
    }
    return violations.sort();
  }

  /**
   * Removes everything the scenario created, finalizers and all, so the next one starts clean.
   * Returns whether a pod of the scenario was scheduled to a node.
   */
  async #cleanup(ns: string): Promise<boolean> {
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
    const pods = async () => [
      ...(await this.#core.listNamespacedPod({ namespace: ns })).items,
      ...(await this.#core.listNamespacedPod({ namespace: "default" })).items,
    ];
    const scenarioPods = await pods();
    // PVs first: a claim deleted while its PV exists releases the PV, and a Recycle PV would get a
    // recycler pod after the pods were cleaned up (in one implementation or the other, by timing).
    const remaining = async () => [
      ...withKind((await this.#core.listPersistentVolume()).items, "v1", "PersistentVolume"),
      ...withKind(
        (await this.#core.listNamespacedPersistentVolumeClaim({ namespace: ns })).items,
        "v1",
        "PersistentVolumeClaim",
      ),
      ...withKind(
        (await this.#storage.listVolumeAttachment()).items,
        "storage.k8s.io/v1",
        "VolumeAttachment",
      ),
      ...withKind(await pods(), "v1", "Pod"),
      ...withKind((await this.#core.listNode()).items, "v1", "Node"),
    ];
    for (const obj of [
      ...(await remaining()),
      ...withKind((await this.#storage.listStorageClass()).items, "storage.k8s.io/v1", "StorageClass"),
      ...withKind((await this.#storage.listCSIDriver()).items, "storage.k8s.io/v1", "CSIDriver"),
    ]) {
      await stripAndDelete(obj);
    }
    // The implementation still runs: what it creates meanwhile (a PV whose provisioning was in
    // flight, a recycler pod, a VolumeAttachment) or a finalizer it adds back is swept again on
    // every poll, rather than left to time the wait out (and to leak into the next scenario).
    await waitFor(
      async () => {
        const left = await remaining();
        for (const obj of left) await stripAndDelete(obj);
        return left.length === 0;
      },
      { timeoutMs: 30_000, what: "the scenario's objects to be gone" },
    );
    return scenarioPods.some((p) => p.spec?.nodeName);
  }
}

/**
 * Names as both control planes give them: a provisioned PV (pvc-<claim UID>) as `pvc-for-<claim>`,
 * a UID as the object it belongs to (`identities`), the scenario's namespace as NS. Durations are
 * kept: the messages of the four loops carry none that a timing sets (upstream's events and
 * conditions state no elapsed time; the ones they do state, such as the recycler's
 * activeDeadlineSeconds or a FlexVolume call's timeout, come from flags and constants both sides
 * share), so a duration that differs is a difference.
 */
export function normaliser(
  ns: string,
  identities: ReadonlyMap<string, string>,
  pvs: V1PersistentVolumeList,
): (text: string) => string {
  const claimName = new Map<string, string>();
  for (const [uid, id] of identities)
    if (id.startsWith("PersistentVolumeClaim "))
      claimName.set(uid, id.slice("PersistentVolumeClaim ".length));
  // A claim created by an external party is still named by the PV's claimRef.
  for (const pv of pvs.items) {
    const r = pv.spec?.claimRef;
    if (r?.uid && !claimName.has(r.uid)) claimName.set(r.uid, r.name ?? "");
  }
  return (text) =>
    text
      .replace(/pvc-([0-9a-f-]{36})/g, (m, uid: string) =>
        claimName.has(uid) ? `pvc-for-${claimName.get(uid)}` : m,
      )
      .replace(UUID, (uid) => `<${identities.get(uid) ?? "uid"}>`)
      .replace(new RegExp(`\\b${ns}\\b`, "g"), "NS");
}

/** What a handover window watches: everything the loops write, except events. */
function watchedCollections(ns: string): Collection[] {
  const meta = (o: KubernetesObject) => ({
    annotations: pick(o.metadata?.annotations),
    finalizers: o.metadata?.finalizers,
    deleting: o.metadata?.deletionTimestamp !== undefined,
  });
  type Any = KubernetesObject & { spec?: Record<string, unknown>; status?: Record<string, unknown> };
  return [
    {
      apiVersion: "v1",
      kind: "PersistentVolume",
      path: "/api/v1/persistentvolumes",
      project: (o: Any) => ({ ...meta(o), claimRef: o.spec?.claimRef, phase: o.status?.phase }),
    },
    {
      apiVersion: "v1",
      kind: "PersistentVolumeClaim",
      namespace: ns,
      path: `/api/v1/namespaces/${ns}/persistentvolumeclaims`,
      project: (o: Any) => ({ ...meta(o), volumeName: o.spec?.volumeName, status: o.status }),
    },
    {
      apiVersion: "storage.k8s.io/v1",
      kind: "VolumeAttachment",
      path: "/apis/storage.k8s.io/v1/volumeattachments",
      project: (o: Any) => ({ ...meta(o), spec: o.spec, attached: o.status?.attached }),
    },
    {
      apiVersion: "v1",
      kind: "Node",
      path: "/api/v1/nodes",
      // As a set: KCM lists them in Go map order (actual_state_of_world.go, getAttachedVolumeFromUpdateObject),
      // so a restarted KCM may rewrite the same volumes in another order, which attaches nothing.
      projectedOnly: true,
      project: (o: Any) => ({
        volumesAttached: (o.status?.volumesAttached as { name: string }[] | undefined)?.toSorted((a, b) =>
          a.name.localeCompare(b.name),
        ),
      }),
    },
    ...[ns, "default"].map((namespace) => ({
      apiVersion: "v1",
      kind: "Pod",
      namespace,
      path: `/api/v1/namespaces/${namespace}/pods`,
      project: (o: Any) => ({ ...meta(o), phase: o.status?.phase }),
    })),
  ];
}

function isNamespaced(kind: string | undefined): boolean {
  return kind === "PersistentVolumeClaim" || kind === "Pod";
}

function ref({ kind, name, namespace }: Ref, ns: string): KubernetesObject {
  const apiVersion = ["StorageClass", "CSIDriver", "VolumeAttachment"].includes(kind)
    ? "storage.k8s.io/v1"
    : "v1";
  return { apiVersion, kind, metadata: { name, ...(isNamespaced(kind) && { namespace: namespace ?? ns }) } };
}

function pick(annotations: Record<string, string> | undefined): Record<string, string> {
  return Object.fromEntries(
    Object.entries(annotations ?? {})
      .filter(([k]) => COMPARED_ANNOTATIONS.includes(k))
      .sort(([a], [b]) => a.localeCompare(b)),
  );
}
