import assert from "node:assert/strict";
import { describe, test } from "node:test";
import type { V1PersistentVolume, V1PersistentVolumeClaim } from "@kubernetes/client-node";
import { WaitingClaims } from "../../src/persistentvolume/waiting-claims.js";

const claim = (name: string, storage: string): V1PersistentVolumeClaim => ({
  metadata: { name, namespace: "ns", uid: `uid-${name}` },
  spec: { accessModes: ["ReadWriteOnce"], storageClassName: "", resources: { requests: { storage } } },
});
const volume = (storage: string, phase = "Available"): V1PersistentVolume => ({
  metadata: { name: `pv-${storage}` },
  spec: { capacity: { storage }, accessModes: ["ReadWriteOnce"], storageClassName: "" },
  status: { phase },
});
const taken = (w: WaitingClaims, pv: V1PersistentVolume) => w.takeMatch(pv)?.metadata?.name;

describe("WaitingClaims", () => {
  test("a volume wakes the longest-waiting claim it matches, once", () => {
    const w = new WaitingClaims();
    w.wait(claim("small", "1Gi"));
    w.wait(claim("big", "5Gi"));
    w.wait(claim("bad", "lots")); // cannot be matched at all: not kept
    assert.equal(taken(w, volume("10Gi", "Pending")), undefined); // not Available: matches nothing
    assert.equal(taken(w, volume("2Gi")), "small");
    assert.equal(taken(w, volume("2Gi")), undefined); // "small" woken already, "big" does not fit
    assert.equal(taken(w, volume("10Gi")), "big");
  });

  test("a claim that waits again keeps its place; a forgotten one is not woken", () => {
    const w = new WaitingClaims();
    w.wait(claim("a", "1Gi"));
    w.wait(claim("b", "1Gi"));
    w.wait(claim("a", "1Gi"));
    assert.equal(taken(w, volume("1Gi")), "a");
    w.forget("ns/b");
    assert.equal(taken(w, volume("1Gi")), undefined);
  });
});
