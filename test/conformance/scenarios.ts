import type { KubernetesObject } from "@kubernetes/client-node";
import { createHash } from "node:crypto";
import type { Scenario, Step } from "./runner.js";

/*
 * The differential scenarios: each runs on upstream kube-controller-manager and on kvc, and their
 * settled outcomes must be equal. "NS" in a PV's claimRef stands for the scenario's namespace.
 */

type Obj = KubernetesObject & Record<string, unknown>;

interface PVOptions {
  size?: string;
  cls?: string;
  modes?: string[];
  reclaim?: string;
  labels?: Record<string, string>;
  claim?: string;
  volumeMode?: string;
  csi?: { driver: string; handle: string };
}

export function pv(name: string, o: PVOptions = {}): Obj {
  return {
    apiVersion: "v1",
    kind: "PersistentVolume",
    metadata: { name, ...(o.labels && { labels: o.labels }) },
    spec: {
      capacity: { storage: o.size ?? "1Gi" },
      accessModes: o.modes ?? ["ReadWriteOnce"],
      storageClassName: o.cls ?? "",
      persistentVolumeReclaimPolicy: o.reclaim ?? "Retain",
      ...(o.volumeMode && { volumeMode: o.volumeMode }),
      ...(o.claim && { claimRef: { namespace: "NS", name: o.claim } }),
      ...(o.csi
        ? { csi: { driver: o.csi.driver, volumeHandle: o.csi.handle } }
        : // Inside the hostPath provisioner's directory: the only place kvc's deleter deletes (docs/pv-binder.md).
          { hostPath: { path: `/tmp/hostpath_pv/conformance-${name}` } }),
    },
  };
}

interface PVCOptions {
  size?: string;
  /** undefined: no class set (the default class applies); "": explicitly none. */
  cls?: string | undefined;
  modes?: string[];
  selector?: Record<string, string>;
  volume?: string;
  volumeMode?: string;
}

export function pvc(name: string, o: PVCOptions = {}): Obj {
  return {
    apiVersion: "v1",
    kind: "PersistentVolumeClaim",
    metadata: { name },
    spec: {
      accessModes: o.modes ?? ["ReadWriteOnce"],
      resources: { requests: { storage: o.size ?? "1Gi" } },
      ...("cls" in o ? (o.cls === undefined ? {} : { storageClassName: o.cls }) : { storageClassName: "" }),
      ...(o.selector && { selector: { matchLabels: o.selector } }),
      ...(o.volume && { volumeName: o.volume }),
      ...(o.volumeMode && { volumeMode: o.volumeMode }),
    },
  };
}

export function sc(
  name: string,
  o: { provisioner?: string; wffc?: boolean; isDefault?: boolean; reclaim?: string } = {},
): Obj {
  return {
    apiVersion: "storage.k8s.io/v1",
    kind: "StorageClass",
    metadata: {
      name,
      ...(o.isDefault && { annotations: { "storageclass.kubernetes.io/is-default-class": "true" } }),
    },
    provisioner: o.provisioner ?? "kubernetes.io/no-provisioner",
    reclaimPolicy: o.reclaim ?? "Delete",
    volumeBindingMode: o.wffc ? "WaitForFirstConsumer" : "Immediate",
  };
}

export function node(name: string): Obj {
  return {
    apiVersion: "v1",
    kind: "Node",
    metadata: { name, annotations: { "volumes.kubernetes.io/controller-managed-attach-detach": "true" } },
  };
}

export function pod(name: string, nodeName: string | undefined, claims: string[]): Obj {
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name },
    spec: {
      ...(nodeName && { nodeName }),
      containers: [{ name: "c", image: "registry.k8s.io/pause:3.10" }],
      volumes: claims.map((c) => ({ name: c, persistentVolumeClaim: { claimName: c } })),
    },
  };
}

export function csiDriver(name: string, attachRequired: boolean): Obj {
  return { apiVersion: "storage.k8s.io/v1", kind: "CSIDriver", metadata: { name }, spec: { attachRequired } };
}

