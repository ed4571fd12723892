import assert from "node:assert/strict";
import { describe, test } from "node:test";
import type {
  V1Node,
  V1PersistentVolume,
  V1PersistentVolumeClaim,
  V1Pod,
  V1StorageClass,
  V1VolumeAttachment,
} from "@kubernetes/client-node";
import type { AuditEvent } from "../support/audit.js";
import { emptyWorld, keyOf, type Observation, type World } from "../chaos/history.js";
import {
  checkObservations,
  checkSettled,
  MAX_WAIT_FOR_UNMOUNT_MS,
  oneWriterPerTerm,
  retainedNotDeleted,
  SettleWindow,
  settledState,
  TOUCHED,
  type Explanation,
  type Violation,
} from "../chaos/invariants.js";
import { findMatchingVolume } from "../chaos/find-matching-volume.js";

/*
 * Each invariant of the chaos suite, fed a recorded history with a violation (it must report it) and
 * the same history without (it must not).
 */

const DRIVER = "chaos.csi.example.com";
const T0 = Date.parse("2026-01-01T00:00:00Z");

const claim = (
  name: string,
  uid: string,
  phase: string,
  volumeName?: string,
  extra: Partial<V1PersistentVolumeClaim["metadata"]> = {},
): V1PersistentVolumeClaim => ({
  metadata: { namespace: "default", name, uid, ...extra },
  spec: { ...(volumeName ? { volumeName } : {}), accessModes: ["ReadWriteOnce"] },
  status: { phase },
});
const pv = (
  name: string,
  phase: string,
  claimRef?: { name: string; uid: string },
  extra: Partial<V1PersistentVolume["spec"]> = {},
  annotations?: Record<string, string>,
): V1PersistentVolume => ({
  metadata: { name, uid: `uid-${name}`, ...(annotations ? { annotations } : {}) },
  spec: {
    accessModes: ["ReadWriteOnce"],
    csi: { driver: DRIVER, volumeHandle: name },
    ...(claimRef ? { claimRef: { namespace: "default", ...claimRef } } : {}),
    ...extra,
  },
  status: { phase },
});
const va = (pvName: string, node: string, attached: boolean, deleting = false): V1VolumeAttachment => ({
  metadata: { name: `va-${pvName}-${node}`, ...(deleting ? { deletionTimestamp: new Date(T0) } : {}) },
  spec: { attacher: DRIVER, nodeName: node, source: { persistentVolumeName: pvName } },
  status: { attached },
});
const node = (name: string, inUse: string[], ready = true, taints: V1Node["spec"] = {}): V1Node => ({
  metadata: { name },
  spec: taints,
  status: {
    volumesInUse: inUse.map((h) => `kubernetes.io/csi/${DRIVER}^${h}`),
    volumesAttached: inUse.map((h) => ({ name: `kubernetes.io/csi/${DRIVER}^${h}`, devicePath: "" })),
    conditions: [{ type: "Ready", status: ready ? "True" : "False" }],
  },
});
const pod = (name: string, nodeName: string, claimName: string): V1Pod => ({
  metadata: { namespace: "default", name, uid: `uid-${name}` },
  spec: { nodeName, containers: [], volumes: [{ name: "v", persistentVolumeClaim: { claimName } }] },
});

/** Observations in the order given, rv 1, 2, 3…, `at` one second apart unless set. */
function history(...objs: (Omit<Observation, "rv" | "at"> & { at?: number })[]): Observation[] {
  return objs.map((o, i) => ({ ...o, rv: i + 1, at: o.at ?? T0 + i * 1000 }) as Observation);
}
const invariants = (vs: Violation[]) => vs.map((v) => v.invariant);

