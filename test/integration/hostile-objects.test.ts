/**
 * Hostile objects on the real apiserver: a claim with the largest exponent the apiserver accepts and
 * a poisoned PV (megabyte-scale annotation, thousands of labels, an absurd capacity) do not stop
 * other claims from binding; poisoned pods, PVs, nodes, CSIDrivers and VolumeAttachments do not stop
 * volumes from attaching. The test plays the kubelet (managed nodes) and the CSI external-attacher.
 */
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import {
  CoreV1Api,
  StorageV1Api,
  type V1PersistentVolume,
  type V1PersistentVolumeClaim,
  type V1Volume,
} from "@kubernetes/client-node";
import { LocalControlPlane } from "../../src/controlplane/local-control-plane.js";
import { abortableRequest } from "../../src/runtime/client.js";
import { waitFor } from "../../src/util/wait.js";
import { attachmentName } from "../../src/volume/csi/attachment-name.js";
import { attachWhenAsked, createManagedNode } from "../support/attach-detach.js";
import { BINDER_FLAGS, killAllKvc, startKvc, type KvcProcess } from "../support/kvc-process.js";
import { mergePatch } from "../../src/runtime/client.js";

const NS = "hostile";
let cp: LocalControlPlane;
let core: CoreV1Api;
let storage: StorageV1Api;
let kvc: KvcProcess;

before(async () => {
  cp = await LocalControlPlane.start();
  core = cp.kubeConfig().makeApiClient(CoreV1Api);
  storage = cp.kubeConfig().makeApiClient(StorageV1Api);
  kvc = await startKvc(cp.kubeconfigPath, BINDER_FLAGS);
  await kvc.ready();
  await core.createNamespace({ body: { metadata: { name: NS } } });
});
after(async () => {
  killAllKvc();
  await cp.stop();
});

const volume = (name: string, size: string, extra: Partial<V1PersistentVolume> = {}): V1PersistentVolume => ({
  ...extra,
  metadata: { name, ...extra.metadata },
  spec: {
    capacity: { storage: size },
    accessModes: ["ReadWriteOnce"],
    persistentVolumeReclaimPolicy: "Retain",
    storageClassName: "",
    hostPath: { path: `/tmp/kvc-it/${name}` },
  },
});
const claim = (name: string, size: string): V1PersistentVolumeClaim => ({
  metadata: { name, namespace: NS },
  spec: { accessModes: ["ReadWriteOnce"], resources: { requests: { storage: size } }, storageClassName: "" },
});

async function bound(name: string): Promise<V1PersistentVolumeClaim> {
  return waitFor(
    async () => {
      const c = await core.readNamespacedPersistentVolumeClaim({ namespace: NS, name });
      return c.status?.phase === "Bound" ? c : undefined;
    },
    { timeoutMs: 60_000, what: `claim ${name} to be Bound (kvc logs: ${kvc.logs().slice(-2000)})` },
  );
}

test("a claim requesting the largest exponent the apiserver accepts is handled; other claims keep binding", async (t) => {
  // Upstream's own parser expands the exponent, so the apiserver may take long or refuse; try big first.
  let accepted: string | undefined;
  for (const size of ["1e30000000", "1e300000", "1e3000"]) {
    try {
      await core.createNamespacedPersistentVolumeClaim(
        { namespace: NS, body: claim("huge", size) },
        abortableRequest(AbortSignal.timeout(30_000)),
      );
      accepted = size;
      break;
    } catch (error) {
      t.diagnostic(`apiserver refused or timed out on ${size}: ${String(error).slice(0, 200)}`);
    }
  }
  assert.ok(accepted, "the apiserver accepted none of the huge requests");
  t.diagnostic(`apiserver accepted a request of ${accepted}`);
  await core.createPersistentVolume({ body: volume("pv-small", "1Gi") });
  await core.createNamespacedPersistentVolumeClaim({ namespace: NS, body: claim("small", "1Gi") });
  assert.equal((await bound("small")).spec?.volumeName, "pv-small");
  const huge = await core.readNamespacedPersistentVolumeClaim({ namespace: NS, name: "huge" });
  assert.equal(huge.status?.phase, "Pending", "no volume is that large");
  assert.ok(kvc.logs().length < 10_000_000, "logs do not echo the expanded number");
});

