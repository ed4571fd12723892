import assert from "node:assert/strict";
import { createServer, connect, type AddressInfo, type Socket } from "node:net";
import { after, before, describe, test } from "node:test";
import {
  CoreV1Api,
  KubeConfig,
  type KubernetesObject,
  type V1PersistentVolume,
  type V1PersistentVolumeClaim,
} from "@kubernetes/client-node";
import { LocalControlPlane } from "../../src/controlplane/local-control-plane.js";
import { InformerFactory, objectKey, type SharedInformer } from "../../src/runtime/informer/index.js";
import { waitFor } from "../../src/util/wait.js";
import { recordingLogger } from "../unit/informer-fakes.js";

/*
 * How the outage tests make changes the informers cannot see. The informers reach the apiserver
 * through a TCP relay of this test; the test's own client goes direct. Blocking the relay cuts the
 * informers off for certain (their reconnects are dropped, they back off) while the test creates,
 * updates and deletes objects; unblocking lets them resume from their last resourceVersion. So the
 * missed changes are not a race against the informers' backoff: the informers can only learn of them
 * by re-watching (events replayed) or by relisting (after 410).
 *
 * PVCs bypass the apiserver's watch cache (--watch-cache-sizes=persistentvolumeclaims#0): their
 * watches are served by etcd itself, so compacting etcd alone makes a re-watch from an old
 * resourceVersion fail with 410 — through the watch cache the compaction would be invisible until
 * the cache's own window moved on. PVs keep the watch cache, the production path, where a restarted
 * apiserver answers an old resourceVersion with 410 because its fresh cache does not reach back.
 */

const ns = "default";

interface Relay {
  port: number;
  /** New connections are dropped at once; live ones carry on. */
  block(): void;
  unblock(): void;
  /** Drops every live connection. */
  cut(): void;
  close(): Promise<void>;
}

