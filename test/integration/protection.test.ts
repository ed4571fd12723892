import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import {
  type CoreV1Api,
  type V1PersistentVolume,
  type V1PersistentVolumeClaim,
  type V1Pod,
  type V1Volume,
} from "@kubernetes/client-node";
import { LocalControlPlane } from "../../src/controlplane/local-control-plane.js";
import { PVProtectionController } from "../../src/protection/pv-protection-controller.js";
import { PVCProtectionController } from "../../src/protection/pvc-protection-controller.js";
import { isNotFound } from "../../src/runtime/api-errors.js";
import { ApiClients } from "../../src/runtime/client.js";
import { InformerFactory } from "../../src/runtime/informer/index.js";
import type { LogSink } from "../../src/runtime/logger.js";
import { waitFor } from "../../src/util/wait.js";
import { mergePatch } from "../../src/runtime/client.js";

/*
 * Both controllers against a real apiserver, whose StorageObjectInUseProtection admission plugin
 * adds the finalizers. No scheduler or kubelet runs: pods get spec.nodeName directly and their
 * phase through the status subresource.
 *
 * "Still there" is proven with a barrier rather than a sleep: each controller runs one worker on a
 * FIFO queue, so once an object deleted after the subject (a PVC in the same namespace, or a PV) is
 * gone, the controller has already decided on the subject.
 */

const ns = "default";
const PVC_FINALIZER = "kubernetes.io/pvc-protection";
const PV_FINALIZER = "kubernetes.io/pv-protection";
const timeoutMs = 30_000;

