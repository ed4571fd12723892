import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { after, before, describe, test } from "node:test";
import {
  CoreV1Api,
  StorageV1Api,
  VersionApi,
  type KubeConfig,
  type V1PersistentVolume,
  type V1PersistentVolumeClaim,
} from "@kubernetes/client-node";
import { waitGone } from "../support/api.js";
import { binaryVersions } from "../../src/controlplane/binaries.js";
import { LocalControlPlane } from "../../src/controlplane/local-control-plane.js";
import { waitFor } from "../../src/util/wait.js";

const ns = "default";

function pv(name: string, storageClassName = "manual"): V1PersistentVolume {
  return {
    metadata: { name, labels: { app: "kvc-test" } },
    spec: {
      capacity: { storage: "1Gi" },
      accessModes: ["ReadWriteOnce"],
      persistentVolumeReclaimPolicy: "Retain",
      storageClassName,
      hostPath: { path: `/tmp/${name}` },
    },
  };
}

function pvc(name: string, storageClassName = "manual"): V1PersistentVolumeClaim {
  return {
    metadata: { name, namespace: ns },
    spec: { accessModes: ["ReadWriteOnce"], storageClassName, resources: { requests: { storage: "1Gi" } } },
  };
}

describe("local control plane", () => {
  let cp: LocalControlPlane;
  let kc: KubeConfig;
  let core: CoreV1Api;
  let storage: StorageV1Api;

  before(async () => {
    cp = await LocalControlPlane.start();
    kc = cp.kubeConfig();
    core = kc.makeApiClient(CoreV1Api);
    storage = kc.makeApiClient(StorageV1Api);
    const versions = await binaryVersions(cp.binaries);
    console.log(
      `kubernetes ${versions.kubernetes}, etcd ${versions.etcd}; ready in etcd ${Math.round(cp.startup.etcdMs)} ms + ` +
        `kube-apiserver ${Math.round(cp.startup.apiserverMs)} ms`,
    );
  });
  after(() => cp.stop());

  test("serves the pinned version over TLS verified against its own certificate", async () => {
    const info = await kc.makeApiClient(VersionApi).getCode();
    assert.match(info.gitVersion, /^v1\.\d+\.\d+$/);
    assert.notEqual(info.gitVersion, "v0.0.0", "release ldflags were applied");
  });

  test("creates, reads, updates and deletes a PV, PVC, StorageClass, Node, Pod and VolumeAttachment", async () => {
    // StorageClass
    await storage.createStorageClass({
      body: { metadata: { name: "crud" }, provisioner: "example.com/crud" },
    });
    const sc = await storage.readStorageClass({ name: "crud" });
    sc.metadata!.labels = { updated: "yes" };
    await storage.replaceStorageClass({ name: "crud", body: sc });
    assert.equal((await storage.readStorageClass({ name: "crud" })).metadata?.labels?.updated, "yes");
    await storage.deleteStorageClass({ name: "crud" });
    await waitGone("StorageClass crud", () => storage.readStorageClass({ name: "crud" }));

    // PV: the StorageObjectInUseProtection admission plugin adds kubernetes.io/pv-protection, so a
    // delete waits for that finalizer to go (no protection controller runs here).
    await core.createPersistentVolume({ body: pv("crud-pv") });
    const createdPv = await core.readPersistentVolume({ name: "crud-pv" });
    assert.deepEqual(createdPv.metadata?.finalizers, ["kubernetes.io/pv-protection"]);
    createdPv.spec!.persistentVolumeReclaimPolicy = "Delete";
    await core.replacePersistentVolume({ name: "crud-pv", body: createdPv });
    assert.equal(
      (await core.readPersistentVolume({ name: "crud-pv" })).spec?.persistentVolumeReclaimPolicy,
      "Delete",
    );
    await core.deletePersistentVolume({ name: "crud-pv" });
    const terminatingPv = await core.readPersistentVolume({ name: "crud-pv" });
    assert.ok(terminatingPv.metadata?.deletionTimestamp, "PV is terminating, held by its finalizer");
    terminatingPv.metadata.finalizers = [];
    await core.replacePersistentVolume({ name: "crud-pv", body: terminatingPv });
    await waitGone("PV crud-pv", () => core.readPersistentVolume({ name: "crud-pv" }));

    // PVC, with its status subresource
    await core.createNamespacedPersistentVolumeClaim({ namespace: ns, body: pvc("crud-pvc") });
    const claim = await core.readNamespacedPersistentVolumeClaim({ namespace: ns, name: "crud-pvc" });
    assert.deepEqual(claim.metadata?.finalizers, ["kubernetes.io/pvc-protection"]);
    claim.status = { phase: "Lost" };
    await core.replaceNamespacedPersistentVolumeClaimStatus({ namespace: ns, name: "crud-pvc", body: claim });
    const lost = await core.readNamespacedPersistentVolumeClaim({ namespace: ns, name: "crud-pvc" });
    assert.equal(lost.status?.phase, "Lost");
    await core.deleteNamespacedPersistentVolumeClaim({ namespace: ns, name: "crud-pvc" });
    const terminatingPvc = await core.readNamespacedPersistentVolumeClaim({
      namespace: ns,
      name: "crud-pvc",
    });
    assert.ok(terminatingPvc.metadata?.deletionTimestamp, "PVC is terminating, held by its finalizer");
    terminatingPvc.metadata.finalizers = [];
    await core.replaceNamespacedPersistentVolumeClaim({
      namespace: ns,
      name: "crud-pvc",
      body: terminatingPvc,
    });
    await waitGone("PVC crud-pvc", () =>
      core.readNamespacedPersistentVolumeClaim({ namespace: ns, name: "crud-pvc" }),
    );

    // Node
    await core.createNode({ body: { metadata: { name: "crud-node" } } });
    const node = await core.readNode({ name: "crud-node" });
    node.metadata!.annotations = { "volumes.kubernetes.io/controller-managed-attach-detach": "true" };
    await core.replaceNode({ name: "crud-node", body: node });
    const annotated = await core.readNode({ name: "crud-node" });
    assert.equal(
      annotated.metadata?.annotations?.["volumes.kubernetes.io/controller-managed-attach-detach"],
      "true",
    );
    await core.deleteNode({ name: "crud-node" });
    await waitGone("Node crud-node", () => core.readNode({ name: "crud-node" }));

    // Pod (no scheduler or kubelet: spec.nodeName is set directly; grace period 0 deletes at once)
    await core.createNamespacedPod({
      namespace: ns,
      body: {
        metadata: { name: "crud-pod" },
        spec: { nodeName: "crud-node", containers: [{ name: "c", image: "registry.k8s.io/pause:3.10" }] },
      },
    });
    const pod = await core.readNamespacedPod({ namespace: ns, name: "crud-pod" });
    pod.metadata!.labels = { updated: "yes" };
    await core.replaceNamespacedPod({ namespace: ns, name: "crud-pod", body: pod });
    assert.equal(
      (await core.readNamespacedPod({ namespace: ns, name: "crud-pod" })).metadata?.labels?.updated,
      "yes",
    );
    await core.deleteNamespacedPod({ namespace: ns, name: "crud-pod", gracePeriodSeconds: 0 });
    await waitGone("Pod crud-pod", () => core.readNamespacedPod({ namespace: ns, name: "crud-pod" }));

    // VolumeAttachment, with its status subresource (what the CSI external-attacher writes)
    await storage.createVolumeAttachment({
      body: {
        metadata: { name: "crud-va" },
        spec: {
          attacher: "csi.example.com",
          nodeName: "crud-node",
          source: { persistentVolumeName: "crud-pv" },
        },
      },
    });
    const va = await storage.readVolumeAttachment({ name: "crud-va" });
    va.status = { attached: true, attachmentMetadata: { devicePath: "/dev/xvdb" } };
    await storage.replaceVolumeAttachmentStatus({ name: "crud-va", body: va });
    assert.equal((await storage.readVolumeAttachment({ name: "crud-va" })).status?.attached, true);
    await storage.deleteVolumeAttachment({ name: "crud-va" });
    await waitGone("VolumeAttachment crud-va", () => storage.readVolumeAttachment({ name: "crud-va" }));
  });

  test("objects survive an apiserver restart on the same etcd", async () => {
    await storage.createStorageClass({
      body: { metadata: { name: "keep" }, provisioner: "example.com/keep" },
    });
    await core.createPersistentVolume({ body: pv("keep-pv", "keep") });
    await core.createNamespacedPersistentVolumeClaim({ namespace: ns, body: pvc("keep-pvc", "keep") });
    await core.createNode({ body: { metadata: { name: "keep-node" } } });
    await core.createNamespacedPod({
      namespace: ns,
      body: {
        metadata: { name: "keep-pod" },
        spec: { containers: [{ name: "c", image: "registry.k8s.io/pause:3.10" }] },
      },
    });
    await storage.createVolumeAttachment({
      body: {
        metadata: { name: "keep-va" },
        spec: {
          attacher: "csi.example.com",
          nodeName: "keep-node",
          source: { persistentVolumeName: "keep-pv" },
        },
      },
    });
    const pvBefore = await core.readPersistentVolume({ name: "keep-pv" });

    const t0 = performance.now();
    await cp.restartApiServer();
    console.log(`kube-apiserver restarted in ${Math.round(performance.now() - t0)} ms`);

    // The same client keeps working: same port, same certificate, same token.
    const pvAfter = await core.readPersistentVolume({ name: "keep-pv" });
    assert.equal(pvAfter.metadata?.uid, pvBefore.metadata?.uid);
    assert.equal(pvAfter.metadata?.resourceVersion, pvBefore.metadata?.resourceVersion);
    assert.equal((await storage.readStorageClass({ name: "keep" })).provisioner, "example.com/keep");
    assert.equal(
      (await core.readNamespacedPersistentVolumeClaim({ namespace: ns, name: "keep-pvc" })).spec
        ?.storageClassName,
      "keep",
    );
    assert.equal((await core.readNode({ name: "keep-node" })).metadata?.name, "keep-node");
    assert.equal(
      (await core.readNamespacedPod({ namespace: ns, name: "keep-pod" })).metadata?.name,
      "keep-pod",
    );
    assert.equal((await storage.readVolumeAttachment({ name: "keep-va" })).spec.nodeName, "keep-node");
  });

  test("objects survive an etcd restart under the running apiserver, which serves again", async () => {
    await core.createPersistentVolume({ body: pv("etcd-keep-pv", "keep") });
    const before = await core.readPersistentVolume({ name: "etcd-keep-pv" });
    const oldPid = cp.etcd.pid;
    await cp.restartEtcd();
    assert.notEqual(cp.etcd.pid, oldPid);
    // The apiserver reconnects by itself; its readiness may lag etcd's by a moment.
    const after = await waitFor(() => core.readPersistentVolume({ name: "etcd-keep-pv" }), {
      timeoutMs: 60_000,
      what: "the apiserver to read from the restarted etcd",
    });
    assert.equal(after.metadata?.resourceVersion, before.metadata?.resourceVersion);
    await core.createPersistentVolume({ body: pv("etcd-new-pv", "keep") });
    assert.ok(
      Number(after.metadata?.resourceVersion) <
        Number((await core.readPersistentVolume({ name: "etcd-new-pv" })).metadata?.resourceVersion),
    );
  });

  test("upstream kube-controller-manager with only its PV binder binds a pre-created PV/PVC pair", async () => {
    await core.createPersistentVolume({ body: pv("kcm-pv", "kcm") });
    await core.createNamespacedPersistentVolumeClaim({ namespace: ns, body: pvc("kcm-pvc", "kcm") });
    const kcm = await cp.startKubeControllerManager({
      controllers: ["persistentvolume-binder-controller"],
      args: ["--pvclaimbinder-sync-period=15s"],
    });
    try {
      const claim = await waitFor(
        async () => {
          const c = await core.readNamespacedPersistentVolumeClaim({ namespace: ns, name: "kcm-pvc" });
          return c.status?.phase === "Bound" ? c : undefined;
        },
        { timeoutMs: 60_000, what: "PVC kcm-pvc to be Bound by kube-controller-manager" },
      );
      assert.equal(claim.spec?.volumeName, "kcm-pv");
      assert.equal(claim.metadata?.annotations?.["pv.kubernetes.io/bind-completed"], "yes");
      const volume = await waitFor(
        async () => {
          const v = await core.readPersistentVolume({ name: "kcm-pv" });
          return v.status?.phase === "Bound" ? v : undefined;
        },
        { timeoutMs: 30_000, what: "PV kcm-pv to be Bound" },
      );
      assert.equal(volume.spec?.claimRef?.name, "kcm-pvc");
      assert.equal(volume.spec.claimRef.uid, claim.metadata.uid);
    } finally {
      await kcm.stop();
    }
  });

  test("a process that exits before it is ready fails its start at once, with its log", async () => {
    await assert.rejects(
      cp.startKubeControllerManager({ controllers: ["*"], args: ["--no-such-flag"] }),
      (err: Error) => {
        assert.match(err.message, /^kube-controller-manager exited with code \d+ before it was ready/);
        assert.match(err.message, /unknown flag: --no-such-flag/);
        return true;
      },
    );
  });

  test("stop() removes every process and the temporary directory", async () => {
    const extra = await LocalControlPlane.start({ binaries: cp.binaries });
    const kcm = await extra.startKubeControllerManager({
      controllers: ["persistentvolume-protection-controller"],
    });
    const pids = [extra.etcd.pid, kcm.pid];
    assert.ok(existsSync(extra.dir));
    await extra.stop();
    assert.equal(existsSync(extra.dir), false);
    for (const pid of pids) {
      assert.throws(() => process.kill(pid!, 0), { code: "ESRCH" }, `pid ${pid} is gone`);
    }
    assert.equal(kcm.running, false);
  });
});
