import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { CoreV1Api, StorageV1Api, type V1PersistentVolumeSpec } from "@kubernetes/client-node";
import { LocalControlPlane } from "../../src/controlplane/local-control-plane.js";
import { waitFor } from "../../src/util/wait.js";
import { attachmentName } from "../../src/volume/csi/attachment-name.js";
import {
  attachWhenAsked,
  createManagedNode,
  readAttachment,
  setNodeReady,
  setVolumesInUse,
  startAttachDetachController,
  type InProcessAttachDetach,
} from "../support/attach-detach.js";
import { mergePatch } from "../../src/runtime/client.js";

/*
 * Handover from kube-controller-manager to kvc with an in-tree volume migrated to CSI (issue 11):
 * upstream KCM attaches an in-tree EBS PV for a running pod (the test plays the kubelet and the
 * external-attacher), KCM stops, kvc's attach/detach controller starts on the same apiserver, and
 * the node goes NotReady. kvc runs with a 2 s unmount wait (upstream 6 min, TimerConfig as upstream's
 * integration tests set it); a CSI volume whose pod is gone, mounted on the same node, is the control:
 * once it has been force-detached the wait has run out, and the EBS volume must still be attached.
 */

const NS = "default";
const NODE = "n1";
const EBS_DRIVER = "ebs.csi.aws.com";
const CSI_DRIVER = "other.csi.example.com";
const EBS_UNIQUE = `kubernetes.io/csi/${EBS_DRIVER}^vol-0a1b2c3d`;
const CSI_UNIQUE = `kubernetes.io/csi/${CSI_DRIVER}^h1`;
const timeoutMs = 60_000;

describe("handover from KCM to kvc with an in-tree EBS volume attached", () => {
  let cp: LocalControlPlane;
  let core: CoreV1Api;
  let storage: StorageV1Api;
  let kvc: InProcessAttachDetach | undefined;

  before(async () => {
    cp = await LocalControlPlane.start();
    core = cp.kubeConfig().makeApiClient(CoreV1Api);
    storage = cp.kubeConfig().makeApiClient(StorageV1Api);
  });

  after(async () => {
    await kvc?.stop();
    await cp.stop();
  });

  /** A PV of `source` and a claim, Bound as the binder leaves them, and a pod using it on NODE. */
  async function podWithVolume(name: string, source: V1PersistentVolumeSpec): Promise<void> {
    const pvc = await core.createNamespacedPersistentVolumeClaim({
      namespace: NS,
      body: {
        metadata: { name },
        spec: {
          accessModes: ["ReadWriteOnce"],
          resources: { requests: { storage: "1Gi" } },
          volumeName: name,
          storageClassName: "",
        },
      },
    });
    await core.createPersistentVolume({
      body: {
        metadata: { name },
        spec: {
          capacity: { storage: "1Gi" },
          accessModes: ["ReadWriteOnce"],
          storageClassName: "",
          claimRef: { namespace: NS, name, uid: pvc.metadata!.uid! },
          ...source,
        },
      },
    });
    await core.patchNamespacedPersistentVolumeClaimStatus(
      { namespace: NS, name, body: { status: { phase: "Bound" } } },
      mergePatch,
    );
    await core.createNamespacedPod({
      namespace: NS,
      body: {
        metadata: { name },
        spec: {
          nodeName: NODE,
          containers: [{ name: "c", image: "registry.k8s.io/pause:3.10" }],
          volumes: [{ name: "data", persistentVolumeClaim: { claimName: name } }],
        },
      },
    });
  }

  const volumesAttached = async () =>
    ((await core.readNode({ name: NODE })).status?.volumesAttached ?? []).map((v) => v.name).sort();

  /** kvc's attach/detach controller in-process, with a 2 s unmount wait. */
  async function startKvc(): Promise<void> {
    kvc = await startAttachDetachController(cp.kubeConfig(), { timers: { maxWaitForUnmountMs: 2_000 } });
  }

  test("the EBS volume stays attached past the unmount wait on a NotReady node", async () => {
    await createManagedNode(core, NODE, { ready: "True" });
    await podWithVolume("ebs", {
      awsElasticBlockStore: { volumeID: "aws://us-east-1a/vol-0a1b2c3d", fsType: "ext4" },
    });
    await podWithVolume("csi", { csi: { driver: CSI_DRIVER, volumeHandle: "h1" } });

    // KCM attaches both; the test plays the external-attacher and the kubelet mounting them.
    const kcm = await cp.startKubeControllerManager({
      controllers: ["persistentvolume-attach-detach-controller"],
    });
    const ebsVA = attachmentName("vol-0a1b2c3d", EBS_DRIVER, NODE);
    const csiVA = attachmentName("h1", CSI_DRIVER, NODE);
    for (const name of [ebsVA, csiVA]) {
      await attachWhenAsked(storage, name, { timeoutMs, what: `KCM to create ${name}` });
    }
    await waitFor(async () => (await volumesAttached()).length === 2, {
      timeoutMs,
      what: "KCM to report both",
    });
    await setVolumesInUse(core, NODE, [CSI_UNIQUE, EBS_UNIQUE]);
    assert.equal(
      (await storage.readVolumeAttachment({ name: ebsVA })).spec.source.persistentVolumeName,
      "ebs",
    );
    await kcm.stop();

    // Switched: the csi pod is gone, kvc starts, the node's kubelet restarts (NotReady).
    await core.deleteNamespacedPod({ namespace: NS, name: "csi", gracePeriodSeconds: 0 });
    await waitFor(async () => (await core.listNamespacedPod({ namespace: NS })).items.length === 1, {
      timeoutMs,
      what: "the csi pod to be gone",
    });
    await startKvc();
    await setNodeReady(core, NODE, "Unknown");

    // The control: the unwanted, still mounted volume is force-detached once the wait has run out.
    await waitFor(async () => (await readAttachment(storage, csiVA)) === undefined, {
      timeoutMs,
      what: "kvc to force-detach the unwanted CSI volume",
    });
    await waitFor(async () => !(await volumesAttached()).includes(CSI_UNIQUE), {
      timeoutMs,
      what: "kvc to drop it from volumesAttached",
    });
    const ebs = await readAttachment(storage, ebsVA);
    assert.ok(ebs && !ebs.metadata?.deletionTimestamp, "the EBS VolumeAttachment is kept");
    assert.deepEqual(await volumesAttached(), [EBS_UNIQUE], "and the node still lists it");
  });
});
