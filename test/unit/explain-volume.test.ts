import assert from "node:assert/strict";
import { test } from "node:test";
import type { V1PersistentVolume } from "@kubernetes/client-node";
import { explainVolume } from "../../src/explain/volume.js";

function pv(phase: string | undefined, more: Partial<V1PersistentVolume["spec"]> = {}): V1PersistentVolume {
  return {
    metadata: { name: "v" },
    spec: { capacity: { storage: "1Gi" }, accessModes: ["ReadWriteOnce"], ...more },
    ...(phase ? { status: { phase } } : {}),
  };
}
const claim = { metadata: { name: "c", namespace: "ns", uid: "u1" } };
const ref = { namespace: "ns", name: "c", uid: "u1" };

test("explainVolume: each phase's conclusion", () => {
  const kind = (v: V1PersistentVolume, c = false) =>
    explainVolume({ volume: v, claim: c ? claim : undefined, events: [] }).conclusion.kind;
  assert.equal(kind(pv(undefined)), "NotSynced");
  assert.equal(kind(pv("Available")), "Available");
  assert.equal(kind(pv("Available", { claimRef: { namespace: "ns", name: "c" } })), "PreBound");
  assert.equal(kind(pv("Bound", { claimRef: ref }), true), "Bound");
  assert.equal(kind(pv("Bound", { claimRef: ref })), "ClaimGone");
  assert.equal(kind(pv("Bound", { claimRef: { ...ref, uid: "old" } }), true), "ClaimGone");
  assert.equal(kind(pv("Released", { claimRef: ref })), "Retained");
  assert.equal(
    kind(pv("Released", { claimRef: ref, persistentVolumeReclaimPolicy: "Delete" })),
    "WillDelete",
  );
  assert.equal(
    kind(pv("Released", { claimRef: ref, persistentVolumeReclaimPolicy: "Recycle" })),
    "WillRecycle",
  );
  assert.equal(kind(pv("Failed")), "Failed");
});

test("explainVolume: the last warning, the finalizers holding deletion, how to reuse a Retained volume", () => {
  const volume = pv("Failed", { persistentVolumeReclaimPolicy: "Delete" });
  volume.metadata = {
    name: "v",
    deletionTimestamp: new Date("2026-01-01T00:00:00Z"),
    finalizers: ["kubernetes.io/pv-protection", "example.com/other"],
  };
  const at = (s: string) => new Date(s);
  const r = explainVolume({
    volume,
    claim: undefined,
    events: [
      {
        metadata: {},
        involvedObject: {},
        type: "Warning",
        reason: "Old",
        message: "old",
        lastTimestamp: at("2026-01-01T00:00:00Z"),
      },
      {
        metadata: {},
        involvedObject: {},
        type: "Warning",
        reason: "VolumeFailedDelete",
        message: "boom",
        lastTimestamp: at("2026-01-02T00:00:00Z"),
      },
      {
        metadata: {},
        involvedObject: {},
        type: "Normal",
        reason: "Later",
        message: "fine",
        lastTimestamp: at("2026-01-03T00:00:00Z"),
      },
    ],
  });
  assert.deepEqual(r.lastWarning, {
    reason: "VolumeFailedDelete",
    message: "boom",
    time: "2026-01-02T00:00:00.000Z",
  });
  assert.match(r.conclusion.message, /boom/);
  assert.deepEqual(
    r.finalizers.map((f) => f.name),
    ["kubernetes.io/pv-protection", "example.com/other"],
  );
  assert.ok(r.suggestions.some((s) => s.includes("kubernetes.io/pv-protection, example.com/other")));
  const retained = explainVolume({ volume: pv("Released", { claimRef: ref }), claim: undefined, events: [] });
  assert.ok(retained.suggestions.some((s) => s.includes('"path":"/spec/claimRef"')));
});
