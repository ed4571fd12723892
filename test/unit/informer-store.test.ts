import assert from "node:assert/strict";
import { describe, test } from "node:test";
import type { V1Pod } from "@kubernetes/client-node";
import { objectKey, Store } from "../../src/runtime/informer/index.js";
import { obj, recordingLogger } from "./informer-fakes.js";

function pod(name: string, rv: string, claims: string[]): V1Pod {
  return {
    metadata: { name, namespace: "ns", resourceVersion: rv, uid: `uid-${name}` },
    spec: {
      containers: [],
      volumes: claims.map((claimName) => ({ name: claimName, persistentVolumeClaim: { claimName } })),
    },
  };
}

const byClaim = (p: V1Pod) =>
  (p.spec?.volumes ?? []).flatMap((v) =>
    v.persistentVolumeClaim ? [`${p.metadata?.namespace ?? ""}/${v.persistentVolumeClaim.claimName}`] : [],
  );

const names = (objs: { metadata?: { name?: string } }[]) => objs.map((o) => o.metadata?.name).sort();

describe("informer store", () => {
  test("keys namespaced objects by namespace/name and cluster-scoped ones by name", () => {
    assert.equal(objectKey(obj("a", "1", { namespace: "ns" })), "ns/a");
    assert.equal(objectKey(obj("pv-1", "1")), "pv-1");
    assert.throws(() => objectKey({ metadata: {} }), /no metadata.name/);

    const store = new Store();
    store.upsert(obj("a", "1", { namespace: "ns" }));
    store.upsert(obj("pv-1", "1"));
    assert.equal(store.get("ns/a")?.metadata?.name, "a");
    assert.equal(store.get("pv-1")?.metadata?.name, "pv-1");
    assert.equal(store.get("a"), undefined);
    assert.deepEqual(store.listKeys().sort(), ["ns/a", "pv-1"]);
    assert.equal(store.size, 2);
    assert.equal(store.delete("pv-1")?.metadata?.name, "pv-1");
    assert.deepEqual(names(store.list()), ["a"]);
  });

  test("an index follows adds, updates and deletes", () => {
    const store = new Store<V1Pod>();
    store.addIndexers({ byClaim });
    store.upsert(pod("p1", "1", ["c1", "c2"]));
    store.upsert(pod("p2", "1", ["c2"]));
    assert.deepEqual(names(store.byIndex("byClaim", "ns/c2")), ["p1", "p2"]);
    assert.deepEqual(names(store.byIndex("byClaim", "ns/c1")), ["p1"]);

    store.upsert(pod("p1", "2", ["c3"])); // p1 no longer mounts c1 or c2
    assert.deepEqual(names(store.byIndex("byClaim", "ns/c2")), ["p2"]);
    assert.deepEqual(store.byIndex("byClaim", "ns/c1"), []);
    assert.deepEqual(names(store.byIndex("byClaim", "ns/c3")), ["p1"]);

    store.delete("ns/p2");
    assert.deepEqual(store.byIndex("byClaim", "ns/c2"), []);
    assert.throws(() => store.byIndex("nope", "x"), /index nope is not registered/);
  });

  test("an index added later files the objects already cached", () => {
    const store = new Store<V1Pod>();
    store.upsert(pod("p1", "1", ["c1"]));
    store.addIndexers({ byClaim });
    assert.deepEqual(names(store.byIndex("byClaim", "ns/c1")), ["p1"]);
  });

  test("a throwing index function is logged and does not keep the object out of the cache", () => {
    const logger = recordingLogger();
    const store = new Store<V1Pod>(logger);
    store.addIndexers({
      broken: () => {
        throw new Error("bug");
      },
    });
    store.upsert(pod("p1", "1", []));
    assert.equal(store.get("ns/p1")?.metadata?.name, "p1");
    assert.deepEqual(store.byIndex("broken", "x"), []);
    assert.equal(logger.lines.filter((l) => l.level === "error").length, 1);
  });

  test("cached objects are deep-frozen; a structuredClone is the writable copy", () => {
    const store = new Store<V1Pod>();
    store.upsert(pod("p1", "1", ["c1"]));
    const cached = store.get("ns/p1")!;
    assert.throws(() => {
      cached.metadata!.name = "changed";
    }, TypeError);
    assert.throws(() => {
      cached.spec!.volumes!.push({ name: "x" });
    }, TypeError);
    assert.throws(() => {
      cached.spec!.volumes![0]!.persistentVolumeClaim!.claimName = "other";
    }, TypeError);

    const copy = structuredClone(cached);
    copy.spec!.volumes![0]!.persistentVolumeClaim!.claimName = "other";
    assert.equal(store.get("ns/p1")?.spec?.volumes?.[0]?.persistentVolumeClaim?.claimName, "c1");
  });

  test("replace deletes what is missing, adds what is new, updates what changed, and skips the rest", () => {
    const store = new Store();
    for (const o of [obj("keep", "1"), obj("change", "1"), obj("gone", "1")]) store.upsert(o);

    const changes = store.replace([obj("keep", "1"), obj("change", "5"), obj("new", "6")]);

    assert.deepEqual(
      changes.map((c) => [c.type, c.obj.metadata?.name, c.obj.metadata?.resourceVersion]),
      [
        ["delete", "gone", "1"],
        ["update", "change", "5"],
        ["add", "new", "6"],
      ],
    );
    const del = changes[0]!;
    assert.ok(del.type === "delete" && del.finalStateUnknown, "a delete seen by relist is a tombstone");
    const upd = changes[1]!;
    assert.ok(upd.type === "update" && upd.old.metadata?.resourceVersion === "1");
    assert.deepEqual(store.listKeys().sort(), ["change", "keep", "new"]);
    assert.equal(store.get("change")?.metadata?.resourceVersion, "5");
  });

  test("replace reports an object re-created under the same name as a delete and an add", () => {
    const store = new Store();
    store.upsert(obj("a", "1", { uid: "first" }));
    const changes = store.replace([obj("a", "9", { uid: "second" })]);
    assert.deepEqual(
      changes.map((c) => [c.type, c.obj.metadata?.uid]),
      [
        ["delete", "first"],
        ["add", "second"],
      ],
    );
    assert.equal(store.get("a")?.metadata?.uid, "second");
  });
  test("registering the same index function twice is a no-op; another function under the name throws", () => {
    const store = new Store();
    const byName = (o: { metadata?: { name?: string } }) => [o.metadata?.name ?? ""];
    store.addIndexers({ name: byName });
    store.addIndexers({ name: byName });
    assert.throws(() => {
      store.addIndexers({ name: () => [] });
    }, /already registered with another function/);
  });
});