const DRIVER = "conformance.csi.example.com";
const EXTERNAL = "example.com/external";
/** A PV as external-provisioner creates it (the runner adds the claimRef). */
const externalPV = (name: string) => ({
  metadata: { name, annotations: { "pv.kubernetes.io/provisioned-by": EXTERNAL } },
  spec: {
    capacity: { storage: "1Gi" },
    accessModes: ["ReadWriteOnce"],
    storageClassName: "ext",
    persistentVolumeReclaimPolicy: "Delete",
    csi: { driver: "external.example.com", volumeHandle: name },
  },
});
const csiVolume = (handle: string) => `kubernetes.io/csi/${DRIVER}^${handle}`;
/** A CSI PV pre-bound to its claim, and the claim. */
const csiPair = (handle: string, modes = ["ReadWriteOnce"]) => [
  pv(`pv-${handle}`, { claim: `claim-${handle}`, modes, csi: { driver: DRIVER, handle } }),
  pvc(`claim-${handle}`, { modes, volume: `pv-${handle}` }),
];
/** The CSI VolumeAttachment's name, as upstream's csi attacher derives it (csi_attacher.go getAttachmentName). */
const attachmentName = (handle: string, nodeName: string) =>
  `csi-${createHash("sha256").update(`${handle}${DRIVER}${nodeName}`).digest("hex")}`;
/** An object deleted past its protection: deleted, then its finalizers stripped (a deleted object gets none back). */
const forceDelete = (kind: string, name: string): Step[] => [
  { delete: { kind, name } },
  { patch: { kind, name, body: { metadata: { finalizers: null } } } },
];
const readyNodes = (...names: string[]) => [
  { create: names.map(node) },
  ...names.map((n) => ({ kubelet: { node: n, ready: true } })),
];

/**
 * A cluster in every state a handover from KCM must keep, on separate objects that do not interact:
 * claims bound (statically, pre-bound, provisioned), provisioning handed to an external provisioner,
 * Released volumes awaiting reclaim (Retain; Delete by an external deleter), a recycler pod running,
 * a volume attached and in use (n1), a detach waiting out its 6 minutes (n2: pod gone, volume still
 * in use, node NotReady). In-tree volumes that upstream migrates to CSI: scenarios-migration.ts.
 */
const HANDOVER_STATE: Step[] = [
  { create: [sc("ext", { provisioner: EXTERNAL }), sc("hp", { provisioner: "kubernetes.io/host-path" })] },
  ...readyNodes("n1", "n2"),
  {
    create: [
      pv("static", { size: "1Gi" }),
      pv("reserved", { size: "4Gi", claim: "prebound" }),
      pv("retained", { size: "2Gi" }),
      pv("recycled", { size: "3Gi", reclaim: "Recycle" }),
      ...csiPair("v1"),
      ...csiPair("v2"),
      pvc("bound", { size: "1Gi" }),
      pvc("prebound", { size: "4Gi" }),
      pvc("gone-retained", { size: "2Gi" }),
      pvc("gone-recycled", { size: "3Gi" }),
      pvc("provisioned", { cls: "hp" }),
      pvc("external", { cls: "ext" }),
      pvc("gone-external", { cls: "ext" }),
    ],
  },
  { provision: { claim: "gone-external", pv: externalPV("gone-external-pv") } },
  { create: [pod("p1", "n1", ["claim-v1"]), pod("p2", "n2", ["claim-v2"])] },
  { attachAll: true },
  { kubelet: { node: "n1", volumesInUse: [csiVolume("v1")] } },
  { kubelet: { node: "n2", volumesInUse: [csiVolume("v2")], ready: false } },
  {
    delete: [
      { kind: "PersistentVolumeClaim", name: "gone-retained" },
      { kind: "PersistentVolumeClaim", name: "gone-recycled" },
      { kind: "PersistentVolumeClaim", name: "gone-external" },
      { kind: "Pod", name: "p2" },
    ],
  },
];

/** After the handover, the new implementation finishes what KCM started and does what comes next. */
const AFTER_HANDOVER: Step[] = [
  { provision: { claim: "external", pv: externalPV("external-pv") } },
  { podPhase: { name: "recycler-for-recycled", namespace: "default", phase: "Succeeded" } },
  { delete: { kind: "Pod", name: "p1" } },
  { kubelet: { node: "n1", volumesInUse: [] } },
  { create: [pv("late", { size: "5Gi" }), pvc("after", { size: "5Gi" })] },
];

