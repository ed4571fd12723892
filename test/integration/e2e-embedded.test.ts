import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { CoreV1Api, StorageV1Api } from "@kubernetes/client-node";
import { LocalControlPlane } from "../../src/controlplane/local-control-plane.js";
import { startExternalAttacher } from "../../src/dev/external-attacher.js";
import { silentLogger } from "../../src/runtime/logger.js";
import { runScenarios } from "../e2e/scenarios.js";
import { killAllKvc, startKvc } from "../support/kvc-process.js";
import { strategicMergePatch } from "../../src/runtime/client.js";

/*
 * The kind e2e scenarios (test/e2e/scenarios.ts) on the embedded control plane: kvc as a separate
 * process with all its controllers, and stand-ins for what kind has and we lack: a Node (no kubelet),
 * the scheduler's placement (scheduleOnto), a hostPath class for WaitForFirstConsumer provisioning,
 * and, for the CSI driver, static PVs plus the stand-in external-attacher.
 */

const NODE = "e2e-node";
const DRIVER = "e2e.csi.kvc.dev";
let cp: LocalControlPlane;
const stopAttacher = new AbortController();
let attacher: { stop(): Promise<void> };

before(async () => {
  cp = await LocalControlPlane.start();
  const core = cp.kubeConfig().makeApiClient(CoreV1Api);
  const storage = cp.kubeConfig().makeApiClient(StorageV1Api);
  await core.createNode({
    body: {
      metadata: {
        name: NODE,
        annotations: { "volumes.kubernetes.io/controller-managed-attach-detach": "true" },
      },
    },
  });
  await core.patchNodeStatus(
    {
      name: NODE,
      body: { status: { conditions: [{ type: "Ready", status: "True", reason: "E2E", message: "" }] } },
    },
    strategicMergePatch,
  );
  await storage.createStorageClass({
    body: {
      metadata: { name: "e2e-hostpath-wffc" },
      provisioner: "kubernetes.io/host-path",
      reclaimPolicy: "Delete",
      volumeBindingMode: "WaitForFirstConsumer",
    },
  });
  await storage.createCSIDriver({ body: { metadata: { name: DRIVER }, spec: { attachRequired: true } } });
  await storage.createStorageClass({
    body: { metadata: { name: "e2e-csi" }, provisioner: "kubernetes.io/no-provisioner" },
  });
  await core.createPersistentVolume({
    body: {
      metadata: { name: "e2e-csi-1" },
      spec: {
        capacity: { storage: "1Gi" },
        accessModes: ["ReadWriteOnce"],
        storageClassName: "e2e-csi",
        csi: { driver: DRIVER, volumeHandle: "e2e-disk-1" },
      },
    },
  });
  attacher = startExternalAttacher({
    kubeConfig: cp.kubeConfig(),
    drivers: [DRIVER],
    log: silentLogger,
    signal: stopAttacher.signal,
  });
});

after(async () => {
  killAllKvc();
  stopAttacher.abort();
  await attacher.stop();
  await cp.stop();
});

test("the kind e2e scenarios pass on the embedded control plane", async () => {
  const kvc = await startKvc(cp.kubeconfigPath, [
    "--leader-elect=false",
    "--pvclaimbinder-sync-period=1s",
    "--enable-hostpath-provisioner",
    `--flex-volume-plugin-dir=${cp.dir}/flexvolume`,
  ]);
  await kvc.ready();
  const results = await runScenarios({
    kubeConfig: cp.kubeConfig(),
    namespace: "kvc-e2e",
    wffcClass: "e2e-hostpath-wffc",
    csiClass: "e2e-csi",
    scheduleOnto: NODE,
    timeoutMs: 60_000,
  });
  assert.equal(results.length, 3);
  assert.deepEqual(
    results.filter((r) => !r.passed).map((r) => `${r.name}: ${r.error}`),
    [],
    kvc.logs().slice(-3000),
  );
  kvc.child.kill("SIGTERM");
  assert.equal((await kvc.exited)[0], 0);
});