describe("protection controllers on a real apiserver", () => {
  let cp: LocalControlPlane;
  let core: CoreV1Api;
  const stop = new AbortController();
  let running: Promise<unknown>;
  const errors: string[] = [];
  let barriers = 0;

  before(async () => {
    cp = await LocalControlPlane.start();
    const kubeConfig = cp.kubeConfig();
    const clients = new ApiClients(kubeConfig, { qps: -1, burst: 0 });
    core = clients.core;
    const informers = new InformerFactory({ kubeConfig, apis: clients });
    const logger = errorRecorder(errors);
    const pvc = new PVCProtectionController({ clients, informers, logger });
    const pv = new PVProtectionController({ clients, informers, logger });
    running = Promise.all([informers.start(stop.signal), pvc.run(stop.signal), pv.run(stop.signal)]);
    await informers.waitForCacheSync(stop.signal);
  });

  after(async () => {
    stop.abort();
    await running;
    await cp.stop();
    assert.deepEqual(errors, [], "the controllers logged no errors");
  });

  const readPVC = (name: string) => core.readNamespacedPersistentVolumeClaim({ namespace: ns, name });
  const deletePVC = (name: string) => core.deleteNamespacedPersistentVolumeClaim({ namespace: ns, name });

  async function createPVC(name: string, finalizers: string[] = []): Promise<V1PersistentVolumeClaim> {
    return core.createNamespacedPersistentVolumeClaim({
      namespace: ns,
      body: {
        metadata: { name, finalizers },
        spec: {
          accessModes: ["ReadWriteOnce"],
          storageClassName: "manual",
          resources: { requests: { storage: "1Gi" } },
        },
      },
    });
  }

  /** A pod bound to node-1 unless `unscheduled`; no kubelet runs, so it never starts. */
  async function createPod(name: string, volumes: V1Volume[], { unscheduled = false } = {}): Promise<V1Pod> {
    return core.createNamespacedPod({
      namespace: ns,
      body: {
        metadata: { name },
        spec: {
          ...(!unscheduled && { nodeName: "node-1" }),
          containers: [{ name: "c", image: "registry.k8s.io/pause:3.10" }],
          volumes,
        },
      },
    });
  }

  const claimVolume = (claimName: string): V1Volume => ({
    name: "data",
    persistentVolumeClaim: { claimName },
  });

  async function setPodPhase(name: string, phase: string): Promise<void> {
    await core.patchNamespacedPodStatus({ namespace: ns, name, body: { status: { phase } } }, mergePatch);
  }

  async function deletePodNow(name: string): Promise<void> {
    await core.deleteNamespacedPod({ namespace: ns, name, gracePeriodSeconds: 0 });
  }

  async function gone(what: string, read: () => Promise<unknown>): Promise<void> {
    await waitFor(
      async () => {
        try {
          await read();
          return false;
        } catch (err) {
          if (isNotFound(err)) return true;
          throw err;
        }
      },
      { timeoutMs, what: `${what} to be gone` },
    );
  }

  /** A PVC deleted after the subject is gone: the subject has had its turn. */
  async function pvcBarrier(): Promise<void> {
    const name = `barrier-${++barriers}`;
    await createPVC(name);
    await deletePVC(name);
    await gone(`PVC ${name}`, () => readPVC(name));
  }

  async function assertTerminating(name: string, finalizers = [PVC_FINALIZER]): Promise<void> {
    const claim = await readPVC(name);
    assert.ok(claim.metadata?.deletionTimestamp, `PVC ${name} is being deleted`);
    assert.deepEqual(claim.metadata.finalizers, finalizers);
  }

  describe("pvc-protection", () => {
    test("a claim a pod uses stays Terminating while the pod exists; deleting the pod releases it", async () => {
      await createPVC("used");
      await createPod("user", [claimVolume("used")]);
      await deletePVC("used");
      await pvcBarrier();
      await assertTerminating("used");
      await deletePodNow("user");
      await gone("PVC used", () => readPVC("used"));
    });

    test("a claim no pod uses is deleted promptly", async () => {
      await createPVC("unused");
      await deletePVC("unused");
      await gone("PVC unused", () => readPVC("unused"));
    });

    test("a pod not yet scheduled does not hold the claim", async () => {
      await createPVC("unscheduled");
      await createPod("pending", [claimVolume("unscheduled")], { unscheduled: true });
      await deletePVC("unscheduled");
      await gone("PVC unscheduled", () => readPVC("unscheduled"));
      await deletePodNow("pending");
    });

    test("a terminated (Succeeded) pod still holds the claim, as upstream, until it is deleted", async () => {
      await createPVC("finished");
      await createPod("done", [claimVolume("finished")]);
      await setPodPhase("done", "Succeeded");
      await deletePVC("finished");
      await pvcBarrier();
      await assertTerminating("finished");
      await deletePodNow("done");
      await gone("PVC finished", () => readPVC("finished"));
    });

    test("a generic ephemeral volume's claim is held by its pod until the pod is shut down", async () => {
      const pod = await createPod("eph", [
        {
          name: "scratch",
          ephemeral: {
            volumeClaimTemplate: {
              spec: {
                accessModes: ["ReadWriteOnce"],
                storageClassName: "manual",
                resources: { requests: { storage: "1Gi" } },
              },
            },
          },
        },
      ]);
      // What the ephemeral volume controller would create: <pod>-<volume>, controlled by the pod.
      await core.createNamespacedPersistentVolumeClaim({
        namespace: ns,
        body: {
          metadata: {
            name: "eph-scratch",
            ownerReferences: [
              { apiVersion: "v1", kind: "Pod", name: "eph", uid: pod.metadata!.uid!, controller: true },
            ],
          },
          spec: {
            accessModes: ["ReadWriteOnce"],
            storageClassName: "manual",
            resources: { requests: { storage: "1Gi" } },
          },
        },
      });
      // A pod finalizer keeps the shut-down pod around, as one waiting on the claim might.
      await core.patchNamespacedPod(
        { namespace: ns, name: "eph", body: { metadata: { finalizers: ["example.com/hold"] } } },
        mergePatch,
      );
      await deletePVC("eph-scratch");
      await pvcBarrier();
      await assertTerminating("eph-scratch");
      await deletePodNow("eph");
      await gone("PVC eph-scratch", () => readPVC("eph-scratch"));
      const shutDown = await core.readNamespacedPod({ namespace: ns, name: "eph" });
      assert.equal(shutDown.metadata?.deletionGracePeriodSeconds, 0, "the pod still exists, shut down");
      await core.patchNamespacedPod(
        { namespace: ns, name: "eph", body: { metadata: { finalizers: [] } } },
        mergePatch,
      );
    });

    test("only its own finalizer is removed; another writer's stays", async () => {
      await createPVC("shared", ["example.com/keep"]);
      assert.deepEqual((await readPVC("shared")).metadata?.finalizers, ["example.com/keep", PVC_FINALIZER]);
      await deletePVC("shared");
      await waitFor(
        async () => {
          const claim = await readPVC("shared");
          return claim.metadata?.finalizers?.join() === "example.com/keep";
        },
        { timeoutMs, what: "PVC shared to keep only example.com/keep" },
      );
      await core.patchNamespacedPersistentVolumeClaim(
        { namespace: ns, name: "shared", body: { metadata: { finalizers: [] } } },
        mergePatch,
      );
      await gone("PVC shared", () => readPVC("shared"));
    });

    test("a claim that lost its finalizer gets it back", async () => {
      await createPVC("stripped");
      await core.patchNamespacedPersistentVolumeClaim(
        { namespace: ns, name: "stripped", body: { metadata: { finalizers: [] } } },
        mergePatch,
      );
      await waitFor(async () => (await readPVC("stripped")).metadata?.finalizers?.includes(PVC_FINALIZER), {
        timeoutMs,
        what: "PVC stripped to get its finalizer back",
      });
      await deletePVC("stripped");
      await gone("PVC stripped", () => readPVC("stripped"));
    });

    test("a bound claim's Unused condition follows its non-terminated pods", async () => {
      await createPVC("tracked");
      await core.patchNamespacedPersistentVolumeClaimStatus(
        { namespace: ns, name: "tracked", body: { status: { phase: "Bound" } } },
        mergePatch,
      );
      const unused = (status: string) =>
        waitFor(
          async () =>
            (await readPVC("tracked")).status?.conditions?.find((c) => c.type === "Unused")?.status ===
            status,
          { timeoutMs, what: `PVC tracked to be Unused=${status}` },
        );
      await unused("True");
      await createPod("tracker", [claimVolume("tracked")], { unscheduled: true });
      await unused("False");
      await setPodPhase("tracker", "Succeeded");
      await unused("True");
      await deletePodNow("tracker");
      await deletePVC("tracked");
      await gone("PVC tracked", () => readPVC("tracked"));
    });
  });

  describe("pv-protection", () => {
    const readPV = (name: string) => core.readPersistentVolume({ name });

    async function createPV(name: string): Promise<V1PersistentVolume> {
      return core.createPersistentVolume({
        body: {
          metadata: { name },
          spec: {
            capacity: { storage: "1Gi" },
            accessModes: ["ReadWriteOnce"],
            storageClassName: "manual",
            hostPath: { path: `/tmp/${name}` },
          },
        },
      });
    }

    async function setPhase(name: string, phase: string): Promise<void> {
      await core.patchPersistentVolumeStatus({ name, body: { status: { phase } } }, mergePatch);
    }

    test("a volume that is not bound is deleted promptly", async () => {
      await createPV("free");
      await setPhase("free", "Available");
      await core.deletePersistentVolume({ name: "free" });
      await gone("PV free", () => readPV("free"));
    });

    test("a Bound volume stays Terminating; once Available it is released", async () => {
      await createPV("bound");
      await setPhase("bound", "Bound");
      await core.deletePersistentVolume({ name: "bound" });
      await createPV("pv-barrier");
      await core.deletePersistentVolume({ name: "pv-barrier" });
      await gone("PV pv-barrier", () => readPV("pv-barrier"));
      const held = await readPV("bound");
      assert.ok(held.metadata?.deletionTimestamp);
      assert.deepEqual(held.metadata.finalizers, [PV_FINALIZER]);
      await setPhase("bound", "Available");
      await gone("PV bound", () => readPV("bound"));
    });

    test("a volume that lost its finalizer gets it back", async () => {
      await createPV("stripped");
      await core.patchPersistentVolume(
        { name: "stripped", body: { metadata: { finalizers: [] } } },
        mergePatch,
      );
      await waitFor(async () => (await readPV("stripped")).metadata?.finalizers?.includes(PV_FINALIZER), {
        timeoutMs,
        what: "PV stripped to get its finalizer back",
      });
      await core.deletePersistentVolume({ name: "stripped" });
      await gone("PV stripped", () => readPV("stripped"));
    });
  });
});

/** A LogSink keeping error lines: conflicts are logged below error, anything else is a failure. */
function errorRecorder(errors: string[]): LogSink {
  const ignore = () => {};
  return {
    debug: ignore,
    info: ignore,
    warn: ignore,
    error: (obj, msg) => errors.push(`${msg} ${JSON.stringify(obj)}`),
  };
}