test("a poisoned PV (huge annotation, thousands of labels, absurd capacity) does not stop binding", async () => {
  const labels = Object.fromEntries(Array.from({ length: 5000 }, (_, i) => [`k${i}`, `v${i}`]));
  await core.createPersistentVolume({
    body: volume("pv-poison", "1e3000", {
      metadata: { name: "pv-poison", labels, annotations: { big: "x".repeat(200_000) } },
    }),
  });
  await core.createPersistentVolume({ body: volume("pv-normal", "2Gi") });
  // Both in kvc's cache before any claim: else "normal" could meet the poisoned PV alone.
  for (const name of ["pv-poison", "pv-normal"])
    await waitFor(async () => (await core.readPersistentVolume({ name })).status?.phase === "Available", {
      timeoutMs: 60_000,
      what: `volume ${name} to be Available`,
    });
  await core.createNamespacedPersistentVolumeClaim({ namespace: NS, body: claim("normal", "2Gi") });
  // The poisoned PV is the only one large enough for this claim: it binds too, however big it is.
  await core.createNamespacedPersistentVolumeClaim({ namespace: NS, body: claim("bigger", "1e2999") });
  assert.equal((await bound("normal")).spec?.volumeName, "pv-normal");
  assert.equal((await bound("bigger")).spec?.volumeName, "pv-poison");
});

const DRIVER = "ebs.csi.aws.com";

/** A CSI PV of `DRIVER` pre-bound to a new claim, as the binder leaves them. */
async function boundCSIClaim(handle: string, csi: Partial<V1PersistentVolume["spec"]> = {}): Promise<string> {
  const claimName = `claim-${handle}`;
  const pvc = await core.createNamespacedPersistentVolumeClaim({
    namespace: NS,
    body: {
      metadata: { name: claimName },
      spec: { ...claim(claimName, "1Gi").spec, volumeName: `pv-${handle}` },
    },
  });
  await core.createPersistentVolume({
    body: {
      metadata: { name: `pv-${handle}` },
      spec: {
        capacity: { storage: "1Gi" },
        accessModes: ["ReadWriteOnce"],
        storageClassName: "",
        claimRef: { namespace: NS, name: claimName, uid: pvc.metadata!.uid! },
        csi: { driver: DRIVER, volumeHandle: handle },
        ...csi,
      },
    },
  });
  return claimName;
}

const pod = (name: string, nodeName: string, volumes: V1Volume[]) => ({
  metadata: { name, namespace: NS },
  spec: { nodeName, containers: [{ name: "c", image: "registry.k8s.io/pause:3.10" }], volumes },
});

/** Plays the external-attacher once the controller has created the VolumeAttachment of `handle`. */
async function attachVolume(handle: string, node: string): Promise<void> {
  const name = attachmentName(handle, DRIVER, node);
  await attachWhenAsked(storage, name, {
    what: `VolumeAttachment ${name} (kvc logs: ${kvc.logs().slice(-2000)})`,
  });
}

async function reportedAttached(node: string, handle: string): Promise<void> {
  const want = `kubernetes.io/csi/${DRIVER}^${handle}`;
  await waitFor(
    async () => (await core.readNode({ name: node })).status?.volumesAttached?.some((v) => v.name === want),
    {
      timeoutMs: 60_000,
      what: `node ${node} to report ${want} attached (kvc logs: ${kvc.logs().slice(-2000)})`,
    },
  );
}