describe("chaos invariants over a recorded history", () => {
  test("a PV bound to two claims at once is a double bind", () => {
    const h = history(
      { kind: "PersistentVolume", object: pv("pv-1", "Available") },
      { kind: "PersistentVolumeClaim", object: claim("a", "uid-a", "Bound", "pv-1") },
      { kind: "PersistentVolumeClaim", object: claim("b", "uid-b", "Bound", "pv-1") },
    );
    const vs = checkObservations(h);
    assert.deepEqual(invariants(vs), ["double-bind"]);
    assert.match(vs[0]!.message, /PV pv-1 is bound to claims default\/a and default\/b/);
    // The first claim deleted before the second binds: a rebinding, not a double bind.
    const clean = history(
      { kind: "PersistentVolumeClaim", object: claim("a", "uid-a", "Bound", "pv-1") },
      { kind: "PersistentVolumeClaim", object: claim("a", "uid-a", "Bound", "pv-1"), deleted: true },
      { kind: "PersistentVolumeClaim", object: claim("b", "uid-b", "Bound", "pv-1") },
    );
    assert.deepEqual(checkObservations(clean), []);
  });

  test("order comes from resourceVersions, not from arrival", () => {
    // b's Bound state arrived first but happened after a was deleted.
    const h: Observation[] = [
      { kind: "PersistentVolumeClaim", rv: 9, at: T0, object: claim("b", "uid-b", "Bound", "pv-1") },
      { kind: "PersistentVolumeClaim", rv: 3, at: T0 + 1, object: claim("a", "uid-a", "Bound", "pv-1") },
      {
        kind: "PersistentVolumeClaim",
        rv: 3,
        at: T0 + 2,
        object: claim("a", "uid-a", "Bound", "pv-1"),
        deleted: true,
      },
    ];
    assert.deepEqual(checkObservations(h), []);
  });

  test("a Bound claim whose volumeName changes, or a PV moved to another live claim, lost a binding", () => {
    const renamed = history(
      { kind: "PersistentVolumeClaim", object: claim("a", "uid-a", "Bound", "pv-1") },
      { kind: "PersistentVolumeClaim", object: claim("a", "uid-a", "Bound", "pv-2") },
    );
    assert.deepEqual(invariants(checkObservations(renamed)), ["binding-lost"]);

    const moved = history(
      { kind: "PersistentVolumeClaim", object: claim("a", "uid-a", "Bound", "pv-1") },
      { kind: "PersistentVolume", object: pv("pv-1", "Bound", { name: "a", uid: "uid-a" }) },
      { kind: "PersistentVolume", object: pv("pv-1", "Bound", { name: "b", uid: "uid-b" }) },
    );
    const vs = checkObservations(moved);
    assert.deepEqual(invariants(vs), ["binding-lost"]);
    assert.match(vs[0]!.message, /PV pv-1 \(rv 3\) moved from live claim default\/a to claim uid uid-b/);

    const lost = history(
      { kind: "PersistentVolume", object: pv("pv-1", "Bound", { name: "a", uid: "uid-a" }) },
      { kind: "PersistentVolumeClaim", object: claim("a", "uid-a", "Bound", "pv-1") },
      { kind: "PersistentVolumeClaim", object: claim("a", "uid-a", "Lost", "pv-1") },
    );
    assert.deepEqual(invariants(checkObservations(lost)), ["binding-lost"]);

    // Released after its claim was deleted, then bound to a new claim: allowed.
    const reused = history(
      { kind: "PersistentVolumeClaim", object: claim("a", "uid-a", "Bound", "pv-1") },
      { kind: "PersistentVolume", object: pv("pv-1", "Bound", { name: "a", uid: "uid-a" }) },
      { kind: "PersistentVolumeClaim", object: claim("a", "uid-a", "Bound", "pv-1"), deleted: true },
      { kind: "PersistentVolume", object: pv("pv-1", "Released", { name: "a", uid: "uid-a" }) },
      { kind: "PersistentVolume", object: pv("pv-1", "Available") },
      { kind: "PersistentVolume", object: pv("pv-1", "Bound", { name: "b", uid: "uid-b" }) },
    );
    assert.deepEqual(checkObservations(reused), []);
  });

  test("a single-node volume attached to two nodes is a multi-attach; RWX is not", () => {
    const steps = (spec: Partial<V1PersistentVolume["spec"]>) =>
      history(
        { kind: "PersistentVolume", object: pv("pv-1", "Bound", { name: "a", uid: "uid-a" }, spec) },
        { kind: "VolumeAttachment", object: va("pv-1", "n1", true) },
        { kind: "VolumeAttachment", object: va("pv-1", "n2", false) },
        { kind: "VolumeAttachment", object: va("pv-1", "n2", true) },
      );
    const vs = checkObservations(steps({}));
    assert.deepEqual(invariants(vs), ["multi-attach"]);
    assert.match(vs[0]!.message, /single-node PV pv-1 attached to n1 and n2 \(rv 4\)/);
    assert.deepEqual(checkObservations(steps({ accessModes: ["ReadWriteMany"] })), []);
    // Detached from n1 first: a move, not a multi-attach.
    const moved = history(
      { kind: "PersistentVolume", object: pv("pv-1", "Bound", { name: "a", uid: "uid-a" }) },
      { kind: "VolumeAttachment", object: va("pv-1", "n1", true) },
      { kind: "VolumeAttachment", object: va("pv-1", "n1", true), deleted: true },
      { kind: "VolumeAttachment", object: va("pv-1", "n2", true) },
    );
    assert.deepEqual(checkObservations(moved), []);
  });

  test("a detach of a volume the node has in use breaks the promise, outside the force rules", () => {
    const detach = (n: V1Node, podGoneAt = T0, detachAt = T0 + 1000) =>
      checkObservations([
        { kind: "PersistentVolumeClaim", rv: 1, at: T0, object: claim("a", "uid-a", "Bound", "pv-1") },
        { kind: "PersistentVolume", rv: 2, at: T0, object: pv("pv-1", "Bound", { name: "a", uid: "uid-a" }) },
        { kind: "Pod", rv: 3, at: T0, object: pod("p", "n1", "a") },
        { kind: "Pod", rv: 4, at: podGoneAt, object: pod("p", "n1", "a"), deleted: true },
        { kind: "VolumeAttachment", rv: 5, at: T0, object: va("pv-1", "n1", true) },
        { kind: "Node", rv: 6, at: T0, object: n },
        { kind: "VolumeAttachment", rv: 7, at: detachAt, object: va("pv-1", "n1", true, true) },
      ]);
    const vs = detach(node("n1", ["pv-1"]));
    assert.deepEqual(invariants(vs), ["detach-of-mounted"]);
    assert.match(vs[0]!.message, /va-pv-1-n1 detached while node n1 has .*\^pv-1 in use \(rv 7\)/);
    // The kubelet had unmounted it.
    assert.deepEqual(detach(node("n1", [])), []);
    // Out-of-service taint: forced, allowed.
    const taint = { taints: [{ key: "node.kubernetes.io/out-of-service", effect: "NoExecute" }] };
    assert.deepEqual(detach(node("n1", ["pv-1"], true, taint)), []);
    // An unready node: only after the unmount timeout since the pod left.
    assert.deepEqual(invariants(detach(node("n1", ["pv-1"], false))), ["detach-of-mounted"]);
    assert.deepEqual(detach(node("n1", ["pv-1"], false), T0, T0 + MAX_WAIT_FOR_UNMOUNT_MS + 1), []);
    // A healthy node is never force-detached, however long.
    assert.deepEqual(invariants(detach(node("n1", ["pv-1"]), T0, T0 + MAX_WAIT_FOR_UNMOUNT_MS + 1)), [
      "detach-of-mounted",
    ]);
  });

  test("two replicas writing in one lease term, measured from the audit log", () => {
    // A loop's writes end with its client name, the Lease's with "/leader-election".
    const ua = (id: string, le = false) =>
      `kube-volume-controller/v0.1.0 (linux/x64) ${id}/${le ? "leader-election" : "persistent-volume-binder"}`;
    const write = (id: string, at: number, code = 200, le = false): AuditEvent => ({
      verb: "update",
      user: { username: "admin" },
      userAgent: ua(id, le),
      requestURI: "/api/v1/persistentvolumes/pv-1",
      responseStatus: { code },
      requestReceivedTimestamp: new Date(at).toISOString(),
    });
    const terms = [
      { holder: "host_a", acquiredAt: T0 },
      { holder: "host_b", acquiredAt: T0 + 10_000 },
    ];
    const clean = [
      write("host_a", T0 + 1),
      write("host_b", T0 + 10_001),
      write("host_a", T0 + 11_000, 200, true),
    ];
    assert.deepEqual(oneWriterPerTerm(clean, terms), []);
    // a resumed after a pause and wrote in b's term; a refused write (409) does not count.
    const vs = oneWriterPerTerm(
      [...clean, write("host_a", T0 + 12_000), write("host_a", T0 + 12_001, 409)],
      terms,
    );
    assert.deepEqual(invariants(vs), ["two-writers"]);
    assert.match(
      vs[0]!.message,
      /host_a wrote \(update .*\) in the term host_b acquired at .*; its last Lease write was received 1000 ms before/,
    );
    // Nobody writes before the first term.
    assert.deepEqual(invariants(oneWriterPerTerm([write("host_a", T0 - 1)], terms)), ["two-writers"]);
  });
});

