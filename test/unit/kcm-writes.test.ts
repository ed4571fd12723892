import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { KCM_FIELD_MANAGER, loopWriteIn, managedFieldsTime } from "../../src/app/kcm-writes.js";

const SINCE = "2026-12-06T02:00:00Z";
const BEFORE = "2026-12-06T01:59:59Z";
const AFTER = "2026-12-06T02:00:05Z";

const entry = (manager: string, time: string, fieldsV1: object, subresource?: string) => ({
  manager,
  operation: "Update",
  apiVersion: "v1",
  time,
  fieldsType: "FieldsV1",
  fieldsV1,
  ...(subresource && { subresource }),
});

// As upstream's v1.37 loops leave them (the binder's as seen on test/integration/kcm-writes.test.ts's pair).
const kcmClaimRef = (time: string) =>
  entry(KCM_FIELD_MANAGER, time, {
    "f:metadata": { "f:annotations": { "f:pv.kubernetes.io/bound-by-controller": {} } },
    "f:spec": { "f:claimRef": { ".": {}, "f:name": {}, "f:namespace": {} } },
  });
const kcmPhase = (time: string) =>
  entry(KCM_FIELD_MANAGER, time, { "f:status": { "f:phase": {} } }, "status");
const kcmNodeLifecycle = (time: string) =>
  entry(KCM_FIELD_MANAGER, time, { "f:status": { "f:conditions": { 'k:{"type":"Ready"}': {} } } }, "status");
const kcmNodeTtl = (time: string) =>
  entry(KCM_FIELD_MANAGER, time, {
    "f:metadata": { "f:annotations": { "f:node.alpha.kubernetes.io/ttl": {} } },
  });

describe("loopWriteIn: which volume-loop field a foreign manager wrote, and when", () => {
  test("KCM's binder writing a PV's claimRef after kvc started is found, with field and loop", () => {
    assert.deepEqual(loopWriteIn("PersistentVolume", [kcmClaimRef(AFTER)], SINCE), {
      manager: KCM_FIELD_MANAGER,
      kind: "PersistentVolume",
      field: "spec.claimRef",
      loop: "persistentvolume-binder-controller",
      time: AFTER,
    });
    assert.equal(loopWriteIn("PersistentVolume", [kcmPhase(AFTER)], SINCE)?.field, "status.phase");
  });

  test("the threshold itself counts; a write before it is the cut-over's past", () => {
    assert.equal(loopWriteIn("PersistentVolume", [kcmClaimRef(SINCE)], SINCE)?.time, SINCE);
    assert.equal(loopWriteIn("PersistentVolume", [kcmClaimRef(BEFORE), kcmPhase(BEFORE)], SINCE), undefined);
  });

  test("kvc's own writes never count, nor another manager's", () => {
    for (const manager of ["kube-volume-controller", "kubectl-edit", "kube-controller-manager-2"]) {
      const fields = [{ ...kcmClaimRef(AFTER), manager }];
      assert.equal(loopWriteIn("PersistentVolume", fields, SINCE), undefined, manager);
    }
  });

  test("a claim's bind annotations, volumeName, phase and protection finalizer", () => {
    const claim = (fieldsV1: object) =>
      loopWriteIn("PersistentVolumeClaim", [entry(KCM_FIELD_MANAGER, AFTER, fieldsV1)], SINCE);
    assert.equal(
      claim({ "f:metadata": { "f:annotations": { "f:pv.kubernetes.io/bind-completed": {} } } })?.field,
      "metadata.annotations[pv.kubernetes.io/bind-completed]",
    );
    assert.equal(claim({ "f:spec": { "f:volumeName": {} } })?.field, "spec.volumeName");
    const finalizer = claim({ "f:metadata": { "f:finalizers": { 'v:"kubernetes.io/pvc-protection"': {} } } });
    assert.equal(finalizer?.field, "metadata.finalizers[kubernetes.io/pvc-protection]");
    assert.equal(finalizer?.loop, "persistentvolumeclaim-protection-controller");
    const unused = claim({
      "f:status": { "f:conditions": { ".": {}, 'k:{"type":"Unused"}': { "f:status": {} } } },
    });
    assert.equal(unused?.field, "status.conditions[Unused]");
    assert.equal(unused?.loop, "persistentvolumeclaim-protection-controller");
    // KCM's ephemeral-volume loop creates claims: their spec and owner are not the binder's.
    assert.equal(
      claim({
        "f:metadata": { "f:ownerReferences": {} },
        "f:spec": { "f:resources": {}, "f:accessModes": {} },
      }),
      undefined,
    );
  });

  test("on a node only volumesAttached counts, not KCM's node lifecycle or TTL writes", () => {
    const lifecycle = [kcmNodeLifecycle(AFTER), kcmNodeTtl(AFTER)];
    assert.equal(loopWriteIn("Node", lifecycle, SINCE), undefined);
    const attached = entry(
      KCM_FIELD_MANAGER,
      AFTER,
      { "f:status": { "f:conditions": {}, "f:volumesAttached": {} } },
      "status",
    );
    assert.deepEqual(loopWriteIn("Node", [kcmNodeTtl(AFTER), attached], SINCE), {
      manager: KCM_FIELD_MANAGER,
      kind: "Node",
      field: "status.volumesAttached",
      loop: "persistentvolume-attach-detach-controller",
      time: AFTER,
    });
  });

  test("a VolumeAttachment KCM created", () => {
    const va = entry(KCM_FIELD_MANAGER, AFTER, {
      "f:spec": { "f:attacher": {}, "f:nodeName": {}, "f:source": {} },
    });
    assert.equal(loopWriteIn("VolumeAttachment", [va], SINCE)?.field, "spec.attacher");
  });

  test("fields of another kind do not count: a PV's phase is not a node's", () => {
    assert.equal(loopWriteIn("Node", [kcmPhase(AFTER)], SINCE), undefined);
  });

  test("missing or malformed managedFields are no write", () => {
    for (const fields of [undefined, null, {}, "x", [null, 1, "x", {}, { manager: KCM_FIELD_MANAGER }]]) {
      assert.equal(loopWriteIn("PersistentVolume", fields, SINCE), undefined);
    }
    const noTime = { ...kcmClaimRef(AFTER), time: undefined };
    assert.equal(loopWriteIn("PersistentVolume", [noTime], SINCE), undefined);
    const leaf = entry(KCM_FIELD_MANAGER, AFTER, { "f:spec": "f:claimRef" });
    assert.equal(loopWriteIn("PersistentVolume", [leaf], SINCE), undefined);
  });

  test("managedFieldsTime writes an instant as the apiserver does: UTC, whole seconds", () => {
    assert.equal(managedFieldsTime(Date.parse("2026-12-06T02:00:05.987Z")), "2026-12-06T02:00:05Z");
  });
});
