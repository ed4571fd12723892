import assert from "node:assert/strict";
import { describe, test } from "node:test";
import type { V1PersistentVolume } from "@kubernetes/client-node";
import { UnsyncedVersions } from "../../src/shadow/unsynced-versions.js";

const pv = (resourceVersion: string, name = "pv-1"): V1PersistentVolume => ({
  metadata: { name, resourceVersion },
});
const versions = (list: V1PersistentVolume[]) => list.map((v) => v.metadata?.resourceVersion);

describe("shadow UnsyncedVersions", () => {
  test("versions replaced before the worker synced them come back oldest first, once", () => {
    const u = new UnsyncedVersions<V1PersistentVolume>();
    u.keep(pv("5"), pv("4"));
    u.keep(pv("6"));
    u.keep(pv("6")); // the same version twice (a resync) is one
    u.keep(pv("3", "pv-2"));
    assert.deepEqual(versions(u.take("pv-1")), ["5", "6"]);
    assert.deepEqual(u.take("pv-1"), []);
    assert.deepEqual(versions(u.take("pv-2")), ["3"]);
  });

  test("a version the controller synced already, or a newer one, is not kept", () => {
    const u = new UnsyncedVersions<V1PersistentVolume>();
    u.keep(pv("5"), pv("5"));
    u.keep(pv("5"), pv("7"));
    u.keep(pv("not-a-number"));
    assert.deepEqual(u.take("pv-1"), []);
  });

  test("againWhenReplaced: the version the controller synced last is kept, older ones are not", () => {
    const u = new UnsyncedVersions<V1PersistentVolume>({ againWhenReplaced: true });
    u.keep(pv("5"), pv("7"));
    assert.deepEqual(u.take("pv-1"), []);
    // Replaced since the worker synced it: KCM may have acted on the world around it.
    u.keep(pv("7"), pv("7"));
    assert.deepEqual(versions(u.take("pv-1")), ["7"]);
  });

  test("again: a synced version comes back only when the informer holds a newer one, in version order", () => {
    const u = new UnsyncedVersions<V1PersistentVolume>();
    u.again(pv("5"), pv("5")); // the informer's latest is the version itself: the normal sync does it
    u.again(pv("5"), undefined); // gone: the worker forgets it, nothing to decide from
    assert.deepEqual(u.take("pv-1"), []);
    u.keep(pv("7"), pv("5")); // replaced before the worker synced it
    u.again(pv("5"), pv("8")); // synced, but a volume for it appeared since
    u.again(pv("5"), pv("8"));
    assert.deepEqual(versions(u.take("pv-1")), ["5", "7"]);
  });

  test("bounded: only the newest few versions of one object are kept", () => {
    const u = new UnsyncedVersions<V1PersistentVolume>();
    for (let rv = 1; rv <= 10; rv++) u.keep(pv(String(rv)));
    assert.deepEqual(versions(u.take("pv-1")), ["7", "8", "9", "10"]);
  });
});
