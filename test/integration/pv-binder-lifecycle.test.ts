import assert from "node:assert/strict";
import { existsSync, mkdirSync, writeFileSync } from "node:fs";
import { after, before, describe, test } from "node:test";
import { CoreV1Api, type V1PersistentVolumeClaim } from "@kubernetes/client-node";
import { LocalControlPlane } from "../../src/controlplane/local-control-plane.js";
import { InformerFactory } from "../../src/runtime/informer/index.js";
import { waitFor } from "../../src/util/wait.js";
import { waitGone } from "../support/api.js";
import { BINDER_FLAGS, killAllKvc, startKvc, type KvcProcess } from "../support/kvc-process.js";
import { mergePatch } from "../../src/runtime/client.js";

const N = Number(process.env.KVC_INTEGRATION_PV_OBJECTS ?? 100);
const TIMEOUT_MS = 60_000 + N * 1_000;

describe("PV binder lifecycle on the real control plane (ports of upstream's persistent_volumes_test.go)", () => {
  let cp: LocalControlPlane;
  let core: CoreV1Api;

  before(async () => {
    cp = await LocalControlPlane.start();
    core = cp.kubeConfig().makeApiClient(CoreV1Api);
  });
  after(async () => {
    killAllKvc();
    await cp.stop();
  });

  async function stop(kvc: KvcProcess): Promise<void> {
    kvc.child.kill("SIGTERM");
    const [code] = await kvc.exited;
    assert.equal(code, 0, kvc.logs().slice(-3000));
  }

  async function phaseOf(name: string): Promise<string | undefined> {
    return (await core.readPersistentVolume({ name })).status?.phase;
  }

  test("ControllerStartup: N pre-bound pairs stay Bound through start-up and two resyncs", async () => {
    await core.createNamespace({ body: { metadata: { name: "startup" } } });
    for (let i = 0; i < N; i++) {
      const claim = await core.createNamespacedPersistentVolumeClaim({
        namespace: "startup",
        body: {
          metadata: { name: `c-${i}`, annotations: { "pv.kubernetes.io/bind-completed": "yes" } },
          spec: {
            accessModes: ["ReadWriteOnce"],
            storageClassName: "",
            volumeName: `startup-${i}`,
            resources: { requests: { storage: "1Gi" } },
          },
        },
      });
      claim.status = { phase: "Bound", accessModes: ["ReadWriteOnce"], capacity: { storage: "1Gi" } };
      await core.replaceNamespacedPersistentVolumeClaimStatus({
        namespace: "startup",
        name: `c-${i}`,
        body: claim,
      });
      const pv = await core.createPersistentVolume({
        body: {
          metadata: { name: `startup-${i}` },
          spec: {
            capacity: { storage: "1Gi" },
            accessModes: ["ReadWriteOnce"],
            storageClassName: "",
            hostPath: { path: `/tmp/kvc-it/startup-${i}` },
            claimRef: {
              kind: "PersistentVolumeClaim",
              namespace: "startup",
              name: `c-${i}`,
              uid: claim.metadata!.uid!,
            },
          },
        },
      });
      pv.status = { phase: "Bound" };
      await core.replacePersistentVolumeStatus({ name: `startup-${i}`, body: pv });
    }

    // Record every change the binder makes from its start on.
    const flaps: string[] = [];
    const watching = new AbortController();
    const informers = new InformerFactory({ kubeConfig: cp.kubeConfig() });
    informers.persistentVolumes().addEventHandler({
      onUpdate: (_old, pv) => {
        if (pv.status?.phase !== "Bound") flaps.push(`PV ${pv.metadata?.name} ${pv.status?.phase}`);
      },
    });
    informers.persistentVolumeClaims({ namespace: "startup" }).addEventHandler({
      onUpdate: (_old, pvc) => {
        if (pvc.status?.phase !== "Bound") flaps.push(`PVC ${pvc.metadata?.name} ${pvc.status?.phase}`);
      },
    });
    void informers.start(watching.signal);
    await informers.waitForCacheSync();

    const kvc = await startKvc(cp.kubeconfigPath, BINDER_FLAGS);
    try {
      await kvc.ready();
      // Start-up syncs every claim once; each resync (1 s) adds every claim again: wait for two.
      await waitFor(
        async () => {
          const metrics = (await kvc.get("/metrics")).body;
          const adds = Number(/^workqueue_adds_total\{name="claims"\} (\d+)/m.exec(metrics)?.[1] ?? 0);
          return adds >= 3 * N;
        },
        { timeoutMs: TIMEOUT_MS, what: "two resyncs of every claim" },
      );
      assert.deepEqual(flaps, []);
      for (let i = 0; i < N; i += Math.max(1, Math.floor(N / 10)))
        assert.equal(await phaseOf(`startup-${i}`), "Bound");
    } finally {
      watching.abort();
      await stop(kvc);
    }
  });

  test("MultiPVsPVCs: N PVs and N claims, mutated concurrently while binding, bind one to one", async () => {
    await core.createNamespace({ body: { metadata: { name: "multi" } } });
    const kvc = await startKvc(cp.kubeconfigPath, BINDER_FLAGS);
    try {
      await kvc.ready();
      for (let i = 0; i < N; i++) {
        await core.createPersistentVolume({
          body: {
            metadata: { name: `mm-${i}` },
            spec: {
              capacity: { storage: "1Gi" },
              accessModes: ["ReadWriteOnce"],
              storageClassName: "mm",
              hostPath: { path: `/tmp/kvc-it/mm-${i}` },
            },
          },
        });
        await core.createNamespacedPersistentVolumeClaim({
          namespace: "multi",
          body: {
            metadata: { name: `c-${i}` },
            spec: {
              accessModes: ["ReadWriteOnce"],
              storageClassName: "mm",
              resources: { requests: { storage: "1Gi" } },
            },
          },
        });
      }
      // Annotate random objects while the binder works: its writes meet 409s and must recover.
      let mutating = true;
      const mutator = (async () => {
        for (let round = 0; mutating; round++) {
          const i = Math.floor(Math.random() * N);
          const body = { metadata: { annotations: { "kvc-test/round": String(round) } } };
          await (round % 2
            ? core.patchPersistentVolume({ name: `mm-${i}`, body }, mergePatch)
            : core.patchNamespacedPersistentVolumeClaim(
                { namespace: "multi", name: `c-${i}`, body },
                mergePatch,
              ));
        }
      })();
      let claims: V1PersistentVolumeClaim[] = [];
      try {
        claims = await waitFor(
          async () => {
            const items = (await core.listNamespacedPersistentVolumeClaim({ namespace: "multi" })).items;
            return items.every((c) => c.status?.phase === "Bound") ? items : undefined;
          },
          { timeoutMs: TIMEOUT_MS, what: "every claim to be Bound" },
        );
      } finally {
        mutating = false;
        await mutator;
      }
      const volumes = new Set(claims.map((c) => c.spec?.volumeName));
      assert.equal(volumes.size, N, "no PV serves two claims");
      const pvs = (await core.listPersistentVolume()).items.filter((v) => v.spec?.storageClassName === "mm");
      for (const pv of pvs) {
        const claim = claims.find((c) => c.spec?.volumeName === pv.metadata?.name);
        assert.equal(
          pv.spec?.claimRef?.uid,
          claim?.metadata?.uid,
          `PV ${pv.metadata?.name} points back at its claim`,
        );
        assert.equal(pv.status?.phase, "Bound");
      }
    } finally {
      await stop(kvc);
    }
  });

  test("Recycler and Deleter: a released PV is scrubbed by a recycler pod and made Available; a Delete PV is deleted with its directory", async () => {
    await core.createNamespace({ body: { metadata: { name: "reclaim" } } });
    const dir = `/tmp/hostpath_pv/kvc-it-delete-${process.pid}`;
    mkdirSync(dir, { recursive: true });
    writeFileSync(`${dir}/data`, "x");
    for (const [name, policy, path] of [
      ["recycle-pv", "Recycle", "/tmp/kvc-it/recycle"],
      ["delete-pv", "Delete", dir],
    ] as const) {
      await core.createPersistentVolume({
        body: {
          metadata: { name },
          spec: {
            capacity: { storage: "1Gi" },
            accessModes: ["ReadWriteOnce"],
            storageClassName: name,
            persistentVolumeReclaimPolicy: policy,
            hostPath: { path },
          },
        },
      });
      await core.createNamespacedPersistentVolumeClaim({
        namespace: "reclaim",
        body: {
          metadata: { name },
          spec: {
            accessModes: ["ReadWriteOnce"],
            storageClassName: name,
            resources: { requests: { storage: "1Gi" } },
          },
        },
      });
    }
    const kvc = await startKvc(cp.kubeconfigPath, BINDER_FLAGS);
    try {
      await waitFor(
        async () => (await phaseOf("recycle-pv")) === "Bound" && (await phaseOf("delete-pv")) === "Bound",
        {
          timeoutMs: TIMEOUT_MS,
          what: "both PVs to be Bound",
        },
      );
      await core.deleteNamespacedPersistentVolumeClaim({ namespace: "reclaim", name: "recycle-pv" });
      await core.deleteNamespacedPersistentVolumeClaim({ namespace: "reclaim", name: "delete-pv" });

      // No kubelet runs here: play it, and let the recycler pod succeed.
      const pod = await waitFor(
        async () => {
          try {
            return await core.readNamespacedPod({ namespace: "default", name: "recycler-for-recycle-pv" });
          } catch {
            return undefined;
          }
        },
        { timeoutMs: TIMEOUT_MS, what: "the recycler pod to be created" },
      );
      assert.equal(pod.spec?.volumes?.[0]?.hostPath?.path, "/tmp/kvc-it/recycle");
      pod.status = { phase: "Succeeded" };
      await core.replaceNamespacedPodStatus({
        namespace: "default",
        name: "recycler-for-recycle-pv",
        body: pod,
      });
      const recycled = await waitFor(
        async () => {
          const pv = await core.readPersistentVolume({ name: "recycle-pv" });
          return pv.status?.phase === "Available" ? pv : undefined;
        },
        { timeoutMs: TIMEOUT_MS, what: "the recycled PV to be Available" },
      );
      assert.equal(recycled.spec?.claimRef, undefined);
      // Events are written in the background: the PV's write may reach the apiserver first.
      await waitFor(
        async () =>
          (await core.listNamespacedEvent({ namespace: "default" })).items.some(
            (e) => e.reason === "VolumeRecycled" && e.involvedObject.name === "recycle-pv",
          ),
        { timeoutMs: TIMEOUT_MS, what: "the VolumeRecycled event" },
      );

      await waitGone("the Delete PV", () => core.readPersistentVolume({ name: "delete-pv" }), TIMEOUT_MS);
      assert.equal(existsSync(dir), false, "the hostPath deleter removed the directory");
    } finally {
      await stop(kvc);
    }
  });
  test("bad input the apiserver lets through: a missing class gets an event, an empty selector matches all, the worker keeps going", async () => {
    await core.createNamespace({ body: { metadata: { name: "bad" } } });
    await core.createPersistentVolume({
      body: {
        metadata: { name: "bad-any" },
        spec: {
          capacity: { storage: "1Gi" },
          accessModes: ["ReadWriteOnce"],
          storageClassName: "anything",
          hostPath: { path: "/tmp/kvc-it/bad" },
        },
      },
    });
    const kvc = await startKvc(cp.kubeconfigPath, BINDER_FLAGS);
    try {
      const claim = (name: string, spec: Partial<V1PersistentVolumeClaim["spec"]>) =>
        core.createNamespacedPersistentVolumeClaim({
          namespace: "bad",
          body: {
            metadata: { name },
            spec: { accessModes: ["ReadWriteOnce"], resources: { requests: { storage: "1Gi" } }, ...spec },
          },
        });
      await claim("no-class", { storageClassName: "does-not-exist" });
      await claim("empty-selector", { storageClassName: "anything", selector: {} });
      const event = await waitFor(
        async () =>
          (await core.listNamespacedEvent({ namespace: "bad" })).items.find(
            (e) => e.involvedObject.name === "no-class" && e.reason === "ProvisioningFailed",
          ),
        { timeoutMs: TIMEOUT_MS, what: "a ProvisioningFailed event for the claim of a missing class" },
      );
      assert.equal(event.type, "Warning");
      assert.match(event.message ?? "", /does-not-exist/);
      await waitFor(
        async () =>
          (await core.readNamespacedPersistentVolumeClaim({ namespace: "bad", name: "empty-selector" }))
            .status?.phase === "Bound",
        { timeoutMs: TIMEOUT_MS, what: "the empty-selector claim to bind" },
      );
      const stuck = await core.readNamespacedPersistentVolumeClaim({ namespace: "bad", name: "no-class" });
      assert.equal(stuck.status?.phase, "Pending");
    } finally {
      await stop(kvc);
    }
  });
});
