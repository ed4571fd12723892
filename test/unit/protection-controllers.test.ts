import assert from "node:assert/strict";
import { afterEach, describe, test } from "node:test";
import {
  ApiException,
  type KubernetesObject,
  type V1ObjectMeta,
  type V1PersistentVolume,
  type V1PersistentVolumeClaim,
  type V1PersistentVolumeClaimStatus,
  type V1Pod,
} from "@kubernetes/client-node";
import { pino } from "pino";
import { objectKey, SharedInformer } from "../../src/runtime/informer/index.js";
import { PVCProtectionController } from "../../src/protection/pvc-protection-controller.js";
import { PVProtectionController } from "../../src/protection/pv-protection-controller.js";
import type { LogSink } from "../../src/runtime/logger.js";
import { informer, recordingLogger, ScriptedResource, until } from "./informer-fakes.js";

/*
 * Upstream's table tests, ported: informers over a scripted list (every object in it reaches the
 * handlers as an add) and a fake API that records each call and applies patches with a
 * resourceVersion precondition. A "no action" outcome is proven by a barrier: an object enqueued
 * after the subject, in the same namespace, whose own action can only come after the subject's turn.
 */

const F = "kubernetes.io/pvc-protection";
const PVF = "kubernetes.io/pv-protection";
const logger = pino({ level: "silent" });

function forbidden(): ApiException<string> {
  return new ApiException(
    403,
    "forbidden",
    JSON.stringify({ reason: "Forbidden", message: "mock error" }),
    {},
  );
}

/**
 * The apiserver's side: current objects by key; patches must name their current resourceVersion,
 * and what they write is passed to `onWrite`, for the watch.
 */
class FakeApi {
  readonly actions: string[] = [];
  onWrite: (obj: KubernetesObject) => void = () => {};
  readonly objects = new Map<string, KubernetesObject>();
  failures = { list: 0, patch: 0 };
  #rv = 100;

  constructor(
    objects: KubernetesObject[],
    readonly pods: V1Pod[],
  ) {
    for (const o of objects) this.objects.set(objectKey(o), structuredClone(o));
  }

  listNamespacedPod = ({ namespace }: { namespace: string }) => {
    this.actions.push(`list pods ${namespace}`);
    if (this.failures.list-- > 0) return Promise.reject(forbidden());
    return Promise.resolve({ items: this.pods.filter((p) => p.metadata?.namespace === namespace) });
  };

  patchNamespacedPersistentVolumeClaim = (req: { name: string; namespace: string; body: object }) =>
    this.#patch(`${req.namespace}/${req.name}`, req.body, "patch") as Promise<V1PersistentVolumeClaim>;

  patchNamespacedPersistentVolumeClaimStatus = (req: { name: string; namespace: string; body: object }) =>
    this.#patch(`${req.namespace}/${req.name}`, req.body, "patch status") as Promise<V1PersistentVolumeClaim>;

  patchPersistentVolume = (req: { name: string; body: object }) =>
    this.#patch(req.name, req.body, "patch") as Promise<V1PersistentVolume>;

