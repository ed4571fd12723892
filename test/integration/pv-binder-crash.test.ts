import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { CoreV1Api, type V1PersistentVolumeClaim } from "@kubernetes/client-node";
import { LocalControlPlane } from "../../src/controlplane/local-control-plane.js";
import { waitFor } from "../../src/util/wait.js";
import { BINDER_FLAGS, killAllKvc, startKvc } from "../support/kvc-process.js";

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

const WRITES = ["PV update", "PV status update", "PVC update", "PVC status update"];

for (const [i, write] of WRITES.entries()) {
  const n = i + 1;
  test(`killed right after bind write ${n} (${write}): the restarted binder completes the bind, one PV per claim`, async () => {
    const cls = `crash-${n}`;
    await core.createPersistentVolume({
      body: {
        metadata: { name: `crash-pv-${n}` },
        spec: {
          capacity: { storage: "1Gi" },
          accessModes: ["ReadWriteOnce"],
          storageClassName: cls,
          hostPath: { path: `/tmp/kvc-it/crash-${n}` },
        },
      },
    });
    // Two claims compete for the one PV: exactly one may end up with it.
    for (const name of ["a", "b"]) {
      await core.createNamespacedPersistentVolumeClaim({
        namespace: "default",
        body: {
          metadata: { name: `crash-${n}-${name}` },
          spec: {
            accessModes: ["ReadWriteOnce"],
            storageClassName: cls,
            resources: { requests: { storage: "1Gi" } },
          },
        },
      });
    }

    const first = await startKvc(cp.kubeconfigPath, BINDER_FLAGS, {}, { seams: { pauseAfterBindWrite: n } });
    await waitFor(() => first.logs().includes("test seam: paused after bind write"), {
      timeoutMs: 60_000,
      what: `the binder to pause after write ${n}`,
    });
    first.child.kill("SIGKILL");
    await first.exited;

    const pvAtCrash = await core.readPersistentVolume({ name: `crash-pv-${n}` });
    assert.ok(pvAtCrash.spec?.claimRef?.name, "write 1 (claimRef) happened before the crash");
    if (n >= 2) assert.equal(pvAtCrash.status?.phase, "Bound");

    const second = await startKvc(cp.kubeconfigPath, BINDER_FLAGS);
    try {
      const winner = pvAtCrash.spec.claimRef.name;
      const claim = await waitFor(
        async () => {
          const c = await core.readNamespacedPersistentVolumeClaim({ namespace: "default", name: winner });
          return c.status?.phase === "Bound" ? c : undefined;
        },
        { timeoutMs: 60_000, what: `claim ${winner} to be Bound after the restart` },
      );
      assert.equal(claim.spec?.volumeName, `crash-pv-${n}`);
      const pv = await core.readPersistentVolume({ name: `crash-pv-${n}` });
      assert.equal(pv.status?.phase, "Bound");
      assert.equal(pv.spec?.claimRef?.uid, claim.metadata?.uid);

      // The loser stays Pending (after a few more sync periods), never bound to the same PV.
      const loserName = winner === `crash-${n}-a` ? `crash-${n}-b` : `crash-${n}-a`;
      const claims = (await core.listNamespacedPersistentVolumeClaim({ namespace: "default" })).items;
      const onThisPv = claims.filter((c: V1PersistentVolumeClaim) => c.spec?.volumeName === `crash-pv-${n}`);
      assert.deepEqual(
        onThisPv.map((c) => c.metadata?.name),
        [winner],
      );
      const loser = await core.readNamespacedPersistentVolumeClaim({ namespace: "default", name: loserName });
      assert.notEqual(loser.status?.phase, "Bound");
    } finally {
      second.child.kill("SIGTERM");
      await second.exited;
    }
  });
}

test("the production binary has no test seam: KVC_TEST_PAUSE_AFTER_BIND_WRITE in its environment changes nothing", async () => {
  await core.createPersistentVolume({
    body: {
      metadata: { name: "seamless-pv" },
      spec: {
        capacity: { storage: "1Gi" },
        accessModes: ["ReadWriteOnce"],
        storageClassName: "seamless",
        hostPath: { path: "/tmp/kvc-it/seamless" },
      },
    },
  });
  await core.createNamespacedPersistentVolumeClaim({
    namespace: "default",
    body: {
      metadata: { name: "seamless" },
      spec: {
        accessModes: ["ReadWriteOnce"],
        storageClassName: "seamless",
        resources: { requests: { storage: "1Gi" } },
      },
    },
  });
  // What the crash test once set: a pod spec could set it too, and hang the binder after a write.
  const kvc = await startKvc(cp.kubeconfigPath, BINDER_FLAGS, { KVC_TEST_PAUSE_AFTER_BIND_WRITE: "1" });
  try {
    await waitFor(
      async () =>
        (await core.readNamespacedPersistentVolumeClaim({ namespace: "default", name: "seamless" })).status
          ?.phase === "Bound",
      { timeoutMs: 60_000, what: "the claim to be Bound (all four bind writes)" },
    );
    assert.doesNotMatch(kvc.logs(), /test seam/);
  } finally {
    kvc.child.kill("SIGKILL"); // a paused binder would never finish a graceful stop
    await kvc.exited;
  }
});
