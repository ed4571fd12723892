import assert from "node:assert/strict";
import { describe, test } from "node:test";
import type { V1PersistentVolume, V1PersistentVolumeClaim } from "@kubernetes/client-node";
import {
  FINALIZER_EXTERNAL_PV_PROTECTION,
  FINALIZER_IN_TREE_PV_PROTECTION,
} from "../../src/persistentvolume/annotations.js";
import { PV_PROTECTION_FINALIZER, PVC_PROTECTION_FINALIZER } from "../../src/protection/finalizer.js";
import { claimDecisions, volumeDecisions } from "../../src/shadow/decisions.js";

/* A finalizer's removal is a decision of the loop that owns it only where that loop removes it. */

const DELETED_AT = new Date("2026-01-01T00:00:00Z");

function claim(finalizers: string[], deleting: boolean): V1PersistentVolumeClaim {
  return {
    metadata: { name: "c", namespace: "ns", finalizers, ...(deleting && { deletionTimestamp: DELETED_AT }) },
    spec: {},
    status: { phase: "Bound" },
  };
}

function volume(
  finalizers: string[],
  o: { provisioner?: string; policy?: string; phase?: string; deleting?: boolean },
): V1PersistentVolume {
  return {
    metadata: {
      name: "pv",
      finalizers,
      ...(o.provisioner && { annotations: { "pv.kubernetes.io/provisioned-by": o.provisioner } }),
      ...(o.deleting && { deletionTimestamp: DELETED_AT }),
    },
    spec: { persistentVolumeReclaimPolicy: o.policy ?? "Delete" },
    status: { phase: o.phase ?? "Bound" },
  };
}

const removals = (ds: { kind: string; key: string }[]) =>
  ds.filter((d) => d.kind === "finalizer-removal").map((d) => d.key);

const without = <T extends { metadata?: { finalizers?: string[] } }>(o: T, f: string): T => ({
  ...o,
  metadata: { ...o.metadata, finalizers: (o.metadata?.finalizers ?? []).filter((x) => x !== f) },
});

describe("shadow decisions: finalizer removals", () => {
  const PVC = PVC_PROTECTION_FINALIZER;
  const PV = PV_PROTECTION_FINALIZER;
  const IN_TREE = FINALIZER_IN_TREE_PV_PROTECTION;
  const EXTERNAL = FINALIZER_EXTERNAL_PV_PROTECTION;

  test("protection finalizers: only from an object being deleted", () => {
    const deleting = claim([PVC], true);
    assert.deepEqual(removals(claimDecisions(deleting, without(deleting, PVC))), [
      `finalizer-removal pvc ns/c ${PVC}`,
    ]);
    // Stripped by hand (or a test's cleanup) before deleting: not the pvc-protection controller.
    const live = claim([PVC], false);
    assert.deepEqual(removals(claimDecisions(live, without(live, PVC))), []);
    const pv = volume([PV], { deleting: true });
    assert.deepEqual(removals(volumeDecisions(pv, without(pv, PV))), [`finalizer-removal pv pv ${PV}`]);
    const livePV = volume([PV], {});
    assert.deepEqual(removals(volumeDecisions(livePV, without(livePV, PV))), []);
  });

  test("the binder's in-tree finalizer: after deleting a released volume, or where it does not belong", () => {
    const hostPath = "kubernetes.io/host-path";
    const released = volume([IN_TREE], { provisioner: hostPath, phase: "Released", deleting: true });
    assert.equal(removals(volumeDecisions(released, without(released, IN_TREE))).length, 1);
    const retained = volume([IN_TREE], { provisioner: hostPath, policy: "Retain" });
    assert.equal(removals(volumeDecisions(retained, without(retained, IN_TREE))).length, 1);
    const migrated = volume([IN_TREE], { provisioner: "kubernetes.io/aws-ebs" });
    assert.equal(removals(volumeDecisions(migrated, without(migrated, IN_TREE))).length, 1);
    // A bound Delete volume keeps it: stripped by someone else.
    const bound = volume([IN_TREE], { provisioner: hostPath });
    assert.deepEqual(removals(volumeDecisions(bound, without(bound, IN_TREE))), []);
  });

  test("the external provisioner's finalizer: the binder removes it from in-tree volumes only", () => {
    const external = volume([EXTERNAL], {
      provisioner: "example.com/csi",
      phase: "Released",
      deleting: true,
    });
    assert.deepEqual(removals(volumeDecisions(external, without(external, EXTERNAL))), []);
    const rolledBack = volume([EXTERNAL], { provisioner: "kubernetes.io/host-path" });
    assert.equal(removals(volumeDecisions(rolledBack, without(rolledBack, EXTERNAL))).length, 1);
  });
});

