import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import {
  StorageV1Api,
  type V1VolumeAttachment,
  type V1VolumeAttachmentStatus,
} from "@kubernetes/client-node";
import { waitGone } from "../support/api.js";
import { LocalControlPlane } from "../../src/controlplane/local-control-plane.js";
import { isNotFound } from "../../src/runtime/api-errors.js";
import { InformerFactory } from "../../src/runtime/informer/index.js";
import { waitFor } from "../../src/util/wait.js";
import { attachmentName } from "../../src/volume/csi/attachment-name.js";
import type { VolumeAttachmentLister } from "../../src/volume/csi/attacher.js";
import { CSIPlugin } from "../../src/volume/csi/plugin.js";
import { specFromPersistentVolume, type VolumeSpec } from "../../src/volume/plugin.js";

/*
 * The CSI attacher against a real apiserver. No external-attacher runs: the test plays it, reporting
 * through the VolumeAttachment status subresource and holding deletes with its finalizer.
 */

const DRIVER = "ebs.csi.aws.com";
const FINALIZER = "external-attacher/ebs-csi-aws-com";
const NODE = "node-1";
const timeoutMs = 30_000;

function csiSpec(handle: string, driver = DRIVER): VolumeSpec {
  return specFromPersistentVolume({
    metadata: { name: `pv-${handle}` },
    spec: {
      capacity: { storage: "1Gi" },
      accessModes: ["ReadWriteOnce"],
      csi: { driver, volumeHandle: handle },
    },
  });
}

