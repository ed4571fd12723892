import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { after, before, describe, test } from "node:test";
import { CoreV1Api, StorageV1Api } from "@kubernetes/client-node";
import { LocalControlPlane } from "../../src/controlplane/local-control-plane.js";
import { ClusterReader } from "../../src/explain/cluster.js";
import { explainPod, type PodExplanation } from "../../src/explain/pod.js";
import { waitFor } from "../../src/util/wait.js";
import { attachmentName } from "../../src/volume/csi/attachment-name.js";
import {
  attachWhenAsked,
  boundCSIClaim,
  createPodWithClaim,
  createManagedNode,
  csiUniqueName,
  nodeReportsAttached,
  readAttachment,
  setVolumesInUse,
  startAttachDetachController,
  type InProcessAttachDetach,
} from "../support/attach-detach.js";
import { mergePatch } from "../../src/runtime/client.js";

/*
 * kvc explain pod beside the attach/detach controller (in-process) on a real apiserver; the test
 * plays the kubelet (managed nodes, volumesInUse) and the CSI external-attacher. Each verdict is
 * checked against what the controller then does.
 */

const cli = fileURLToPath(new URL("../../src/app/cli.ts", import.meta.url));
const run = promisify(execFile);
const DRIVER = "explain.csi.example.com";
const NS = "default";
const timeoutMs = 30_000;

