import assert from "node:assert/strict";
import { describe, test } from "node:test";
import type { V1PersistentVolume, V1PersistentVolumeClaim } from "@kubernetes/client-node";
import {
  addFinalizerPatch,
  isDeletionCandidate,
  needToAddFinalizer,
  PV_PROTECTION_FINALIZER,
  PVC_PROTECTION_FINALIZER,
  removeFinalizerPatch,
} from "../../src/protection/finalizer.js";
import { isVolumeBound } from "../../src/protection/pv-protection-controller.js";
import { unusedConditionChange, withUnusedCondition } from "../../src/protection/unused-condition.js";

const F = PVC_PROTECTION_FINALIZER;

function claim(finalizers: string[], deleting = false): V1PersistentVolumeClaim {
  return {
    metadata: {
      name: "pvc1",
      namespace: "default",
      resourceVersion: "7",
      finalizers,
      ...(deleting && { deletionTimestamp: new Date() }),
    },
  };
}

describe("protection finalizers", () => {
  test("a deletion candidate is being deleted and still has the finalizer", () => {
    assert.equal(isDeletionCandidate(claim([F], true), F), true);
    assert.equal(isDeletionCandidate(claim([], true), F), false);
    assert.equal(isDeletionCandidate(claim([F]), F), false);
  });

  test("the finalizer is added only to objects not being deleted", () => {
    assert.equal(needToAddFinalizer(claim([]), F), true);
    assert.equal(needToAddFinalizer(claim(["example.com/other"]), F), true);
    assert.equal(needToAddFinalizer(claim([F]), F), false);
    assert.equal(needToAddFinalizer(claim([], true), F), false);
  });

  test("patches keep other finalizers and carry the resourceVersion they were computed from", () => {
    assert.deepEqual(addFinalizerPatch(claim(["example.com/a"]), F), {
      metadata: { finalizers: ["example.com/a", F], resourceVersion: "7" },
    });
    assert.deepEqual(removeFinalizerPatch(claim([F, "example.com/a", F], true), F), {
      metadata: { finalizers: ["example.com/a"], resourceVersion: "7" },
    });
    assert.deepEqual(removeFinalizerPatch(claim([F], true), F), {
      metadata: { finalizers: [], resourceVersion: "7" },
    });
    assert.throws(() => addFinalizerPatch({ metadata: { name: "x" } }, F), /resourceVersion/);
  });
});

describe("pv-protection's use check", () => {
  test("a volume is in use only while Bound", () => {
    const pv = (phase?: string): V1PersistentVolume => ({
      metadata: { name: "pv1", finalizers: [PV_PROTECTION_FINALIZER] },
      ...(phase && { status: { phase } }),
    });
    assert.equal(isVolumeBound(pv("Bound")), true);
    for (const phase of ["Pending", "Available", "Released", "Failed", undefined]) {
      assert.equal(isVolumeBound(pv(phase)), false, String(phase));
    }
  });
});

describe("the Unused condition", () => {
  const withCondition = (status: string): V1PersistentVolumeClaim => ({
    metadata: { name: "pvc1" },
    status: {
      phase: "Bound",
      conditions: [
        { type: "Resizing", status: "True" },
        { type: "Unused", status, lastTransitionTime: new Date(0) },
      ],
    },
  });

  test("is set when missing or when it says otherwise; Unknown stays while in use", () => {
    assert.equal(unusedConditionChange({ metadata: {} }, false)?.status, "True");
    assert.equal(unusedConditionChange({ metadata: {} }, true)?.status, "False");
    assert.equal(unusedConditionChange(withCondition("True"), true)?.reason, "PodUsingPVC");
    assert.equal(unusedConditionChange(withCondition("False"), false)?.reason, "NoPodsUsingPVC");
    assert.equal(unusedConditionChange(withCondition("Unknown"), false)?.status, "True");
    assert.equal(unusedConditionChange(withCondition("True"), false), undefined);
    assert.equal(unusedConditionChange(withCondition("False"), true), undefined);
    assert.equal(unusedConditionChange(withCondition("Unknown"), true), undefined);
  });

  test("replaces the existing condition in place, keeping the others, or appends it", () => {
    const now = new Date(123_000);
    const change = { status: "False", reason: "PodUsingPVC", message: "m" };
    assert.deepEqual(withUnusedCondition(withCondition("True"), change, now), [
      { type: "Resizing", status: "True" },
      { type: "Unused", ...change, lastTransitionTime: now },
    ]);
    assert.deepEqual(withUnusedCondition({ metadata: {} }, change, now), [
      { type: "Unused", ...change, lastTransitionTime: now },
    ]);
  });
});