describe("CSI attacher on a real apiserver", () => {
  let cp: LocalControlPlane;
  let storage: StorageV1Api;
  let plugin: CSIPlugin;
  let vaLister: VolumeAttachmentLister;
  const stop = new AbortController();
  let informing: Promise<void>;

  before(async () => {
    cp = await LocalControlPlane.start();
    const kubeConfig = cp.kubeConfig();
    storage = kubeConfig.makeApiClient(StorageV1Api);
    const informers = new InformerFactory({ kubeConfig });
    const csiDrivers = informers.csiDrivers();
    vaLister = informers.volumeAttachments().store;
    informing = informers.start(stop.signal);
    await informers.waitForCacheSync(stop.signal);
    plugin = new CSIPlugin({
      volumeAttachments: storage,
      volumeAttachmentLister: vaLister,
      csiDrivers: csiDrivers.store,
      timeoutMs,
    });
  });

  after(async () => {
    stop.abort();
    await informing;
    await cp.stop();
  });

  /** The VolumeAttachment once attach() has created it. */
  function created(handle: string): Promise<V1VolumeAttachment> {
    const name = attachmentName(handle, DRIVER, NODE);
    return waitFor(
      async () => {
        try {
          return await storage.readVolumeAttachment({ name });
        } catch (err) {
          if (isNotFound(err)) return undefined;
          throw err;
        }
      },
      { timeoutMs, what: `VolumeAttachment ${name} to be created` },
    );
  }

  /** What the external-attacher does: finalizer first, then the outcome in status. */
  async function report(handle: string, status: V1VolumeAttachmentStatus): Promise<void> {
    const name = attachmentName(handle, DRIVER, NODE);
    const va = await storage.readVolumeAttachment({ name });
    va.metadata!.finalizers = [FINALIZER];
    const updated = await storage.replaceVolumeAttachment({ name, body: va });
    updated.status = status;
    await storage.replaceVolumeAttachmentStatus({ name, body: updated });
  }

  test("attach creates the VolumeAttachment and resolves once the external-attacher reports it attached", async () => {
    const attaching = plugin.newAttacher().attach(csiSpec("vol-1"), NODE);
    const va = await created("vol-1");
    assert.equal(va.metadata?.name, "csi-58932ddfc9a6504f794af09a26429db947138ba3d683dee3d975aa932cb39f48");
    const { attacher, nodeName, source } = va.spec;
    assert.deepEqual(
      {
        attacher,
        nodeName,
        persistentVolumeName: source.persistentVolumeName,
        inline: source.inlineVolumeSpec,
      },
      { attacher: DRIVER, nodeName: NODE, persistentVolumeName: "pv-vol-1", inline: undefined },
    );
    await report("vol-1", { attached: true, attachmentMetadata: { devicePath: "/dev/xvdba" } });
    assert.equal(await attaching, "");

    // Again, as after a controller restart: the existing attachment is reused untouched.
    const name = va.metadata.name;
    const before = await storage.readVolumeAttachment({ name });
    assert.equal(await plugin.newAttacher().attach(csiSpec("vol-1"), NODE), "");
    const again = await storage.readVolumeAttachment({ name });
    assert.equal(again.metadata?.resourceVersion, before.metadata?.resourceVersion);
    assert.deepEqual(again.status?.attachmentMetadata, { devicePath: "/dev/xvdba" });

    const attached = await plugin
      .newAttacher()
      .volumesAreAttached([csiSpec("vol-1"), csiSpec("vol-9")], NODE);
    assert.deepEqual([...attached.values()], [true, false]);
  });

  test("attach rejects with the external-attacher's attachError verbatim", async () => {
    const message = "rpc error: code = Internal desc = could not attach volume vol-2: quota exceeded";
    const attaching = assert.rejects(plugin.newAttacher().attach(csiSpec("vol-2"), NODE), { message });
    await created("vol-2");
    await report("vol-2", { attached: false, attachError: { message, time: new Date() } });
    await attaching;
  });

  test("detach deletes the VolumeAttachment and resolves once the finalizer lets it go", async () => {
    const name = attachmentName("vol-1", DRIVER, NODE);
    const detaching = plugin.newDetacher().detach(`${DRIVER}^vol-1`, NODE);
    const terminating = await waitFor(
      async () => {
        const va = await storage.readVolumeAttachment({ name });
        return va.metadata?.deletionTimestamp ? va : undefined;
      },
      { timeoutMs, what: `VolumeAttachment ${name} to be terminating` },
    );
    terminating.metadata!.finalizers = [];
    await storage.replaceVolumeAttachment({ name, body: terminating });
    await detaching;
    await waitGone(`VolumeAttachment ${name}`, () => storage.readVolumeAttachment({ name }));
    // Nothing left to detach: done at once.
    await plugin.newDetacher().detach(`${DRIVER}^vol-1`, NODE);
  });

  test("detach rejects with the external-attacher's detachError verbatim", async () => {
    const message = "rpc error: code = Internal desc = volume vol-2 is busy";
    const name = attachmentName("vol-2", DRIVER, NODE);
    const detaching = assert.rejects(plugin.newDetacher().detach(`${DRIVER}^vol-2`, NODE), { message });
    const va = await waitFor(
      async () => {
        const current = await storage.readVolumeAttachment({ name });
        return current.metadata?.deletionTimestamp ? current : undefined;
      },
      { timeoutMs, what: `VolumeAttachment ${name} to be terminating` },
    );
    va.status = { attached: true, detachError: { message, time: new Date() } };
    const failed = await storage.replaceVolumeAttachmentStatus({ name, body: va });
    await detaching;
    failed.metadata!.finalizers = [];
    await storage.replaceVolumeAttachment({ name, body: failed });
    await waitGone(`VolumeAttachment ${name}`, () => storage.readVolumeAttachment({ name }));
  });

  test("attach and detach time out with upstream's message when no external-attacher answers", async () => {
    const impatient = new CSIPlugin({
      volumeAttachments: storage,
      volumeAttachmentLister: vaLister,
      csiDrivers: { get: () => undefined },
      timeoutMs: 1_000,
    });
    await assert.rejects(impatient.newAttacher().attach(csiSpec("vol-3"), NODE), {
      message: "timed out waiting for external-attacher of ebs.csi.aws.com CSI driver to attach volume vol-3",
    });
    await report("vol-3", { attached: true });
    await assert.rejects(impatient.newDetacher().detach(`${DRIVER}^vol-3`, NODE), {
      message: "timed out waiting for external-attacher of ebs.csi.aws.com CSI driver to detach volume vol-3",
    });
    const name = attachmentName("vol-3", DRIVER, NODE);
    const held = await storage.readVolumeAttachment({ name });
    held.metadata!.finalizers = [];
    await storage.replaceVolumeAttachment({ name, body: held });
  });

  test("a CSIDriver with attachRequired=false makes its volumes non-attachable", async () => {
    const driver = "nfs.csi.k8s.io";
    assert.equal(plugin.canAttach(csiSpec("share", driver)), true, "no CSIDriver object: attach");
    await storage.createCSIDriver({ body: { metadata: { name: driver }, spec: { attachRequired: false } } });
    await waitFor(() => !plugin.canAttach(csiSpec("share", driver)), {
      timeoutMs,
      what: "the CSIDriver to reach the informer",
    });
    const attached = await plugin.newAttacher().volumesAreAttached([csiSpec("share", driver)], NODE);
    assert.deepEqual([...attached.values()], [true]);
  });
});