describe("chaos settled-state checks", () => {
  const world = (...objs: Omit<Observation, "rv" | "at">[]): World => {
    const w = emptyWorld();
    for (const o of objs) (w[o.kind] as Map<string, unknown>).set(keyOf(o.object), o.object);
    return w;
  };
  const classes = new Map<string, V1StorageClass>([
    ["static", { metadata: { name: "static" }, provisioner: "x", volumeBindingMode: "Immediate" }],
    ["wffc", { metadata: { name: "wffc" }, provisioner: "x", volumeBindingMode: "WaitForFirstConsumer" }],
  ]);
  const settled = (w: World, events: Explanation[] = []) => invariants(checkSettled(w, events, classes));

  test("claims Bound or explained", () => {
    const bound = world(
      { kind: "PersistentVolumeClaim", object: claim("a", "uid-a", "Bound", "pv-1") },
      { kind: "PersistentVolume", object: pv("pv-1", "Bound", { name: "a", uid: "uid-a" }) },
    );
    assert.deepEqual(settled(bound), []);
    const pending = world({ kind: "PersistentVolumeClaim", object: claim("a", "uid-a", "Pending") });
    assert.deepEqual(settled(pending), ["claim-settled"]);
    assert.deepEqual(settled(pending, [{ uid: "uid-a", reason: "WaitForFirstConsumer" }]), []);
    const halfBound = world(
      { kind: "PersistentVolumeClaim", object: claim("a", "uid-a", "Bound", "pv-1") },
      { kind: "PersistentVolume", object: pv("pv-1", "Available") },
    );
    assert.deepEqual(settled(halfBound), ["claim-settled"]);
  });

  test("Released volumes reclaimed per policy; provisioned volumes do not outlive their claim", () => {
    const released = (policy: string) =>
      world({
        kind: "PersistentVolume",
        object: pv(
          "pv-1",
          "Released",
          { name: "a", uid: "uid-a" },
          { persistentVolumeReclaimPolicy: policy },
        ),
      });
    assert.deepEqual(settled(released("Retain")), []);
    assert.deepEqual(settled(released("Delete")), ["reclaim"]);
    assert.deepEqual(settled(released("Recycle")), ["reclaim"]);
    assert.deepEqual(settled(released("Delete"), [{ uid: "uid-pv-1", reason: "VolumeFailedDelete" }]), []);
    const orphan = world({
      kind: "PersistentVolume",
      object: pv(
        "pv-1",
        "Bound",
        { name: "a", uid: "uid-a" },
        { persistentVolumeReclaimPolicy: "Delete" },
        { "pv.kubernetes.io/provisioned-by": "x" },
      ),
    });
    assert.deepEqual(settled(orphan), ["reclaim", "orphaned-volume"]);
  });

  test("desired attachments attached and reported; no VolumeAttachment without a pod", () => {
    const base = [
      { kind: "PersistentVolumeClaim", object: claim("a", "uid-a", "Bound", "pv-1") },
      { kind: "PersistentVolume", object: pv("pv-1", "Bound", { name: "a", uid: "uid-a" }) },
    ] as const;
    const ok = world(
      ...base,
      { kind: "Pod", object: pod("p", "n1", "a") },
      { kind: "VolumeAttachment", object: va("pv-1", "n1", true) },
      { kind: "Node", object: node("n1", ["pv-1"]) },
    );
    assert.deepEqual(settled(ok), []);
    const notAttached = world(
      ...base,
      { kind: "Pod", object: pod("p", "n1", "a") },
      { kind: "VolumeAttachment", object: va("pv-1", "n1", false) },
      { kind: "Node", object: node("n1", []) },
    );
    assert.deepEqual(settled(notAttached), ["attachment-settled"]);
    const stray = world(...base, { kind: "VolumeAttachment", object: va("pv-1", "n2", true) });
    const vs = checkSettled(stray, [], classes);
    assert.deepEqual(invariants(vs), ["attachment-settled"]);
    assert.match(vs[0]!.message, /va-pv-1-n2 has no pod on its node that wants it/);
  });

  // A static claim and volume as the workload makes them: class, size, ReadWriteOnce.
  const want = (
    name: string,
    uid: string,
    spec: Partial<V1PersistentVolumeClaim["spec"]> = {},
  ): V1PersistentVolumeClaim => ({
    metadata: { namespace: "default", name, uid },
    spec: {
      accessModes: ["ReadWriteOnce"],
      storageClassName: "static",
      resources: { requests: { storage: "1Gi" } },
      ...spec,
    },
    status: { phase: "Pending" },
  });
  const offer = (
    name: string,
    spec: Partial<V1PersistentVolume["spec"]> = {},
    phase = "Available",
    metadata: Partial<V1PersistentVolume["metadata"]> = {},
  ): V1PersistentVolume => ({
    metadata: { name, uid: `uid-${name}`, ...metadata },
    spec: {
      accessModes: ["ReadWriteOnce"],
      capacity: { storage: "1Gi" },
      storageClassName: "static",
      hostPath: { path: `/tmp/${name}` },
      ...spec,
    },
    status: { phase },
  });
  const failedBinding = [{ uid: "uid-a", reason: "ProvisioningFailed" }];

  test("a Pending claim that an Available volume fits is not settled, whatever events it has", () => {
    const w = world(
      { kind: "PersistentVolumeClaim", object: want("a", "uid-a") },
      { kind: "PersistentVolume", object: offer("pv-1") },
    );
    const vs = checkSettled(w, failedBinding, classes);
    assert.deepEqual(invariants(vs), ["claim-settled"]);
    assert.match(vs[0]!.message, /claim default\/a is Pending while PV pv-1 is Available and fits it/);
    // Volumes upstream's FindMatchingVolume passes over: the claim waits, explained.
    for (const pv of [
      offer("pv-1", { capacity: { storage: "512Mi" } }),
      offer("pv-1", { storageClassName: "other" }),
      offer("pv-1", { accessModes: ["ReadOnlyMany"] }),
      offer("pv-1", { volumeMode: "Block" }),
      offer("pv-1", { volumeAttributesClassName: "fast" }),
      offer("pv-1", {}, "Released"),
      offer("pv-1", {}, "Available", { deletionTimestamp: new Date(T0) }),
      offer("pv-1", { claimRef: { namespace: "default", name: "b" } }),
    ]) {
      const waiting = world(
        { kind: "PersistentVolumeClaim", object: want("a", "uid-a") },
        { kind: "PersistentVolume", object: pv },
      );
      assert.deepEqual(
        invariants(checkSettled(waiting, failedBinding, classes)).filter((i) => i === "claim-settled"),
        [],
        JSON.stringify(pv.spec),
      );
    }
    // Bigger and with more access modes still fits.
    const roomy = world(
      { kind: "PersistentVolumeClaim", object: want("a", "uid-a") },
      {
        kind: "PersistentVolume",
        object: offer("pv-1", {
          capacity: { storage: "2Gi" },
          accessModes: ["ReadWriteOnce", "ReadOnlyMany"],
        }),
      },
    );
    assert.deepEqual(settled(roomy, failedBinding), ["claim-settled"]);
  });

  test("WaitForFirstConsumer leaves Available volumes to the scheduler, not volumes pre-bound to the claim", () => {
    const wffc = want("a", "uid-a", { storageClassName: "wffc" });
    const available = world(
      { kind: "PersistentVolumeClaim", object: wffc },
      { kind: "PersistentVolume", object: offer("pv-1", { storageClassName: "wffc" }) },
    );
    assert.deepEqual(settled(available, [{ uid: "uid-a", reason: "WaitForFirstConsumer" }]), []);
    // Provisioned for it (claimRef with its uid), not yet Bound: the binder must finish.
    const prebound = world(
      { kind: "PersistentVolumeClaim", object: wffc },
      {
        kind: "PersistentVolume",
        object: offer(
          "pv-1",
          { storageClassName: "wffc", claimRef: { namespace: "default", name: "a", uid: "uid-a" } },
          "Bound",
        ),
      },
    );
    const vs = checkSettled(prebound, [{ uid: "uid-a", reason: "WaitForFirstConsumer" }], classes);
    assert.ok(invariants(vs).includes("claim-settled"));
    assert.match(vs[0]!.message, /Pending while PV pv-1 is pre-bound to it/);
  });

  test("a Pending claim naming a volume that names it, or is unbound and fits, is not settled", () => {
    const named = want("a", "uid-a", { volumeName: "pv-1" });
    const unbound = world(
      { kind: "PersistentVolumeClaim", object: named },
      { kind: "PersistentVolume", object: offer("pv-1") },
    );
    assert.deepEqual(settled(unbound, failedBinding), ["claim-settled"]);
    const elsewhere = world(
      { kind: "PersistentVolumeClaim", object: named },
      {
        kind: "PersistentVolume",
        object: offer("pv-1", { claimRef: { namespace: "default", name: "b", uid: "uid-b" } }, "Bound"),
      },
      { kind: "PersistentVolumeClaim", object: claim("b", "uid-b", "Bound", "pv-1") },
    );
    assert.deepEqual(settled(elsewhere, [{ uid: "uid-a", reason: "FailedBinding" }]), []);
  });

  test("the matcher oracle picks as upstream does, and refuses what the workload never creates", () => {
    const c = want("a", "uid-a");
    // The access-mode set with the fewest modes first, then the smallest volume in it.
    const pick = findMatchingVolume(
      c,
      [
        offer("rwo-rox-1g", { accessModes: ["ReadWriteOnce", "ReadOnlyMany"] }),
        offer("rwo-3g", { capacity: { storage: "3Gi" } }),
        offer("rwo-2g", { capacity: { storage: "2Gi" } }),
      ],
      classes,
    );
    assert.equal(pick?.metadata?.name, "rwo-2g");
    const selector = world({
      kind: "PersistentVolumeClaim",
      object: want("a", "uid-a", { selector: { matchLabels: { x: "y" } } }),
    });
    assert.deepEqual(settled(selector), ["oracle-scope"]);
    const fraction = world(
      { kind: "PersistentVolumeClaim", object: want("a", "uid-a") },
      { kind: "PersistentVolume", object: offer("pv-1", { capacity: { storage: "1.5Gi" } }) },
    );
    assert.deepEqual(settled(fraction, failedBinding), ["oracle-scope"]);
  });

  test("every volume phase has its settled form", () => {
    const live = { kind: "PersistentVolumeClaim", object: claim("a", "uid-a", "Bound", "pv-1") } as const;
    const ref = { namespace: "default", name: "a", uid: "uid-a" };
    const one = (pv: V1PersistentVolume, ...more: Omit<Observation, "rv" | "at">[]) =>
      world({ kind: "PersistentVolume", object: pv }, ...more);
    assert.deepEqual(settled(one(offer("pv-1"))), []);
    assert.deepEqual(settled(one(offer("pv-1", { claimRef: ref }))), ["volume-settled"]);
    assert.deepEqual(settled(one(offer("pv-1", { claimRef: ref }, "Bound"), live)), []);
    const otherClaim = claim("a", "uid-a", "Bound", "pv-2");
    assert.deepEqual(
      settled(
        one(offer("pv-1", { claimRef: ref }, "Bound"), { kind: "PersistentVolumeClaim", object: otherClaim }),
      ),
      ["claim-settled", "volume-settled"],
    );
    assert.deepEqual(settled(one(offer("pv-1", { claimRef: ref }, "Released"), live)), [
      "claim-settled",
      "volume-settled",
    ]);
    const retained = offer("pv-1", { claimRef: ref, persistentVolumeReclaimPolicy: "Retain" }, "Released");
    assert.deepEqual(settled(one(retained)), []);
    const failed = offer("pv-1", { claimRef: ref, persistentVolumeReclaimPolicy: "Recycle" }, "Failed");
    assert.deepEqual(settled(one(failed)), ["volume-settled"]);
    assert.deepEqual(settled(one(failed), [{ uid: "uid-pv-1", reason: "VolumeFailedRecycle" }]), []);
    const withMessage = { ...failed, status: { phase: "Failed", message: "recycler pod failed" } };
    assert.deepEqual(settled(one(withMessage)), []);
    assert.deepEqual(settled(one(offer("pv-1", {}, "Pending"))), ["volume-settled"]);
  });

  test("the settled state ignores resourceVersions and the second writer's mark, nothing else", () => {
    const a = world({ kind: "PersistentVolume", object: offer("pv-1") });
    const touched = world({
      kind: "PersistentVolume",
      object: offer("pv-1", {}, "Available", { resourceVersion: "9", annotations: { [TOUCHED]: "3" } }),
    });
    assert.equal(settledState(a), settledState(touched));
    assert.notEqual(
      settledState(a),
      settledState(world({ kind: "PersistentVolume", object: offer("pv-1", {}, "Bound") })),
    );
  });

  test("a Retain volume is never made Available again nor deleted by kvc", () => {
    const ref = { namespace: "default", name: "a", uid: "uid-a" };
    const retain = (phase: string, claimRef?: typeof ref) =>
      offer("pv-1", { persistentVolumeReclaimPolicy: "Retain", ...(claimRef ? { claimRef } : {}) }, phase);
    const reused = history(
      { kind: "PersistentVolume", object: retain("Bound", ref) },
      { kind: "PersistentVolume", object: retain("Released", ref) },
      { kind: "PersistentVolume", object: retain("Available") },
    );
    const vs = checkObservations(reused);
    assert.deepEqual(invariants(vs), ["retain-kept"]);
    assert.match(vs[0]!.message, /PV pv-1 \(Retain\) was Released and is now Available \(rv 3\)/);
    assert.deepEqual(checkObservations(reused.slice(0, 2)), []);
    const del = (userAgent: string, code = 200): AuditEvent => ({
      verb: "delete",
      user: { username: "admin" },
      userAgent,
      requestURI: "/api/v1/persistentvolumes/pv-1",
      objectRef: { resource: "persistentvolumes", name: "pv-1" },
      responseStatus: { code },
      requestReceivedTimestamp: new Date(T0).toISOString(),
    });
    const kvc = "kube-volume-controller/v0.1.0 (linux/x64) host_a";
    assert.deepEqual(invariants(retainedNotDeleted([del(kvc)], reused)), ["retain-kept"]);
    assert.deepEqual(retainedNotDeleted([del(kvc, 404), del("chaos-workload")], reused), []);
  });

  test("settled takes N consecutive passing polls of one state; a change or a violation starts over", () => {
    const w = new SettleWindow(3);
    const broken = [{ invariant: "claim-settled", message: "x" }];
    assert.deepEqual(
      [
        w.observe([], "a"),
        w.observe([], "a"),
        w.observe([], "b"),
        w.observe([], "b"),
        w.observe(broken, "b"),
        w.observe([], "b"),
        w.observe([], "b"),
        w.observe([], "b"),
      ],
      [false, false, false, false, false, false, false, true],
    );
  });
});