describe("shadow decisions: provisioning", () => {
  const created = (provisioner: string): V1PersistentVolume => ({
    metadata: { name: "pv", annotations: { "pv.kubernetes.io/provisioned-by": provisioner } },
    spec: { claimRef: { namespace: "ns", name: "c" } },
  });
  test("a volume the binder created is its decision, and the claim's binding; an external provisioner's is not", () => {
    // Created pre-bound to the claim: the binding is decided there, the claim's volumeName completes it.
    assert.deepEqual(
      volumeDecisions(undefined, created("kubernetes.io/host-path")).map((d) => `${d.key}=${d.value}`),
      ["provisioning pvc ns/c=provisioned by kubernetes.io/host-path", "binding pvc ns/c=pv"],
    );
    assert.deepEqual(volumeDecisions(undefined, created("example.com/csi")), []);
    // Migrated to CSI: its external provisioner creates the volume.
    assert.deepEqual(volumeDecisions(undefined, created("kubernetes.io/aws-ebs")), []);
  });
});

describe("shadow decisions: claim status", () => {
  const pending: V1PersistentVolumeClaim = {
    metadata: { name: "c", namespace: "ns" },
    spec: { volumeName: "pv" },
    status: { phase: "Pending" },
  };
  const bound: V1PersistentVolumeClaim = {
    ...pending,
    status: { phase: "Bound", accessModes: ["ReadWriteOnce"], capacity: { storage: "1Gi" } },
  };
  const values = (ds: { controller: string; key: string; value: string }[]) =>
    ds.map((d) => `${d.controller} ${d.key}=${d.value}`);

  test("the binder's claim status: the access modes and capacity it copies from the volume", () => {
    assert.deepEqual(values(claimDecisions(pending, bound)), [
      "persistentvolume-binder-controller phase pvc ns/c=Bound",
      "persistentvolume-binder-controller claim-status pvc ns/c=accessModes RWO, capacity 1073741824",
    ]);
    // The same capacity written otherwise is the same status.
    const other = { ...bound, status: { ...bound.status, capacity: { storage: "1024Mi" } } };
    assert.deepEqual(
      claimDecisions(pending, other).map((d) => d.value),
      claimDecisions(pending, bound).map((d) => d.value),
    );
    // A resize of a bound claim (the expander's, not compared) is not the binder's.
    const resized = { ...bound, status: { ...bound.status, capacity: { storage: "2Gi" } } };
    assert.deepEqual(values(claimDecisions(bound, resized)), []);
  });
});

describe("shadow decisions: the Unused condition (pvc-protection controller)", () => {
  const withUnused = (status: string, reason: string, at: string): V1PersistentVolumeClaim => ({
    ...claim([], false),
    status: {
      phase: "Bound",
      conditions: [{ type: "Unused", status, reason, lastTransitionTime: new Date(at) }],
    },
  });
  const unused = (before: V1PersistentVolumeClaim, after: V1PersistentVolumeClaim) =>
    claimDecisions(before, after)
      .filter((d) => d.kind === "condition")
      .map((d) => `${d.controller} ${d.key}=${d.value}`);

  test("its status and reason, when either changes; not its transition time", () => {
    const none = claim([], false);
    const unusedNow = withUnused("True", "NoPodsUsingPVC", "2026-01-01T00:00:00Z");
    const used = withUnused("False", "PodUsingPVC", "2026-01-01T00:00:01Z");
    assert.deepEqual(unused(none, unusedNow), [
      "persistentvolumeclaim-protection-controller unused pvc ns/c=True NoPodsUsingPVC",
    ]);
    assert.deepEqual(unused(unusedNow, used), [
      "persistentvolumeclaim-protection-controller unused pvc ns/c=False PodUsingPVC",
    ]);
    assert.deepEqual(unused(used, withUnused("False", "PodUsingPVC", "2026-02-01T00:00:00Z")), []);
  });

  test("a body whose conditions are no list decides nothing, without a throw", () => {
    const hostile = {
      ...claim([], false),
      status: { conditions: "Unused" },
    } as unknown as V1PersistentVolumeClaim;
    assert.deepEqual(unused(claim([], false), hostile), []);
  });
});
