import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { CoreV1Api, type KubeConfig, type V1PersistentVolume, type V1Pod } from "@kubernetes/client-node";
import { LocalControlPlane } from "../../src/controlplane/local-control-plane.js";
import { ApiClients } from "../../src/runtime/client.js";
import { clientListWatch, resources, type WatchEvent } from "../../src/runtime/informer/index.js";

// A 410 on watch needs a compacted revision: informer.test.ts compacts etcd and proves the relist.
describe("client-node lister-watcher on a real apiserver", () => {
  let cp: LocalControlPlane;
  let kc: KubeConfig;
  let core: CoreV1Api;

  before(async () => {
    cp = await LocalControlPlane.start();
    kc = cp.kubeConfig();
    core = kc.makeApiClient(CoreV1Api);
    for (const [name = "", app = ""] of [
      ["lw-a", "x"],
      ["lw-b", "x"],
      ["lw-c", "x"],
      ["lw-d", "y"],
    ]) {
      await core.createPersistentVolume({
        body: {
          metadata: { name, labels: { app } },
          spec: {
            capacity: { storage: "1Gi" },
            accessModes: ["ReadWriteOnce"],
            hostPath: { path: `/tmp/${name}` },
          },
        },
      });
    }
  });
  after(() => cp.stop());

  const lw = (watchInactivityTimeoutMs = 300) =>
    clientListWatch<V1PersistentVolume>(
      kc,
      new ApiClients(kc, { qps: -1, burst: 0 }).requestJson,
      resources.persistentVolumes,
      { labelSelector: "app=x" },
      { watchInactivityTimeoutMs },
    );
  const never = new AbortController().signal;

  test("lists pages with limit, continue and the scope's selector, as typed objects", async () => {
    const first = await lw().list({ limit: 2 }, never);
    assert.equal(first.items.length, 2);
    assert.ok(first.continue, "a continue token for the rest");
    assert.ok(first.items[0]?.metadata?.creationTimestamp instanceof Date);
    assert.ok(
      (await core.readPersistentVolume({ name: "lw-a" })).metadata?.managedFields,
      "the server keeps managedFields",
    );
    assert.equal(first.items[0]?.metadata?.managedFields, undefined, "trimmed before any cache, as KCM");
    assert.ok(
      Object.isFrozen(first.items[0]) && Object.isFrozen(first.items[0]?.spec?.capacity),
      "frozen page by page, as the cache would freeze them",
    );
    const rest = await lw().list({ limit: 2, continue: first.continue }, never);
    assert.deepEqual(
      [...first.items, ...rest.items].map((pv) => pv.metadata?.name),
      ["lw-a", "lw-b", "lw-c"],
    );
    assert.equal(rest.continue, undefined);
  });

  test("decodes watch events into the same typed objects; the client's inactivity timeout is a clean end", async () => {
    const { resourceVersion } = await lw().list({ limit: 500 }, never);
    // Created before the watch starts, from the list's resourceVersion: the server replays it at
    // once, so it cannot come after the 2 s of quiet that end the watch however slow the machine.
    await core.createPersistentVolume({
      body: {
        metadata: { name: "lw-e", labels: { app: "x" } },
        spec: {
          capacity: { storage: "1Gi" },
          accessModes: ["ReadWriteOnce"],
          hostPath: { path: "/tmp/lw-e" },
        },
      },
    });
    const events: WatchEvent<V1PersistentVolume>[] = [];
    // Resolves (not rejects) once the stream has been quiet for 2 s.
    await lw(2_000).watch(
      { resourceVersion, timeoutSeconds: 400, allowWatchBookmarks: true },
      (e) => events.push(e),
      never,
    );
    const added = events.filter((e) => e.type === "ADDED");
    assert.deepEqual(
      added.map((e) => e.type === "ADDED" && e.object.metadata?.name),
      ["lw-e"],
    );
    const e = added[0]!;
    assert.ok(e.type === "ADDED" && e.object.metadata?.creationTimestamp instanceof Date);
    assert.equal(e.object.metadata?.managedFields, undefined);
  });

  test("pods reach the caller as the volume loops read them, from a list and from a watch", async () => {
    const pods = clientListWatch<V1Pod>(
      kc,
      new ApiClients(kc, { qps: -1, burst: 0 }).requestJson,
      resources.pods,
      { namespace: "default" },
      { watchInactivityTimeoutMs: 2_000 },
    );
    const pod = (name: string) =>
      core.createNamespacedPod({
        namespace: "default",
        body: {
          metadata: { name },
          spec: {
            nodeName: "n1",
            containers: [
              { name: "app", image: "registry.k8s.io/pause:3.10", env: [{ name: "A", value: "b" }] },
            ],
            volumes: [{ name: "data", persistentVolumeClaim: { claimName: "c" } }],
          },
        },
      });
    await pod("lw-pod-listed");
    const listed = await pods.list({ limit: 500 }, never);
    // Created before the watch starts: replayed from the list's resourceVersion (as above).
    await pod("lw-pod-watched");
    const events: WatchEvent<V1Pod>[] = [];
    await pods.watch(
      { resourceVersion: listed.resourceVersion, timeoutSeconds: 400, allowWatchBookmarks: true },
      (e) => events.push(e),
      never,
    );
    const watched = events.flatMap((e) => (e.type === "ADDED" ? [e.object] : []));
    for (const p of [...listed.items, ...watched]) {
      assert.deepEqual(JSON.parse(JSON.stringify(p.spec)), {
        containers: [],
        nodeName: "n1",
        volumes: [{ name: "data", persistentVolumeClaim: { claimName: "c" } }],
      });
      assert.equal(p.metadata?.managedFields, undefined);
      assert.ok(p.metadata?.uid && p.metadata.resourceVersion);
    }
    assert.deepEqual(
      [...listed.items, ...watched].map((p) => p.metadata?.name),
      ["lw-pod-listed", "lw-pod-watched"],
    );
  });

  test("a list request is cancelled by its signal", async () => {
    const ac = new AbortController();
    ac.abort(new Error("stalled"));
    await assert.rejects(lw().list({ limit: 1 }, ac.signal), /stalled/);
  });
});