async function startRelay(targetPort: number): Promise<Relay> {
  const sockets = new Set<Socket>();
  let blocked = false;
  const server = createServer((client) => {
    if (blocked) {
      client.destroy();
      return;
    }
    const upstream = connect(targetPort, "127.0.0.1");
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on("error", () => {}); // either side failing just ends the pair, on close
      s.on("close", () => {
        sockets.delete(s);
        client.destroy();
        upstream.destroy();
      });
    }
    client.pipe(upstream).pipe(client);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const cut = () => {
    for (const s of sockets) s.destroy();
  };
  return {
    port: (server.address() as AddressInfo).port,
    block: () => (blocked = true),
    unblock: () => (blocked = false),
    cut,
    close: async () => {
      cut();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

function viaRelay(kc: KubeConfig, port: number): KubeConfig {
  const relayed = new KubeConfig();
  relayed.loadFromOptions({
    clusters: kc.clusters.map((c) => ({ ...c, server: `https://127.0.0.1:${port}` })),
    users: kc.users,
    contexts: kc.contexts,
    currentContext: kc.currentContext,
  });
  return relayed;
}

/** What a consumer learns from the handlers alone: key → resourceVersion. */
function mirror<T extends KubernetesObject>(informer: SharedInformer<T>) {
  const seen = new Map<string, string>();
  const log: string[] = [];
  const rv = (o: T) => o.metadata?.resourceVersion ?? "";
  informer.addEventHandler({
    onAdd: (o) => {
      seen.set(objectKey(o), rv(o));
      log.push(`add ${objectKey(o)}`);
    },
    onUpdate: (_, o) => {
      seen.set(objectKey(o), rv(o));
      log.push(`update ${objectKey(o)}`);
    },
    onDelete: (o, { finalStateUnknown }) => {
      seen.delete(objectKey(o));
      log.push(`delete ${objectKey(o)}${finalStateUnknown ? " (tombstone)" : ""}`);
    },
  });
  return { seen, log };
}

function versions(objs: readonly KubernetesObject[]): Map<string, string> {
  return new Map(objs.map((o) => [objectKey(o), o.metadata?.resourceVersion ?? ""]));
}

/** Throws with the differences, so a timed-out wait says what never converged. */
function assertSame(what: string, actual: Map<string, string>, truth: Map<string, string>): void {
  const diffs: string[] = [];
  for (const [k, v] of truth)
    if (actual.get(k) !== v) diffs.push(`${k}: ${actual.get(k) ?? "missing"} ≠ ${v}`);
  for (const k of actual.keys()) if (!truth.has(k)) diffs.push(`${k}: phantom`);
  if (diffs.length) throw new Error(`${what} differs from a fresh LIST: ${diffs.slice(0, 10).join("; ")}`);
}

function pv(name: string): V1PersistentVolume {
  return {
    metadata: { name, labels: { test: "informer" } },
    spec: {
      capacity: { storage: "1Gi" },
      accessModes: ["ReadWriteOnce"],
      persistentVolumeReclaimPolicy: "Retain",
      storageClassName: "manual",
      hostPath: { path: `/tmp/${name}` },
    },
  };
}

function pvc(name: string): V1PersistentVolumeClaim {
  return {
    metadata: { name, namespace: ns },
    spec: {
      accessModes: ["ReadWriteOnce"],
      storageClassName: "manual",
      resources: { requests: { storage: "1Gi" } },
    },
  };
}

describe("informers on a real apiserver", () => {
  let cp: LocalControlPlane;
  let relay: Relay;
  let core: CoreV1Api;
  let factory: InformerFactory;
  let pvs: SharedInformer<V1PersistentVolume>;
  let pvcs: SharedInformer<V1PersistentVolumeClaim>;
  let pvMirror: ReturnType<typeof mirror<V1PersistentVolume>>;
  let pvcMirror: ReturnType<typeof mirror<V1PersistentVolumeClaim>>;
  const logger = recordingLogger();
  const stop = new AbortController();
  let stopped: Promise<void>;

  // Deletes wait on the protection finalizers the admission plugins add; no controller removes them here.
  const deletePv = async (name: string) => {
    await core.deletePersistentVolume({ name });
    await core.patchPersistentVolume({
      name,
      body: [{ op: "replace", path: "/metadata/finalizers", value: [] }],
    });
  };
  const deletePvc = async (name: string) => {
    await core.deleteNamespacedPersistentVolumeClaim({ namespace: ns, name });
    await core.patchNamespacedPersistentVolumeClaim({
      namespace: ns,
      name,
      body: [{ op: "replace", path: "/metadata/finalizers", value: [] }],
    });
  };
  const touchPv = async (name: string) => {
    await core.patchPersistentVolume({
      name,
      body: [{ op: "add", path: "/metadata/annotations", value: { touched: String(Date.now()) } }],
    });
  };
  const touchPvc = async (name: string) => {
    await core.patchNamespacedPersistentVolumeClaim({
      namespace: ns,
      name,
      body: [{ op: "add", path: "/metadata/annotations", value: { touched: String(Date.now()) } }],
    });
  };

  /** Waits until cache and handlers both equal a fresh LIST: same keys, same resourceVersions. */
  async function converged(): Promise<void> {
    await waitFor(
      async () => {
        const truePvs = versions((await core.listPersistentVolume()).items);
        const truePvcs = versions((await core.listPersistentVolumeClaimForAllNamespaces()).items);
        assertSame("PV cache", versions(pvs.store.list()), truePvs);
        assertSame("PV handlers", pvMirror.seen, truePvs);
        assertSame("PVC cache", versions(pvcs.store.list()), truePvcs);
        assertSame("PVC handlers", pvcMirror.seen, truePvcs);
        return true;
      },
      { timeoutMs: 180_000, intervalMs: 250, what: "informers to converge" },
    );
  }

  /** Creates, updates and deletes PVs and PVCs with the test's direct client. */
  async function changeEverything(tag: string): Promise<void> {
    const livePvs = (await core.listPersistentVolume()).items.map((o) => o.metadata!.name!).sort();
    const livePvcs = (await core.listNamespacedPersistentVolumeClaim({ namespace: ns })).items
      .map((o) => o.metadata!.name!)
      .sort();
    for (let i = 0; i < 4; i++) {
      await core.createPersistentVolume({ body: pv(`${tag}-pv-${i}`) });
      await core.createNamespacedPersistentVolumeClaim({ namespace: ns, body: pvc(`${tag}-pvc-${i}`) });
    }
    for (const name of livePvs.slice(0, 3)) await touchPv(name);
    for (const name of livePvcs.slice(0, 3)) await touchPvc(name);
    for (const name of livePvs.slice(3, 6)) await deletePv(name);
    for (const name of livePvcs.slice(3, 6)) await deletePvc(name);
  }

  before(async () => {
    cp = await LocalControlPlane.start({ apiserverArgs: ["--watch-cache-sizes=persistentvolumeclaims#0"] });
    const kc = cp.kubeConfig();
    core = kc.makeApiClient(CoreV1Api);
    for (let i = 0; i < 12; i++) {
      const n = String(i).padStart(2, "0");
      await core.createPersistentVolume({ body: pv(`init-pv-${n}`) });
      await core.createNamespacedPersistentVolumeClaim({ namespace: ns, body: pvc(`init-pvc-${n}`) });
    }
    relay = await startRelay(cp.apiserverPort);
    // pageSize 5: the first list of 12 objects takes three pages.
    factory = new InformerFactory({ kubeConfig: viaRelay(kc, relay.port), logger, pageSize: 5 });
    pvs = factory.persistentVolumes();
    pvcs = factory.persistentVolumeClaims();
    pvMirror = mirror(pvs);
    pvcMirror = mirror(pvcs);
    stopped = factory.start(stop.signal);
    await factory.waitForCacheSync(AbortSignal.timeout(60_000));
  });

  after(async () => {
    stop.abort();
    await stopped;
    await relay.close();
    await cp.stop();
    const noisy = logger.lines.filter((l) => l.level === "warn" || l.level === "error");
    console.log(`informer warnings/errors over the whole run: ${noisy.length}`);
  });

  test("syncs a paginated first list, then sees creates, updates and deletes", async () => {
    assert.equal(pvs.store.size, 12);
    assert.equal(pvcs.store.size, 12);
    assert.equal(pvMirror.log.length, 12);
    assert.equal(pvs.stats.lists, 1);

    const created = await core.createPersistentVolume({ body: pv("live-pv") });
    await waitFor(() => pvMirror.seen.get("live-pv") === created.metadata?.resourceVersion, {
      timeoutMs: 30_000,
      what: "the PV add",
    });
    const cached = pvs.store.get("live-pv");
    assert.ok(
      cached?.metadata?.creationTimestamp instanceof Date,
      "watch objects are typed like list objects",
    );
    assert.ok(Object.isFrozen(cached.spec));

    await touchPv("live-pv");
    const updated = await core.readPersistentVolume({ name: "live-pv" });
    await waitFor(() => pvMirror.seen.get("live-pv") === updated.metadata?.resourceVersion, {
      timeoutMs: 30_000,
      what: "the PV update",
    });
    await deletePv("live-pv");
    await waitFor(() => !pvMirror.seen.has("live-pv") && !pvs.store.get("live-pv"), {
      timeoutMs: 30_000,
      what: "the PV delete",
    });
    // add, then updates (annotation, deletionTimestamp, finalizer removal), then the delete
    const seen = pvMirror.log.filter((l) => l.endsWith(" live-pv"));
    assert.equal(seen[0], "add live-pv");
    assert.equal(seen.at(-1), "delete live-pv");
    assert.ok(seen.slice(1, -1).every((l) => l === "update live-pv") && seen.length >= 4, seen.join(", "));

    await core.createNamespacedPersistentVolumeClaim({ namespace: ns, body: pvc("live-pvc") });
    await waitFor(() => pvcs.store.get(`${ns}/live-pvc`), { timeoutMs: 30_000, what: "the PVC add" });
    await touchPvc("live-pvc");
    await deletePvc("live-pvc");
    await waitFor(() => !pvcMirror.seen.has(`${ns}/live-pvc`), { timeoutMs: 30_000, what: "the PVC delete" });
    assert.equal(pvcMirror.log.at(-1), `delete ${ns}/live-pvc`);
    await converged();
  });

  test("converges after an apiserver restart with changes made while the informers were cut off", async () => {
    const pvBefore = { ...pvs.stats };
    const pvcBefore = { ...pvcs.stats };
    relay.block();
    await cp.restartApiServer(); // ends every live watch mid-stream
    await changeEverything("restart");
    relay.unblock();
    await converged();
    console.log("after restart: PV", pvs.stats, "PVC", pvcs.stats);
    assert.ok(pvs.stats.failures > pvBefore.failures, "the PV informer was really cut off");
    assert.ok(pvcs.stats.failures > pvcBefore.failures, "the PVC informer was really cut off");
  });

  test("relists and converges when etcd compaction expired its resourceVersion", async () => {
    const before = { ...pvcs.stats };
    relay.block();
    relay.cut();
    await changeEverything("compact");
    const etcd = `http://127.0.0.1:${cp.etcdPort}`;
    const range = (await (
      await fetch(`${etcd}/v3/kv/range`, { method: "POST", body: JSON.stringify({ key: "AA==" }) })
    ).json()) as { header: { revision: string } };
    const compaction = await fetch(`${etcd}/v3/kv/compaction`, {
      method: "POST",
      body: JSON.stringify({ revision: range.header.revision, physical: true }),
    });
    assert.equal(compaction.status, 200, await compaction.text());
    relay.unblock();
    await converged();
    console.log("after compaction: PVC", pvcs.stats);
    assert.ok(pvcs.stats.expired > before.expired, "the re-watch from the compacted revision got 410");
    assert.ok(pvcs.stats.lists > before.lists, "and the informer relisted");
    assert.ok(
      pvcMirror.log.some((l) => l.endsWith("(tombstone)")),
      "deletes missed while cut off reach handlers as tombstones",
    );
  });
});