/**
 * Upstream's recycler cannot tell its own pod from a forged one: a process that finds
 * recycler-for-<pv> deletes it, fails the attempt (the PV goes Failed) and creates it again on the
 * next sync (recyclerclient, "old recycler pod found"). KCM restarted does the same.
 */
const RECYCLER_RESTARTED = [
  "Pod recycler-for-recycled modified (deleting)",
  "Pod recycler-for-recycled deleted",
  "PersistentVolume recycled modified (phase)",
  "Pod recycler-for-recycled created",
];

export const SCENARIOS: Scenario[] = [
  // static binding
  { name: "static: one PV, one claim", steps: [{ create: [pv("a"), pvc("c")] }] },
  {
    name: "static: the smallest PV that fits",
    steps: [
      {
        create: [
          pv("one", { size: "1Gi" }),
          pv("five", { size: "5Gi" }),
          pv("ten", { size: "10Gi" }),
          pvc("c", { size: "3Gi" }),
        ],
      },
    ],
  },
  {
    name: "static: no PV big enough stays Pending",
    steps: [{ create: [pv("small"), pvc("c", { size: "2Gi" })] }],
  },
  {
    name: "static: claims bind later when a PV appears",
    steps: [{ create: [pvc("c")] }, { settle: true }, { create: [pv("late")] }],
  },
  {
    name: "static: two claims, two PVs",
    steps: [
      { create: [pv("one", { size: "1Gi" }), pv("two", { size: "2Gi" }), pvc("big", { size: "2Gi" })] },
      { settle: true },
      { create: [pvc("small")] },
    ],
  },
  // classes
  {
    name: "class: a PV of another class does not match",
    steps: [{ create: [sc("gold"), pv("a", { cls: "gold" }), pvc("c", { cls: "" })] }],
  },
  {
    name: "class: matching class among several",
    steps: [
      {
        create: [
          sc("gold"),
          sc("silver"),
          pv("g", { cls: "gold", size: "5Gi" }),
          pv("s", { cls: "silver" }),
          pvc("c", { cls: "gold" }),
        ],
      },
    ],
  },
  {
    name: "class: a claim naming a class that does not exist binds to a PV of that class",
    steps: [{ create: [pv("a", { cls: "ghost" }), pvc("c", { cls: "ghost" })] }],
  },
  {
    name: "default class: a claim without a class gets it and is provisioned",
    steps: [
      {
        create: [
          sc("standard", { provisioner: "kubernetes.io/host-path", isDefault: true }),
          pvc("c", { cls: undefined }),
        ],
      },
    ],
  },
  {
    name: "default class: none exists, the claim without a class binds to a class-less PV",
    steps: [{ create: [pv("a"), pvc("c", { cls: undefined })] }],
  },
  // access modes
  {
    name: "access modes: RWX claim skips RWO PVs",
    steps: [
      {
        create: [
          pv("rwo"),
          pv("rwx", { modes: ["ReadWriteMany"], size: "5Gi" }),
          pvc("c", { modes: ["ReadWriteMany"] }),
        ],
      },
    ],
  },
  {
    name: "access modes: the bucket with the fewest modes wins over a smaller PV",
    steps: [
      {
        create: [
          pv("exact", { size: "5Gi" }),
          pv("wider", { size: "1Gi", modes: ["ReadWriteOnce", "ReadWriteMany"] }),
          pvc("c"),
        ],
      },
    ],
  },
  {
    name: "access modes: no PV has all requested modes",
    steps: [{ create: [pv("rwo"), pvc("c", { modes: ["ReadWriteOnce", "ReadOnlyMany"] })] }],
  },
  // volumeMode
  {
    name: "volumeMode: a Block claim does not take a Filesystem PV",
    steps: [{ create: [pv("fs"), pvc("c", { volumeMode: "Block" })] }],
  },
  {
    name: "volumeMode: Block matches Block",
    steps: [
      {
        create: [
          pv("fs"),
          pv("blk", { volumeMode: "Block", size: "2Gi" }),
          pvc("c", { volumeMode: "Block" }),
        ],
      },
    ],
  },
  // selectors
  {
    name: "selector: only labelled PVs",
    steps: [
      {
        create: [
          pv("plain"),
          pv("labelled", { size: "2Gi", labels: { tier: "db" } }),
          pvc("c", { selector: { tier: "db" } }),
        ],
      },
    ],
  },
  {
    name: "selector: nothing matches",
    steps: [{ create: [pv("plain"), pvc("c", { selector: { tier: "db" } })] }],
  },
  // pre-binding
  {
    name: "pre-bound claim takes its named PV, not the smallest",
    steps: [{ create: [pv("small"), pv("named", { size: "5Gi" }), pvc("c", { volume: "named" })] }],
  },
  {
    name: "misbound: a claim marked Bound to another claim's volume is Lost",
    // Hostile input: a claim that says it is bound (annotation and phase) to a volume whose claimRef
    // names another claim. Both loops mark it Lost with ClaimMisbound; the binding invariant holds.
    thirdParty: "the test writes the claim's phase",
    steps: [
      { create: [pv("a"), pvc("c1")] },
      {
        create: [
          {
            ...pvc("c2", { volume: "a" }),
            metadata: { name: "c2", annotations: { "pv.kubernetes.io/bind-completed": "yes" } },
          },
        ],
      },
      {
        patch: {
          kind: "PersistentVolumeClaim",
          name: "c2",
          status: true,
          body: { status: { phase: "Bound" } },
        },
      },
    ],
  },
  {
    name: "pre-bound claim to a missing PV stays Pending",
    steps: [{ create: [pvc("c", { volume: "missing" })] }],
  },
  {
    name: "pre-bound PV takes its named claim",
    steps: [{ create: [pv("reserved", { claim: "c2" }), pv("free", { size: "5Gi" }), pvc("c1"), pvc("c2")] }],
  },
  {
    name: "pre-bound PV whose claim does not exist stays Available",
    steps: [{ create: [pv("reserved", { claim: "nobody" }), pvc("c")] }],
  },
  {
    name: "claim names a PV bound to another claim (misbound)",
    steps: [{ create: [pv("taken", { claim: "owner" }), pvc("owner"), pvc("thief", { volume: "taken" })] }],
  },
  // provisioning
  {
    name: "hostPath provisioning, Immediate",
    steps: [{ create: [sc("hp", { provisioner: "kubernetes.io/host-path" }), pvc("c", { cls: "hp" })] }],
  },
  {
    name: "hostPath provisioning: Delete reclaim removes the PV with the claim",
    steps: [
      { create: [sc("hp", { provisioner: "kubernetes.io/host-path" }), pvc("c", { cls: "hp" })] },
      { settle: true },
      { delete: { kind: "PersistentVolumeClaim", name: "c" } },
    ],
  },
  {
    name: "hostPath provisioning: Retain class leaves the PV Released",
    steps: [
      {
        create: [
          sc("hp", { provisioner: "kubernetes.io/host-path", reclaim: "Retain" }),
          pvc("c", { cls: "hp" }),
        ],
      },
      { settle: true },
      { delete: { kind: "PersistentVolumeClaim", name: "c" } },
    ],
  },
  {
    name: "external provisioner: hand-off annotations, then Pending",
    steps: [{ create: [sc("ext", { provisioner: "example.com/external" }), pvc("c", { cls: "ext" })] }],
  },
  {
    name: "external provisioner: the provisioned PV is bound",
    steps: [
      { create: [sc("ext", { provisioner: "example.com/external" }), pvc("c", { cls: "ext" })] },
      {
        provision: {
          claim: "c",
          pv: {
            metadata: {
              name: "ext-pv",
              annotations: { "pv.kubernetes.io/provisioned-by": "example.com/external" },
            },
            spec: {
              capacity: { storage: "1Gi" },
              accessModes: ["ReadWriteOnce"],
              storageClassName: "ext",
              persistentVolumeReclaimPolicy: "Delete",
              csi: { driver: "external.example.com", volumeHandle: "ext-1" },
            },
          },
        },
      },
    ],
  },
  {
    name: "WaitForFirstConsumer: no binding without a pod",
    steps: [{ create: [sc("late", { wffc: true }), pv("a", { cls: "late" }), pvc("c", { cls: "late" })] }],
  },
  // reclaim
  {
    name: "Retain: a deleted claim leaves its PV Released",
    steps: [
      { create: [pv("a"), pvc("c")] },
      { settle: true },
      { delete: { kind: "PersistentVolumeClaim", name: "c" } },
    ],
  },
  {
    name: "a released PV is not bound again",
    steps: [
      { create: [pv("a"), pvc("c")] },
      { settle: true },
      { delete: { kind: "PersistentVolumeClaim", name: "c" } },
      { settle: true },
      { create: [pvc("c2")] },
    ],
  },
  // protection
  {
    name: "protection: a claim in use by a pod waits for the pod",
    steps: [
      { create: [pv("a"), pvc("c"), pod("user", undefined, ["c"])] },
      { settle: true },
      { delete: { kind: "PersistentVolumeClaim", name: "c" } },
    ],
  },
  {
    name: "protection: a bound PV being deleted waits for its claim",
    steps: [
      { create: [pv("a"), pvc("c")] },
      { settle: true },
      { delete: { kind: "PersistentVolume", name: "a" } },
    ],
  },
  {
    // Beta and on by default in v1.37: bound claims get the Unused condition (the scenarios above).
    name: "feature gate PersistentVolumeClaimUnusedSinceTime=false: no Unused condition, protection as before",
    flags: ["--feature-gates=PersistentVolumeClaimUnusedSinceTime=false"],
    steps: [
      { create: [pv("a"), pvc("idle"), pv("b", { size: "2Gi" }), pvc("used", { size: "2Gi" }), node("n1")] },
      { create: [pod("user", "n1", ["used"])] },
      { delete: { kind: "PersistentVolumeClaim", name: "used" } },
      { delete: { kind: "PersistentVolumeClaim", name: "idle" } },
    ],
  },
  // controller restart
  {
    name: "restart mid-way: binding completes after a restart",
    steps: [
      { create: [pv("a", { size: "2Gi" }), pv("b", { size: "1Gi" })] },
      { restart: true },
      { create: [pvc("c")] },
    ],
  },
  // handover: KCM yesterday, kvc today (and back)
  {
    name: "handover KCM→kvc: every state, then carry on",
    startOn: "kube-controller-manager",
    steps: [...HANDOVER_STATE, { switchTo: "kvc" }, ...AFTER_HANDOVER],
    handoverWrites: RECYCLER_RESTARTED,
  },
  {
    name: "rollback KCM→kvc→KCM: every state, then carry on",
    startOn: "kube-controller-manager",
    steps: [
      ...HANDOVER_STATE,
      { switchTo: "kvc" },
      { switchTo: "kube-controller-manager" },
      ...AFTER_HANDOVER,
    ],
    handoverWrites: RECYCLER_RESTARTED,
  },
  // attach/detach
  {
    name: "attach: a pod's CSI volume gets a VolumeAttachment; attached, the node lists it",
    steps: [
      ...readyNodes("n1"),
      { create: csiPair("v1") },
      { settle: true },
      { create: [pod("p1", "n1", ["claim-v1"])] },
      { attachAll: true },
    ],
  },
  {
    name: "attach: attachRequired=false needs no VolumeAttachment",
    steps: [
      ...readyNodes("n1"),
      { create: [csiDriver(DRIVER, false), ...csiPair("v1")] },
      { settle: true },
      { create: [pod("p1", "n1", ["claim-v1"])] },
    ],
  },
  {
    name: "attach: RWO wanted on two nodes: one VolumeAttachment, the other pod warned",
    steps: [
      ...readyNodes("n1", "n2"),
      { create: csiPair("v1") },
      { settle: true },
      { create: [pod("p1", "n1", ["claim-v1"])] },
      { attachAll: true },
      { create: [pod("p2", "n2", ["claim-v1"])] },
    ],
  },
  {
    name: "attach: RWX on two nodes: two VolumeAttachments",
    steps: [
      ...readyNodes("n1", "n2"),
      { create: csiPair("v1", ["ReadWriteMany"]) },
      { settle: true },
      { create: [pod("p1", "n1", ["claim-v1"]), pod("p2", "n2", ["claim-v1"])] },
      { attachAll: true },
    ],
  },
  {
    name: "detach: not while the node reports the volume in use",
    steps: [
      ...readyNodes("n1"),
      { create: csiPair("v1") },
      { settle: true },
      { create: [pod("p1", "n1", ["claim-v1"])] },
      { attachAll: true },
      { kubelet: { node: "n1", volumesInUse: [csiVolume("v1")] } },
      { delete: { kind: "Pod", name: "p1" } },
    ],
  },
  {
    name: "detach: once the node no longer uses the volume",
    steps: [
      ...readyNodes("n1"),
      { create: csiPair("v1") },
      { settle: true },
      { create: [pod("p1", "n1", ["claim-v1"])] },
      { attachAll: true },
      { kubelet: { node: "n1", volumesInUse: [csiVolume("v1")] } },
      { delete: { kind: "Pod", name: "p1" } },
      { settle: true },
      { kubelet: { node: "n1", volumesInUse: [] } },
    ],
  },
  {
    name: "detach: the out-of-service taint forces it",
    steps: [
      ...readyNodes("n1"),
      { create: csiPair("v1") },
      { settle: true },
      { create: [pod("p1", "n1", ["claim-v1"])] },
      { attachAll: true },
      { kubelet: { node: "n1", volumesInUse: [csiVolume("v1")], outOfService: true } },
      { delete: { kind: "Pod", name: "p1" } },
    ],
  },
  {
    name: "attach: restart with attached volumes keeps them",
    steps: [
      ...readyNodes("n1"),
      { create: csiPair("v1") },
      { settle: true },
      { create: [pod("p1", "n1", ["claim-v1"])] },
      { attachAll: true },
      { restart: true },
    ],
  },
  // The attach/detach controller's periodic loops: a scenario waits across their periods instead of
  // restarting the implementation (which starts both loops afresh).
  {
    name: "reconciler sync: a VolumeAttachment deleted behind its back is attached again",
    // Every 2 s the reconciler verifies what it believes attached (CSI: reads the VolumeAttachment),
    // finds it gone, marks it detached and, the pod still wanting it, attaches again.
    flags: ["--attach-detach-reconcile-sync-period=2s"],
    thirdParty: "the test deletes the VolumeAttachment",
    steps: [
      ...readyNodes("n1"),
      { create: csiPair("v1") },
      { create: [pod("p1", "n1", ["claim-v1"])] },
      { attachAll: { pvs: ["pv-v1"], node: "n1" } },
      { checkpoint: "attached" },
      { delete: { kind: "VolumeAttachment", name: attachmentName("v1", "n1") } },
      { attachAll: { pvs: ["pv-v1"], node: "n1" } },
    ],
  },
  {
    name: "reconciler sync disabled: a VolumeAttachment deleted behind its back stays gone",
    // The same with --disable-attach-detach-reconcile-sync: the node goes on listing the volume.
    flags: ["--attach-detach-reconcile-sync-period=2s", "--disable-attach-detach-reconcile-sync"],
    thirdParty: "the test deletes the VolumeAttachment",
    steps: [
      ...readyNodes("n1"),
      { create: csiPair("v1") },
      { create: [pod("p1", "n1", ["claim-v1"])] },
      { attachAll: { pvs: ["pv-v1"], node: "n1" } },
      { delete: { kind: "VolumeAttachment", name: attachmentName("v1", "n1") } },
      { settle: true },
    ],
  },
  {
    name: "populator: a deleted pod whose claim is gone is detached by the populator's pass",
    // The pod's deletion cannot be resolved to its volume (no claim), so the pod stays desired until
    // the desired-state populator (every minute, a constant on both sides) finds it gone. When in
    // its period the pass falls is set by the process's start: no checkpoint before it.
    thirdParty: "the test strips the claim's finalizer",
    steps: [
      ...readyNodes("n1"),
      { create: csiPair("v1") },
      { create: [pod("p1", "n1", ["claim-v1"])] },
      { attachAll: { pvs: ["pv-v1"], node: "n1" } },
      ...forceDelete("PersistentVolumeClaim", "claim-v1"),
      { delete: { kind: "Pod", name: "p1" } },
      { gone: { kind: "VolumeAttachment", name: attachmentName("v1", "n1"), withinMs: 100_000 } },
    ],
  },
  {
    name: "populator: a deleted pod whose PV is gone is detached by the populator's pass",
    thirdParty: "the test strips the PV's finalizer",
    steps: [
      ...readyNodes("n1"),
      { create: csiPair("v1") },
      { create: [pod("p1", "n1", ["claim-v1"])] },
      { attachAll: { pvs: ["pv-v1"], node: "n1" } },
      ...forceDelete("PersistentVolume", "pv-v1"),
      { delete: { kind: "Pod", name: "p1" } },
      { gone: { kind: "VolumeAttachment", name: attachmentName("v1", "n1"), withinMs: 100_000 } },
    ],
  },
  // Competing claims, created in one step, bound by kvc's 8 claim workers (the production default)
  // and KCM's one: the pools must end alike and no volume may go to two claims.
  {
    name: "concurrency: ten claims race for six equal PVs",
    competing: "ten equal claims for six equal PVs: which six bind is the workers' order",
    steps: [
      {
        create: [
          ...Array.from({ length: 6 }, (_, i) => pv(`eq${i}`)),
          ...Array.from({ length: 10 }, (_, i) => pvc(`c${i}`)),
        ],
      },
    ],
  },
  {
    name: "concurrency: claims of three sizes, a class and a pre-bound PV race in one step",
    competing: "claims of one shape are interchangeable, as are the PVs of one shape",
    // Each size has as many PVs as claims (the 5Gi one less), so the smallest-fit rule leaves one
    // outcome per shape in any order: 1Gi claims never spill to 2Gi PVs. The pre-bound PV is taken
    // by its claim only; the gold claims by gold PVs only; the RWX claim by the RWX PV only.
    steps: [
      {
        create: [
          sc("gold"),
          ...[0, 1, 2].map((i) => pv(`s${i}`, { size: "1Gi" })),
          ...[0, 1, 2].map((i) => pv(`m${i}`, { size: "2Gi" })),
          ...[0, 1].map((i) => pv(`l${i}`, { size: "5Gi" })),
          ...[0, 1].map((i) => pv(`g${i}`, { size: "1Gi", cls: "gold" })),
          pv("rwx", { size: "1Gi", modes: ["ReadWriteOnce", "ReadWriteMany"] }),
          pv("reserved", { size: "1Gi", claim: "pre" }),
          ...[0, 1, 2].map((i) => pvc(`small${i}`, { size: "1Gi" })),
          ...[0, 1, 2].map((i) => pvc(`medium${i}`, { size: "2Gi" })),
          ...[0, 1, 2].map((i) => pvc(`large${i}`, { size: "5Gi" })),
          ...[0, 1, 2].map((i) => pvc(`gold${i}`, { size: "1Gi", cls: "gold" })),
          pvc("shared", { size: "1Gi", modes: ["ReadWriteMany"] }),
          pvc("pre", { size: "1Gi" }),
        ],
      },
    ],
  },
];

/**
 * Scenarios that wait out a long period, run only with KVC_CONFORMANCE_LONG=1 (each costs minutes of
 * CI): the reconciler's 6-minute wait for unmount before a forced detach, a constant on both sides.
 */
export const LONG_SCENARIOS: Scenario[] = [
  {
    name: "detach: a volume still mounted on a NotReady node is force-detached after the 6-minute wait",
    steps: [
      ...readyNodes("n1"),
      { create: csiPair("v1") },
      { create: [pod("p1", "n1", ["claim-v1"])] },
      { attachAll: { pvs: ["pv-v1"], node: "n1" } },
      { kubelet: { node: "n1", volumesInUse: [csiVolume("v1")], ready: false } },
      { delete: { kind: "Pod", name: "p1" } },
      { checkpoint: "waiting for unmount" },
      { gone: { kind: "VolumeAttachment", name: attachmentName("v1", "n1"), withinMs: 8 * 60_000 } },
    ],
  },
];