test("poisoned pods, PVs, nodes, CSIDrivers and VolumeAttachments do not stop volumes from attaching", async () => {
  const labels = Object.fromEntries(Array.from({ length: 5000 }, (_, i) => [`k${i}`, `v${i}`]));
  await createManagedNode(core, "node-ok");
  // A node with thousands of labels and of volumes it claims in use, none of them known.
  await createManagedNode(core, "node-poison", { labels });
  await core.patchNodeStatus(
    {
      name: "node-poison",
      body: {
        status: {
          volumesInUse: Array.from({ length: 5000 }, (_, i) => `kubernetes.io/csi/x^${"h".repeat(200)}${i}`),
          volumesAttached: [{ name: "kubernetes.io/csi/nobody^nothing", devicePath: "\u0000".repeat(1000) }],
        },
      },
    },
    mergePatch,
  );
  // A CSIDriver with every optional field set oddly, for a driver no volume here resolves to.
  await storage.createCSIDriver({
    body: {
      metadata: { name: "odd.csi.example.com", annotations: { big: "x".repeat(200_000) } },
      spec: {
        attachRequired: false,
        podInfoOnMount: true,
        requiresRepublish: true,
        storageCapacity: true,
        seLinuxMount: true,
        fsGroupPolicy: "None",
        volumeLifecycleModes: ["Persistent", "Ephemeral"],
        tokenRequests: Array.from({ length: 100 }, (_, i) => ({
          audience: `aud-${i}`,
          expirationSeconds: 600 + i,
        })),
      },
    },
  });
  // A VolumeAttachment on the healthy node for a PV that does not exist, already reported attached.
  const orphan = attachmentName("no-such-volume", DRIVER, "node-ok");
  await storage.createVolumeAttachment({
    body: {
      metadata: { name: orphan },
      spec: { attacher: DRIVER, nodeName: "node-ok", source: { persistentVolumeName: "no-such-pv" } },
    },
  });
  await storage.patchVolumeAttachmentStatus(
    { name: orphan, body: { status: { attached: true } } },
    mergePatch,
  );
  // A PV with a pathological CSI spec (huge handle and attributes, odd secret references), in use.
  const poisonedClaim = await boundCSIClaim("att-poison", {
    csi: {
      driver: DRIVER,
      volumeHandle: "att-poison",
      fsType: "\u202e".repeat(100),
      volumeAttributes: Object.fromEntries(
        Array.from({ length: 2000 }, (_, i) => [`a${i}`, "\u{1F4A5}".repeat(50)]),
      ),
      controllerPublishSecretRef: { name: "no-such-secret", namespace: "no-such-namespace" },
    },
    mountOptions: Array.from({ length: 1000 }, (_, i) => `opt${i}`),
    nodeAffinity: {
      required: {
        nodeSelectorTerms: [{ matchExpressions: [{ key: "k0", operator: "In", values: ["v0"] }] }],
      },
    },
  });
  await core.createNamespacedPod({
    namespace: NS,
    body: pod("on-poison", "node-poison", [
      { name: "data", persistentVolumeClaim: { claimName: poisonedClaim } },
    ]),
  });
  // A pod on the healthy node with thousands of volumes that resolve to nothing, and one that does.
  const resolvable = await boundCSIClaim("att-among-many");
  const broken: V1Volume[] = Array.from(
    { length: 3000 },
    (_, i) =>
      [
        { name: `c${i}`, persistentVolumeClaim: { claimName: `no-such-claim-${i}` } },
        {
          name: `i${i}`,
          csi: { driver: `no-such-driver-${i}.example.com`, volumeAttributes: { i: `${i}` } },
        },
        { name: `g${i}`, gcePersistentDisk: { pdName: `no-such-disk-${i}`, fsType: "ext4" } },
      ][i % 3]!,
  );
  await core.createNamespacedPod({
    namespace: NS,
    body: pod("many-volumes", "node-ok", [
      ...broken,
      { name: "good", persistentVolumeClaim: { claimName: resolvable } },
    ]),
  });
  await attachVolume("att-poison", "node-poison");
  await attachVolume("att-among-many", "node-ok");

  // After all of that, an ordinary pod's CSI volume on the healthy node attaches and is reported.
  const normalClaim = await boundCSIClaim("att-normal");
  await core.createNamespacedPod({
    namespace: NS,
    body: pod("normal", "node-ok", [{ name: "data", persistentVolumeClaim: { claimName: normalClaim } }]),
  });
  await attachVolume("att-normal", "node-ok");
  await reportedAttached("node-ok", "att-normal");
  await reportedAttached("node-ok", "att-among-many");
  await reportedAttached("node-poison", "att-poison");
  assert.equal(kvc.child.exitCode, null, "kvc is still running");
});