describe("kvc explain pod on the real control plane", () => {
  let cp: LocalControlPlane;
  let core: CoreV1Api;
  let storage: StorageV1Api;
  let controller: InProcessAttachDetach;

  before(async () => {
    cp = await LocalControlPlane.start();
    core = cp.kubeConfig().makeApiClient(CoreV1Api);
    storage = cp.kubeConfig().makeApiClient(StorageV1Api);
    controller = await startAttachDetachController(cp.kubeConfig());
    await createManagedNode(core, "node-1", { ready: "True" });
    await createManagedNode(core, "node-2", { ready: "True" });
  });
  after(async () => {
    await controller.stop();
    await cp.stop();
  });

  async function createPod(name: string, node: string, claimName: string): Promise<void> {
    await createPodWithClaim(core, { namespace: NS, name, node, claimName });
  }

  async function explain(name: string): Promise<PodExplanation> {
    const inputs = await new ClusterReader({ kubeconfig: cp.kubeconfigPath, namespace: NS }).podInputs(name);
    assert.ok(inputs, `pod ${name} exists`);
    return explainPod(inputs);
  }

  const volume = (r: PodExplanation) => {
    const [v] = r.volumes;
    assert.ok(v, "the pod's volume is explained");
    return v;
  };

  test("waiting for the external-attacher, then attached, then a multi-attach conflict", async () => {
    const claim = await boundCSIClaim(core, { namespace: NS, driver: DRIVER, handle: "vol-1" });
    await createPod("first", "node-1", claim);
    const vaName = attachmentName("vol-1", DRIVER, "node-1");

    // The controller created the VolumeAttachment; nobody attached it yet.
    await waitFor(() => readAttachment(storage, vaName), { timeoutMs, what: `VolumeAttachment ${vaName}` });
    await storage.patchVolumeAttachmentStatus(
      { name: vaName, body: { status: { attached: false, attachError: { message: "no such disk" } } } },
      mergePatch,
    );
    const waiting = await explain("first");
    assert.equal(volume(waiting).conclusion.kind, "WaitingForAttacher", volume(waiting).conclusion.message);
    assert.equal(volume(waiting).attachment?.name, vaName);
    assert.match(volume(waiting).conclusion.message, /no such disk/);

    // The attacher succeeds; the controller reports it in node status, the kubelet mounts it.
    await attachWhenAsked(storage, vaName, { timeoutMs });
    const unique = csiUniqueName(DRIVER, "vol-1");
    await nodeReportsAttached(core, "node-1", unique, { timeoutMs });
    await setVolumesInUse(core, "node-1", [unique]);
    const attached = await explain("first");
    assert.equal(volume(attached).conclusion.kind, "Attached", volume(attached).conclusion.message);
    assert.equal(volume(attached).uniqueName, unique);
    assert.deepEqual(volume(attached).nodeStatus, { volumesAttached: true, volumesInUse: true });

    // A second pod on another node wants the RWO volume: explain names the node and the pod.
    await createPod("second", "node-2", claim);
    const conflict = await explain("second");
    const v = volume(conflict);
    assert.equal(v.conclusion.kind, "MultiAttachConflict", v.conclusion.message);
    assert.deepEqual(
      v.otherNodes.map((o) => [o.node, o.attached, o.detach.pods]),
      [["node-1", true, [{ name: `${NS}/first`, active: true }]]],
    );
    // The controller agrees: its Multi-Attach warning on the second pod, and no attachment on node-2.
    await waitFor(
      async () =>
        (
          await core.listNamespacedEvent({
            namespace: NS,
            fieldSelector: "involvedObject.kind=Pod,involvedObject.name=second,reason=FailedAttachVolume",
          })
        ).items.find((e) => e.message?.includes("Multi-Attach") || e.message?.includes("Waiting for detach")),
      { timeoutMs, what: "the controller's Multi-Attach warning on pod second" },
    );
    assert.equal(await readAttachment(storage, attachmentName("vol-1", DRIVER, "node-2")), undefined);

    // The CLI, as a user runs it.
    const env = { ...process.env, KUBECONFIG: cp.kubeconfigPath, NO_COLOR: "1" };
    const { stdout } = await run(
      process.execPath,
      ["--import", "tsx", cli, "explain", "pod", "second", "-o", "json"],
      {
        env,
      },
    );
    assert.equal((JSON.parse(stdout) as PodExplanation).conclusion.kind, "MultiAttachConflict");
  });

  test("each other conclusion, read from the API", async () => {
    const claim = await boundCSIClaim(core, { namespace: NS, driver: DRIVER, handle: "vol-2" });
    const podWith = (name: string, spec: object) =>
      core.createNamespacedPod({
        namespace: NS,
        body: {
          metadata: { name },
          spec: { containers: [{ name: "c", image: "registry.k8s.io/pause:3.10" }], ...spec },
        },
      });
    await podWith("unscheduled", {
      volumes: [{ name: "data", persistentVolumeClaim: { claimName: claim } }],
    });
    // A node its kubelet attaches for (no controller-managed annotation), and a node that is gone.
    await core.createNode({ body: { metadata: { name: "node-self" } } });
    await createPod("on-unmanaged", "node-self", claim);
    await createPod("on-gone", "node-gone", claim);
    // No binder runs here: the claim stays Pending.
    await core.createNamespacedPersistentVolumeClaim({
      namespace: NS,
      body: {
        metadata: { name: "unbound" },
        spec: {
          accessModes: ["ReadWriteOnce"],
          resources: { requests: { storage: "1Gi" } },
          storageClassName: "",
        },
      },
    });
    await createPod("waits-for-claim", "node-1", "unbound");
    await createPod("no-claim", "node-1", "missing");
    await podWith("scratch", { nodeName: "node-1", volumes: [{ name: "data", emptyDir: {} }] });
    const kinds: [string, string][] = [];
    for (const name of ["unscheduled", "on-unmanaged", "on-gone", "waits-for-claim", "no-claim", "scratch"])
      kinds.push([name, volume(await explain(name)).conclusion.kind]);
    assert.deepEqual(kinds, [
      ["unscheduled", "NotScheduled"],
      ["on-unmanaged", "NodeNotManaged"],
      ["on-gone", "NodeNotManaged"],
      ["waits-for-claim", "ClaimNotBound"],
      ["no-claim", "CannotResolve"],
      ["scratch", "NotAttachable"],
    ]);

    // A pod that ended with its volume still mounted on a Ready node: the detach waits for the kubelet.
    const done = await boundCSIClaim(core, { namespace: NS, driver: DRIVER, handle: "vol-3" });
    await createPod("done", "node-2", done);
    const vaName = attachmentName("vol-3", DRIVER, "node-2");
    await attachWhenAsked(storage, vaName, { timeoutMs });
    const unique = csiUniqueName(DRIVER, "vol-3");
    await nodeReportsAttached(core, "node-2", unique, { timeoutMs });
    await setVolumesInUse(core, "node-2", [unique]);
    await core.patchNamespacedPodStatus(
      { namespace: NS, name: "done", body: { status: { phase: "Succeeded" } } },
      mergePatch,
    );
    const pending = volume(await explain("done"));
    assert.deepEqual(
      [pending.conclusion.kind, pending.detach?.forceDetach],
      ["PendingDetach", "never"],
      pending.conclusion.message,
    );
    // Unmounted: the controller detaches, and explain says so.
    await setVolumesInUse(core, "node-2", []);
    const detached = await waitFor(
      async () => {
        const v = volume(await explain("done"));
        return v.conclusion.kind === "Detached" ? v : undefined;
      },
      { timeoutMs, what: "the controller to detach vol-3 from node-2" },
    );
    assert.equal(detached.attachment?.exists, false);
  });
});
