import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { CoreV1Api, StorageV1Api } from "@kubernetes/client-node";
import { LocalControlPlane } from "../../src/controlplane/local-control-plane.js";
import { attacherFinalizer, startExternalAttacher } from "../../src/dev/external-attacher.js";
import { silentLogger } from "../../src/runtime/logger.js";
import { waitFor } from "../../src/util/wait.js";
import { attachmentName } from "../../src/volume/csi/attachment-name.js";
import { waitGone } from "../support/api.js";
import {
  boundCSIClaim,
  createManagedNode,
  createPodWithClaim,
  readAttachment,
  startAttachDetachController,
  type InProcessAttachDetach,
} from "../support/attach-detach.js";
import { mergePatch } from "../../src/runtime/client.js";

/*
 * The stand-in external-attacher (src/dev/external-attacher.ts, used by `kvc dev` and the chaos
 * suite) on a real apiserver, with the attach/detach controller run in-process: it finalizes the PV
 * as the real sidecar does, so a PV deleted while attached stays until its VolumeAttachment is gone.
 */

const DRIVER = "attacher.csi.example.com";
const FINALIZER = "external-attacher/attacher-csi-example-com";
const PV_PROTECTION = "kubernetes.io/pv-protection";
const NS = "default";
const timeoutMs = 30_000;

describe("stand-in external-attacher on a real apiserver", () => {
  let cp: LocalControlPlane;
  let core: CoreV1Api;
  let storage: StorageV1Api;
  const stopAttacher = new AbortController();
  let attacher: { stop(): Promise<void> };
  let controller: InProcessAttachDetach | undefined;

  before(async () => {
    cp = await LocalControlPlane.start();
    core = cp.kubeConfig().makeApiClient(CoreV1Api);
    storage = cp.kubeConfig().makeApiClient(StorageV1Api);
    attacher = startExternalAttacher({
      kubeConfig: cp.kubeConfig(),
      drivers: [DRIVER],
      log: silentLogger,
      signal: stopAttacher.signal,
    });
  });

  after(async () => {
    await controller?.stop();
    stopAttacher.abort();
    await attacher.stop();
    await cp.stop();
  });

  test("its finalizer is external-attacher/ + the driver sanitized as the real sidecar does", () => {
    assert.equal(attacherFinalizer(DRIVER), FINALIZER);
    assert.equal(attacherFinalizer("ebs.csi.aws.com"), "external-attacher/ebs-csi-aws-com");
    assert.equal(attacherFinalizer("my-driver_"), "external-attacher/my-driver-X");
  });

  test("a PV deleted while attached stays until a restarted controller has detached it", async () => {
    await createManagedNode(core, "node-1", { ready: "True" });
    const claim = await boundCSIClaim(core, { namespace: NS, driver: DRIVER, handle: "vol-1" });
    await createPodWithClaim(core, { namespace: NS, name: "pod-1", node: "node-1", claimName: claim });
    controller = await startAttachDetachController(cp.kubeConfig());
    const vaName = attachmentName("vol-1", DRIVER, "node-1");
    const va = await waitFor(
      async () => {
        const v = await readAttachment(storage, vaName);
        return v?.status?.attached ? v : undefined;
      },
      { timeoutMs, what: "the stand-in to attach the pod's VolumeAttachment" },
    );
    assert.deepEqual(va.metadata?.finalizers, [FINALIZER]);
    // Beside the apiserver's pv-protection (StorageObjectInUseProtection admission).
    assert.deepEqual((await core.readPersistentVolume({ name: "pv-vol-1" })).metadata?.finalizers, [
      PV_PROTECTION,
      FINALIZER,
    ]);

    // The leader dies; meanwhile the pod, its claim and the PV (reclaim Delete) go.
    await controller.stop();
    controller = undefined;
    await core.deleteNamespacedPod({ namespace: NS, name: "pod-1", gracePeriodSeconds: 0 });
    await waitGone("pod-1", () => core.readNamespacedPod({ namespace: NS, name: "pod-1" }));
    await core.deleteNamespacedPersistentVolumeClaim({ namespace: NS, name: claim });
    await core.deletePersistentVolume({ name: "pv-vol-1" });
    // Plays the PV protection controller (its claim is gone): only the attacher's finalizer holds it.
    const deleting = await core.readPersistentVolume({ name: "pv-vol-1" });
    assert.ok(deleting.metadata?.deletionTimestamp, "the PV is being deleted");
    await core.patchPersistentVolume(
      {
        name: "pv-vol-1",
        body: {
          metadata: {
            resourceVersion: deleting.metadata.resourceVersion,
            finalizers: deleting.metadata.finalizers?.filter((f) => f !== PV_PROTECTION) ?? [],
          },
        },
      },
      mergePatch,
    );
    assert.deepEqual((await core.readPersistentVolume({ name: "pv-vol-1" })).metadata?.finalizers, [
      FINALIZER,
    ]);

    // The next leader finds the VolumeAttachment's PV (upstream processVolumeAttachments skips one
    // whose PV is gone), so it detaches the volume no pod wants; then the PV goes.
    controller = await startAttachDetachController(cp.kubeConfig());
    await waitGone(`VolumeAttachment ${vaName}`, () => storage.readVolumeAttachment({ name: vaName }));
    await waitGone("PV pv-vol-1", () => core.readPersistentVolume({ name: "pv-vol-1" }));
  });

  test("a VolumeAttachment of a PV marked for deletion is not attached: its attachError says why", async () => {
    // Held by another finalizer, so it stays marked for deletion.
    await core.createPersistentVolume({
      body: {
        metadata: { name: "pv-vol-2", finalizers: ["example.com/hold"] },
        spec: {
          capacity: { storage: "1Gi" },
          accessModes: ["ReadWriteOnce"],
          csi: { driver: DRIVER, volumeHandle: "vol-2" },
        },
      },
    });
    await core.deletePersistentVolume({ name: "pv-vol-2" });
    const name = attachmentName("vol-2", DRIVER, "node-2");
    await storage.createVolumeAttachment({
      body: {
        metadata: { name },
        spec: { attacher: DRIVER, nodeName: "node-2", source: { persistentVolumeName: "pv-vol-2" } },
      },
    });
    const refused = await waitFor(
      async () => {
        const v = await readAttachment(storage, name);
        return v?.status?.attachError ? v : undefined;
      },
      { timeoutMs, what: "an attachError on the VolumeAttachment" },
    );
    assert.equal(refused.status?.attachError?.message, 'PersistentVolume "pv-vol-2" is marked for deletion');
    assert.notEqual(refused.status?.attached, true);
    assert.deepEqual(refused.metadata?.finalizers ?? [], []);
    assert.deepEqual((await core.readPersistentVolume({ name: "pv-vol-2" })).metadata?.finalizers, [
      "example.com/hold",
      PV_PROTECTION,
    ]);
    await storage.deleteVolumeAttachment({ name });
    await waitGone(`VolumeAttachment ${name}`, () => storage.readVolumeAttachment({ name }));
  });
});