  #patch(key: string, body: object, verb: string): Promise<KubernetesObject> {
    const { metadata, status } = body as { metadata: V1ObjectMeta; status?: V1PersistentVolumeClaimStatus };
    const shown = status?.conditions
      ? status.conditions.map((c) => `${c.type}=${c.status}`).join(",")
      : `[${(metadata.finalizers ?? []).join(",")}]`;
    this.actions.push(`${verb} ${key} ${shown}`);
    if (this.failures.patch-- > 0) return Promise.reject(forbidden());
    const current = this.objects.get(key) as V1PersistentVolumeClaim | undefined;
    if (!current) return Promise.reject(new ApiException(404, "not found", "{}", {}));
    if (metadata.resourceVersion !== current.metadata?.resourceVersion)
      return Promise.reject(new ApiException(409, "conflict", JSON.stringify({ reason: "Conflict" }), {}));
    const next = structuredClone(current);
    Object.assign((next.metadata ??= {}), metadata, { resourceVersion: String(++this.#rv) });
    if (status) Object.assign((next.status ??= {}), status);
    this.objects.set(key, next);
    this.onWrite(structuredClone(next));
    return Promise.resolve(structuredClone(next));
  }
}

const stops: (() => Promise<void>)[] = [];
afterEach(async () => {
  await Promise.all(stops.splice(0).map((stop) => stop()));
});

function start(
  informers: Pick<SharedInformer<never>, "run">[],
  run: (signal: AbortSignal) => Promise<void>,
): void {
  const ac = new AbortController();
  const done = [...informers.map((i) => i.run(ac.signal)), run(ac.signal)];
  stops.push(async () => {
    ac.abort();
    await Promise.all(done);
  });
}

interface PVCScenario {
  pvcs: V1PersistentVolumeClaim[];
  /** In the informer's cache. */
  cachedPods?: V1Pod[];
  /** Only in the live list: the cache is late. */
  livePods?: V1Pod[];
  unusedCondition?: boolean;
  shadow?: boolean;
  log?: LogSink;
}

function pvcController({
  pvcs,
  cachedPods = [],
  livePods = [],
  unusedCondition = false,
  shadow = false,
  log = logger,
}: PVCScenario) {
  const api = new FakeApi(pvcs, [...cachedPods, ...livePods]);
  const pvcResource = new ScriptedResource(pvcs);
  const podResource = new ScriptedResource(cachedPods);
  const pvcInformer = informer(pvcResource);
  const podInformer = informer(podResource);
  api.onWrite = (o) => void pvcResource.emit({ type: "MODIFIED", object: o });
  const controller = new PVCProtectionController({
    clients: { core: api },
    informers: { persistentVolumeClaims: () => pvcInformer, pods: () => podInformer },
    logger: log,
    unusedCondition,
    shadow,
  });
  start([pvcInformer, podInformer], (signal) => controller.run(signal));
  return { api, pods: podResource, pvcs: pvcResource };
}

function pvc(name: string, opts: { finalizers?: string[]; deleted?: boolean; ns?: string } = {}) {
  const claim: V1PersistentVolumeClaim = {
    metadata: {
      name,
      namespace: opts.ns ?? "default",
      uid: `uid-${name}`,
      resourceVersion: "1",
      finalizers: opts.finalizers ?? [F],
      ...(opts.deleted && { deletionTimestamp: new Date() }),
    },
    spec: {},
    status: { phase: "Pending" },
  };
  return claim;
}

const deleted = (name: string, ns?: string) => pvc(name, { deleted: true, ...(ns && { ns }) });
/** A claim lacking the finalizer: its patch marks the point its namespace's earlier keys were decided. */
const barrier = (ns = "default") => pvc("barrier", { finalizers: [], ns });
const barrierDone = (ns = "default") => `patch ${ns}/barrier [${F}]`;

function bound(claim: V1PersistentVolumeClaim, unused?: string): V1PersistentVolumeClaim {
  claim.status = {
    phase: "Bound",
    ...(unused && { conditions: [{ type: "Unused", status: unused, lastTransitionTime: new Date(0) }] }),
  };
  return claim;
}

function pod(
  claim: string,
  opts: { name?: string; uid?: string; phase?: string; nodeName?: string; ns?: string } = {},
): V1Pod {
  return {
    metadata: {
      name: opts.name ?? "pod1",
      namespace: opts.ns ?? "default",
      uid: opts.uid ?? "pod-uid",
      resourceVersion: "1",
    },
    spec: {
      containers: [],
      volumes: [{ name: "data", persistentVolumeClaim: { claimName: claim } }],
      ...(opts.nodeName !== "" && { nodeName: opts.nodeName ?? "node1" }),
    },
    status: { phase: opts.phase ?? "Pending" },
  };
}

async function actionsSettled(api: FakeApi, last: string): Promise<string[]> {
  await until(() => api.actions.includes(last), `action "${last}" (so far: ${api.actions.join("; ")})`);
  return api.actions;
}

describe("pvc-protection controller", () => {
  test("adds the finalizer to a claim lacking it, keeping other finalizers", async () => {
    const { api } = pvcController({ pvcs: [pvc("pvc1", { finalizers: ["example.com/a"] })] });
    assert.deepEqual(await actionsSettled(api, `patch default/pvc1 [example.com/a,${F}]`), [
      `patch default/pvc1 [example.com/a,${F}]`,
    ]);
  });

  test("a claim with the finalizer needs nothing", async () => {
    const { api } = pvcController({ pvcs: [pvc("pvc1"), barrier()] });
    assert.deepEqual(await actionsSettled(api, barrierDone()), [barrierDone()]);
  });

  test("saving the finalizer fails twice: retried until it sticks", async () => {
    const { api } = pvcController({ pvcs: [pvc("pvc1", { finalizers: [] })] });
    api.failures.patch = 2;
    const patch = `patch default/pvc1 [${F}]`;
    await until(() => api.actions.length === 3, "three attempts");
    assert.deepEqual(api.actions, [patch, patch, patch]);
    assert.deepEqual(api.objects.get("default/pvc1")?.metadata?.finalizers, [F]);
  });

  test("deleted claims in two namespaces, no pods: one live list per namespace, finalizer removed", async () => {
    const { api } = pvcController({ pvcs: [deleted("pvc1"), deleted("pvc2", "ns2")] });
    await until(() => api.actions.length === 4, "four actions");
    assert.deepEqual(
      api.actions.toSorted(),
      ["list pods default", "list pods ns2", "patch default/pvc1 []", "patch ns2/pvc2 []"].toSorted(),
    );
  });

  test("removing the finalizer fails twice: retried, each time checking a fresh live list", async () => {
    const { api } = pvcController({ pvcs: [deleted("pvc1")] });
    api.failures.patch = 2;
    await until(() => api.actions.length === 6, "six actions");
    assert.deepEqual(api.actions, Array(3).fill(["list pods default", "patch default/pvc1 []"]).flat());
  });

  test("a claim deleted before its finalizer patch (the cache behind): done, without an error or a retry", async () => {
    const log = recordingLogger();
    const { api } = pvcController({ pvcs: [deleted("pvc1"), barrier()], log });
    api.objects.delete("default/pvc1");
    assert.deepEqual(await actionsSettled(api, barrierDone()), [
      "list pods default",
      "patch default/pvc1 []",
      barrierDone(),
    ]);
    assert.deepEqual(
      log.lines.filter((l) => l.level === "error"),
      [],
    );
    assert.ok(log.lines.some((l) => l.msg === "PVC is gone; nothing to do"));
  });

  test("the live list fails for one claim: it is retried, the others go on", async () => {
    const { api } = pvcController({ pvcs: [deleted("pvc1"), deleted("pvc2")] });
    api.failures.list = 1;
    await until(() => api.actions.filter((a) => a.startsWith("patch")).length === 2, "both patched");
    assert.equal(api.actions[0], "list pods default");
    assert.deepEqual(api.actions.filter((a) => a.startsWith("patch")).toSorted(), [
      "patch default/pvc1 []",
      "patch default/pvc2 []",
    ]);
  });

  test("a scheduled pod in the cache keeps a deleted claim, without a live list", async () => {
    const { api } = pvcController({ pvcs: [deleted("pvc1"), barrier()], cachedPods: [pod("pvc1")] });
    assert.deepEqual(await actionsSettled(api, barrierDone()), [barrierDone()]);
  });

  test("a pod with an unrelated claim does not keep it", async () => {
    const { api } = pvcController({ pvcs: [deleted("pvc1")], cachedPods: [pod("unrelated")] });
    assert.deepEqual(await actionsSettled(api, "patch default/pvc1 []"), [
      "list pods default",
      "patch default/pvc1 []",
    ]);
  });

  test("a finished (Failed) pod still keeps it, as upstream", async () => {
    const { api } = pvcController({
      pvcs: [deleted("pvc1"), barrier()],
      cachedPods: [pod("pvc1", { phase: "Failed" })],
    });
    assert.deepEqual(await actionsSettled(api, barrierDone()), [barrierDone()]);
  });

  test("a pod the cache has not seen yet keeps it: found by the live list", async () => {
    const { api } = pvcController({ pvcs: [deleted("pvc1"), barrier()], livePods: [pod("pvc1")] });
    assert.deepEqual(await actionsSettled(api, barrierDone()), ["list pods default", barrierDone()]);
  });

  test("an unscheduled pod does not keep it", async () => {
    const { api } = pvcController({ pvcs: [deleted("pvc1")], cachedPods: [pod("pvc1", { nodeName: "" })] });
    assert.deepEqual(await actionsSettled(api, "patch default/pvc1 []"), [
      "list pods default",
      "patch default/pvc1 []",
    ]);
  });

  test("the pod using a deleted claim is deleted: the claim is released", async () => {
    const using = pod("pvc1");
    const { api, pods } = pvcController({ pvcs: [deleted("pvc1"), barrier()], cachedPods: [using] });
    await actionsSettled(api, barrierDone());
    api.pods.length = 0;
    await pods.emit({ type: "DELETED", object: using });
    assert.deepEqual(await actionsSettled(api, "patch default/pvc1 []"), [
      barrierDone(),
      "list pods default",
      "patch default/pvc1 []",
    ]);
  });

  test("a pod deleted and re-created under its name, seen as an update: the old pod's claim is released", async () => {
    const old = pod("pvc1");
    const { api, pods } = pvcController({ pvcs: [deleted("pvc1"), barrier()], cachedPods: [old] });
    await actionsSettled(api, barrierDone());
    const recreated = pod("other", { uid: "uid2" });
    recreated.metadata!.resourceVersion = "2";
    api.pods.splice(0, 1, recreated);
    await pods.emit({ type: "MODIFIED", object: recreated });
    assert.deepEqual(await actionsSettled(api, "patch default/pvc1 []"), [
      barrierDone(),
      "list pods default",
      "patch default/pvc1 []",
    ]);
  });

  test("an ephemeral volume's claim is kept by the pod that owns it, not by a name collision", async () => {
    const eph = (uid: string) => {
      const claim = deleted("pod1-scratch");
      claim.metadata!.ownerReferences = [
        { apiVersion: "v1", kind: "Pod", name: "pod1", uid, controller: true },
      ];
      return claim;
    };
    const owner = pod("x");
    owner.spec!.volumes = [{ name: "scratch", ephemeral: {} }];
    const kept = pvcController({ pvcs: [eph("pod-uid"), barrier()], cachedPods: [owner] });
    assert.deepEqual(await actionsSettled(kept.api, barrierDone()), [barrierDone()]);
    const released = pvcController({ pvcs: [eph("another-uid")], cachedPods: [owner] });
    assert.deepEqual(await actionsSettled(released.api, "patch default/pod1-scratch []"), [
      "list pods default",
      "patch default/pod1-scratch []",
    ]);
  });

  describe("with the Unused condition (PersistentVolumeClaimUnusedSinceTime)", () => {
    test("a bound claim no pod uses becomes Unused=True, after a live list", async () => {
      const { api } = pvcController({ pvcs: [bound(pvc("pvc1"))], unusedCondition: true });
      assert.deepEqual(await actionsSettled(api, "patch status default/pvc1 Unused=True"), [
        "list pods default",
        "patch status default/pvc1 Unused=True",
      ]);
    });

    test("a bound claim a pod uses becomes Unused=False, from the cache alone", async () => {
      const { api } = pvcController({
        pvcs: [bound(pvc("pvc1"))],
        cachedPods: [pod("pvc1", { phase: "Running", nodeName: "" })],
        unusedCondition: true,
      });
      assert.deepEqual(await actionsSettled(api, "patch status default/pvc1 Unused=False"), [
        "patch status default/pvc1 Unused=False",
      ]);
    });

    test("terminated pods do not count", async () => {
      const { api } = pvcController({
        pvcs: [bound(pvc("pvc1"))],
        cachedPods: [pod("pvc1", { phase: "Succeeded" })],
        unusedCondition: true,
      });
      assert.deepEqual(await actionsSettled(api, "patch status default/pvc1 Unused=True"), [
        "list pods default",
        "patch status default/pvc1 Unused=True",
      ]);
    });

    test("pending claims and claims whose condition is current are left alone", async () => {
      const { api } = pvcController({
        pvcs: [pvc("pending"), bound(pvc("current"), "True"), barrier()],
        unusedCondition: true,
      });
      assert.deepEqual(await actionsSettled(api, barrierDone()), [barrierDone()]);
    });

    test("a pod starting to use an Unused claim flips it to False; its deletion back to True", async () => {
      const { api, pods } = pvcController({ pvcs: [bound(pvc("pvc1"), "True")], unusedCondition: true });
      const using = pod("pvc1", { phase: "Running" });
      api.pods.push(using);
      await pods.emit({ type: "ADDED", object: using });
      await actionsSettled(api, "patch status default/pvc1 Unused=False");
      api.pods.length = 0;
      await pods.emit({ type: "DELETED", object: using });
      assert.deepEqual(await actionsSettled(api, "patch status default/pvc1 Unused=True"), [
        "patch status default/pvc1 Unused=False",
        "list pods default",
        "patch status default/pvc1 Unused=True",
      ]);
    });

    test("a used bound claim lacking the finalizer: condition, then finalizer on the new resourceVersion", async () => {
      const { api } = pvcController({
        pvcs: [bound(pvc("pvc1", { finalizers: [] }))],
        cachedPods: [pod("pvc1")],
        unusedCondition: true,
      });
      assert.deepEqual(await actionsSettled(api, `patch default/pvc1 [${F}]`), [
        "patch status default/pvc1 Unused=False",
        `patch default/pvc1 [${F}]`,
      ]);
      const stored = api.objects.get("default/pvc1") as V1PersistentVolumeClaim;
      assert.deepEqual(stored.metadata?.finalizers, [F]);
      assert.equal(stored.status?.conditions?.[0]?.status, "False");
    });

    test("shadow mode: the version KCM changed the condition in is judged, though the latest holds KCM's answer", async () => {
      const { api, pvcs } = pvcController({
        pvcs: [bound(pvc("pvc1"), "True")],
        unusedCondition: true,
        shadow: true,
      });
      // KCM saw a pod kvc's cache has not: its claim says Unused=False before kvc's worker looked.
      api.pods.push(pod("pvc1", { phase: "Running" }));
      const answered = bound(pvc("pvc1"), "False");
      answered.metadata = { ...answered.metadata, resourceVersion: "2" };
      api.objects.set("default/pvc1", structuredClone(answered));
      await pvcs.emit({ type: "MODIFIED", object: answered });
      // kvc's own decision, from the version KCM decided from (the shadow compares the two).
      assert.deepEqual(await actionsSettled(api, "patch status default/pvc1 Unused=False"), [
        "list pods default",
        "patch status default/pvc1 Unused=False",
      ]);
    });

    test("a deleted claim keeps its condition and loses only the finalizer", async () => {
      const claim = bound(deleted("pvc1"), "True");
      const { api } = pvcController({ pvcs: [claim], unusedCondition: true });
      await actionsSettled(api, "patch default/pvc1 []");
      assert.deepEqual(api.actions, ["list pods default", "patch default/pvc1 []"]);
    });
  });

  test("without the condition, bound claims get none", async () => {
    const { api } = pvcController({ pvcs: [bound(pvc("pvc1")), barrier()] });
    assert.deepEqual(await actionsSettled(api, barrierDone()), [barrierDone()]);
  });
});

describe("pv-protection controller", () => {
  function pv(name: string, opts: { finalizers?: string[]; deleted?: boolean; phase?: string } = {}) {
    const volume: V1PersistentVolume = {
      metadata: {
        name,
        uid: `uid-${name}`,
        resourceVersion: "1",
        finalizers: opts.finalizers ?? [PVF],
        ...(opts.deleted && { deletionTimestamp: new Date() }),
      },
      spec: {},
      status: { phase: opts.phase ?? "Available" },
    };
    return volume;
  }

  function pvController(pvs: V1PersistentVolume[], log: LogSink = logger) {
    const api = new FakeApi(pvs, []);
    const resource = new ScriptedResource(pvs);
    const pvInformer = informer(resource);
    api.onWrite = (o) => void resource.emit({ type: "MODIFIED", object: o });
    const controller = new PVProtectionController({
      clients: { core: api },
      informers: { persistentVolumes: () => pvInformer },
      logger: log,
    });
    start([pvInformer], (signal) => controller.run(signal));
    return { api, resource };
  }

  const pvBarrier = () => pv("barrier", { finalizers: [] });
  const pvBarrierDone = `patch barrier [${PVF}]`;

  test("adds the finalizer to a volume lacking it", async () => {
    const { api } = pvController([pv("pv1", { finalizers: ["example.com/a"] })]);
    assert.deepEqual(await actionsSettled(api, `patch pv1 [example.com/a,${PVF}]`), [
      `patch pv1 [example.com/a,${PVF}]`,
    ]);
  });

  test("saving the finalizer fails twice: retried", async () => {
    const { api } = pvController([pv("pv1", { finalizers: [] })]);
    api.failures.patch = 2;
    await until(() => api.actions.length === 3, "three attempts");
    assert.deepEqual(api.objects.get("pv1")?.metadata?.finalizers, [PVF]);
  });

  test("a deleted volume not bound loses the finalizer; a bound one keeps it", async () => {
    const { api } = pvController([
      pv("released", { deleted: true, phase: "Released" }),
      pv("bound", { deleted: true, phase: "Bound" }),
      pvBarrier(),
    ]);
    assert.deepEqual(await actionsSettled(api, pvBarrierDone), ["patch released []", pvBarrierDone]);
  });

  test("a volume deleted before its finalizer patch (the cache behind): done, without an error or a retry", async () => {
    const log = recordingLogger();
    const { api } = pvController([pv("pv1", { deleted: true }), pvBarrier()], log);
    api.objects.delete("pv1");
    assert.deepEqual(await actionsSettled(api, pvBarrierDone), ["patch pv1 []", pvBarrierDone]);
    assert.deepEqual(
      log.lines.filter((l) => l.level === "error"),
      [],
    );
    assert.ok(log.lines.some((l) => l.msg === "PV is gone; nothing to do"));
  });

  test("a deleted bound volume is released once its status is no longer Bound", async () => {
    const volume = pv("pv1", { deleted: true, phase: "Bound" });
    const { api, resource } = pvController([volume, pvBarrier()]);
    await actionsSettled(api, pvBarrierDone);
    const released = structuredClone(volume);
    released.metadata!.resourceVersion = "2";
    released.status = { phase: "Released" };
    api.objects.set("pv1", released);
    await resource.emit({ type: "MODIFIED", object: released });
    assert.deepEqual(await actionsSettled(api, "patch pv1 []"), [pvBarrierDone, "patch pv1 []"]);
  });
});
