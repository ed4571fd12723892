import assert from "node:assert/strict";
import { test } from "node:test";
import type { V1PersistentVolume, V1PersistentVolumeClaim } from "@kubernetes/client-node";
import { bindHalfDone, halfDone } from "./half-done.js";
import { emptyWorld, keyOf } from "./history.js";

/* The half-done states the targeted kills wait for, on hand-written states of upstream's bind and attach. */

const claim = (o: { volumeName?: string; completed?: boolean; phase?: string }): V1PersistentVolumeClaim => ({
  metadata: {
    name: "c",
    namespace: "ns",
    uid: "uid-c",
    ...(o.completed ? { annotations: { "pv.kubernetes.io/bind-completed": "yes" } } : {}),
  },
  spec: o.volumeName ? { volumeName: o.volumeName } : {},
  status: { phase: o.phase ?? "Pending" },
});
const pv = (o: { claimRef?: boolean; byController?: boolean; phase?: string }): V1PersistentVolume => ({
  metadata: {
    name: "pv",
    ...(o.byController ? { annotations: { "pv.kubernetes.io/bound-by-controller": "yes" } } : {}),
  },
  spec: {
    ...(o.claimRef ? { claimRef: { name: "c", namespace: "ns", uid: "uid-c" } } : {}),
    csi: { driver: "d", volumeHandle: "h" },
  },
  status: { phase: o.phase ?? "Available" },
});

test("a bind is half done between the binder's first and last write, not before or after", () => {
  // Before: an available PV; a PV the provisioner created for the claim, its status not yet written.
  assert.equal(bindHalfDone(pv({}), claim({})), undefined);
  assert.equal(bindHalfDone(pv({ claimRef: true }), claim({})), undefined);
  // After each of the first three writes: PV claimRef, PV status, claim volumeName.
  assert.match(bindHalfDone(pv({ claimRef: true, byController: true }), claim({})) ?? "", /half done/);
  assert.match(bindHalfDone(pv({ claimRef: true, phase: "Bound" }), claim({})) ?? "", /half done/);
  assert.match(
    bindHalfDone(pv({ claimRef: true, phase: "Bound" }), claim({ volumeName: "pv", completed: true })) ?? "",
    /half done/,
  );
  // The reverse order: the claim names the PV, which does not name it.
  assert.match(bindHalfDone(pv({}), claim({ volumeName: "pv", completed: true })) ?? "", /claim first/);
  // Done.
  assert.equal(
    bindHalfDone(
      pv({ claimRef: true, phase: "Bound" }),
      claim({ volumeName: "pv", completed: true, phase: "Bound" }),
    ),
    undefined,
  );
});

test("an attach is in flight from the VolumeAttachment of a pod's volume until the node reports it", () => {
  const w = emptyWorld();
  const volume = pv({ claimRef: true, phase: "Bound" });
  w.PersistentVolume.set("pv", volume);
  w.Node.set("n1", { metadata: { name: "n1" }, status: {} });
  const va = {
    metadata: { name: "va" },
    spec: { attacher: "d", nodeName: "n1", source: { persistentVolumeName: "pv" } },
    status: { attached: false },
  };
  w.VolumeAttachment.set("va", va);
  // No pod on n1 uses the claim: not an attach for a pod.
  assert.equal(halfDone("attach", w), undefined);
  const pod = {
    metadata: { name: "p", namespace: "ns" },
    spec: {
      nodeName: "n1",
      containers: [],
      volumes: [{ name: "v", persistentVolumeClaim: { claimName: "c" } }],
    },
  };
  w.Pod.set(keyOf(pod), pod);
  assert.match(halfDone("attach", w) ?? "", /not attached yet/);
  w.VolumeAttachment.set("va", { ...va, status: { attached: true } });
  assert.match(halfDone("attach", w) ?? "", /not yet in n1's volumesAttached/);
  const node = {
    metadata: { name: "n1" },
    status: { volumesAttached: [{ name: "kubernetes.io/csi/d^h", devicePath: "" }] },
  };
  w.Node.set("n1", node);
  // The node's change is what the watch delivers: it ends the attach.
  assert.equal(halfDone("attach", w, { kind: "Node", rv: 2, at: 0, object: node }), undefined);
  // A VolumeAttachment being deleted is a detach, not an attach.
  w.Node.set("n1", { metadata: { name: "n1" }, status: {} });
  w.VolumeAttachment.set("va", { ...va, metadata: { name: "va", deletionTimestamp: new Date() } });
  assert.equal(halfDone("attach", w), undefined);
});

test("a bind change is checked against the other object of the pair, and a deletion is not one", () => {
  const w = emptyWorld();
  const volume = pv({ claimRef: true, phase: "Bound" });
  const c = claim({});
  w.PersistentVolume.set("pv", volume);
  w.PersistentVolumeClaim.set("ns/c", c);
  assert.match(
    halfDone("bind", w, { kind: "PersistentVolume", rv: 1, at: 0, object: volume }) ?? "",
    /half done/,
  );
  assert.equal(
    halfDone("bind", w, { kind: "PersistentVolume", rv: 1, at: 0, object: volume, deleted: true }),
    undefined,
  );
  const bound = claim({ volumeName: "pv", completed: true, phase: "Bound" });
  w.PersistentVolumeClaim.set("ns/c", bound);
  assert.equal(
    halfDone("bind", w, { kind: "PersistentVolumeClaim", rv: 2, at: 0, object: bound }),
    undefined,
  );
  assert.equal(halfDone("bind", w), undefined);
});
