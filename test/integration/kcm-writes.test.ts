import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { after, before, describe, test } from "node:test";
import { CoreV1Api, type CoreV1Event, type V1ManagedFieldsEntry } from "@kubernetes/client-node";
import { KCM_FIELD_MANAGER } from "../../src/app/kcm-writes.js";
import { LocalControlPlane } from "../../src/controlplane/local-control-plane.js";
import type { ManagedProcess } from "../../src/controlplane/process.js";
import type { ShadowSummary } from "../../src/shadow/shadow-mode.js";
import { mergePatch } from "../../src/runtime/client.js";
import { waitFor } from "../../src/util/wait.js";
import { BINDER_FLAGS, killAllKvc, startKvc, type KvcProcess } from "../support/kvc-process.js";

/** KCM's `--controllers` after the cut-over, as the repo's kind cluster runs it. */
const CUTOVER_CONTROLLERS = (() => {
  const config = readFileSync(new URL("../e2e/kind-config.yaml", import.meta.url), "utf8");
  const line = /controllers: "([^"]+)"/.exec(config)?.[1];
  assert.ok(line, "test/e2e/kind-config.yaml has KCM's --controllers line");
  return line.split(",");
})();

const KCM_VOLUME_LOOPS = [
  "persistentvolume-binder-controller",
  "persistentvolume-attach-detach-controller",
  "persistentvolumeclaim-protection-controller",
  "persistentvolume-protection-controller",
];

/** The log lines of kvc's competing-writer warning, parsed. */
function warnings(kvc: KvcProcess): Record<string, unknown>[] {
  return kvc
    .logs()
    .split("\n")
    .filter((l) => l.includes('"logger":"competing-writers"'))
    .map((l) => JSON.parse(l) as Record<string, unknown>);
}

async function competingWrites(kvc: KvcProcess): Promise<string[]> {
  const res = await kvc.get("/metrics");
  assert.equal(res.status, 200, res.body);
  return res.body.split("\n").filter((l) => l.startsWith("kvc_competing_writer_writes_total{"));
}

/**
 * kvc beside upstream kube-controller-manager on the real control plane: KCM's volume loops left on
 * are warned of (log, Event, metric); KCM after the cut-over, its other loops writing the same
 * nodes, is not.
 */
describe("kvc warns of KCM's volume loops still on", () => {
  let cp: LocalControlPlane;
  let core: CoreV1Api;
  let kcm: ManagedProcess | undefined;

  before(async () => {
    cp = await LocalControlPlane.start();
    core = cp.kubeConfig().makeApiClient(CoreV1Api);
  });
  after(async () => {
    killAllKvc();
    await cp.stop();
  });

  const pair = async (name: string) => {
    await core.createPersistentVolume({
      body: {
        metadata: { name },
        spec: {
          capacity: { storage: "1Gi" },
          accessModes: ["ReadWriteOnce"],
          persistentVolumeReclaimPolicy: "Retain",
          storageClassName: "",
          hostPath: { path: `/tmp/${name}` },
        },
      },
    });
    await core.createNamespacedPersistentVolumeClaim({
      namespace: "default",
      body: {
        metadata: { name },
        spec: {
          accessModes: ["ReadWriteOnce"],
          storageClassName: "",
          resources: { requests: { storage: "1Gi" } },
        },
      },
    });
  };
  const bound = (name: string, what: string) =>
    waitFor(
      async () => {
        const claim = await core.readNamespacedPersistentVolumeClaim({ namespace: "default", name });
        return claim.status?.phase === "Bound" ? claim : undefined;
      },
      { timeoutMs: 60_000, what },
    );
  // With a label, as a kubelet registers it: an object created with no field at all gets no
  // managedFields, and then later writes are not tracked either.
  const node = (name: string) =>
    core.createNode({ body: { metadata: { name, labels: { "kubernetes.io/hostname": name } } } });
  const managers = (fields: V1ManagedFieldsEntry[] | undefined) => new Set(fields?.map((f) => f.manager));

  test("KCM after the cut-over: no warning, though its other loops write the same nodes", async () => {
    const kvc = await startKvc(cp.kubeconfigPath, BINDER_FLAGS);
    await kvc.ready();
    const startedAt = Date.now();
    kcm = await cp.startKubeControllerManager({ controllers: CUTOVER_CONTROLLERS });
    await node("quiet-node");
    await pair("quiet");
    const claim = await bound("quiet", "kvc to bind the pair");
    const pv = await core.readPersistentVolume({ name: "quiet" });
    assert.ok(managers(pv.metadata?.managedFields).has("kube-volume-controller"));
    assert.equal(claim.spec?.volumeName, "quiet");
    // KCM's TTL and node lifecycle loops write the node as kube-controller-manager.
    await waitFor(
      async () => {
        const node = await core.readNode({ name: "quiet-node" });
        return node.metadata?.managedFields?.some(
          (f) => f.manager === KCM_FIELD_MANAGER && f.time && f.time.getTime() >= startedAt - 1000,
        );
      },
      { timeoutMs: 60_000, what: "KCM's other loops to write the node" },
    );

    // Watch events of a resource arrive in order: once kvc has reported these writes, made as KCM
    // makes them (its manager name), it has seen every earlier event of those kinds.
    const asKcm = { fieldManager: KCM_FIELD_MANAGER };
    await core.createPersistentVolume({
      ...asKcm,
      body: {
        metadata: { name: "marker" },
        spec: {
          capacity: { storage: "1Gi" },
          accessModes: ["ReadWriteOnce"],
          hostPath: { path: "/tmp/marker" },
          claimRef: { namespace: "default", name: "marker" },
        },
      },
    });
    await core.createNamespacedPersistentVolumeClaim({
      ...asKcm,
      namespace: "default",
      body: {
        metadata: { name: "marker" },
        spec: {
          accessModes: ["ReadWriteOnce"],
          volumeName: "no-such-volume",
          resources: { requests: { storage: "1Gi" } },
        },
      },
    });
    await node("marker-node");
    await core.patchNodeStatus(
      {
        ...asKcm,
        name: "marker-node",
        body: { status: { volumesAttached: [{ name: "kubernetes.io/csi/marker^v", devicePath: "" }] } },
      },
      mergePatch,
    );
    const kinds = ["PersistentVolume", "PersistentVolumeClaim", "Node"];
    const lines = await waitFor(
      () => {
        const w = warnings(kvc);
        return kinds.every((k) => w.some((l) => l.kind === k)) ? w : undefined;
      },
      { timeoutMs: 30_000, what: "kvc to report the marker writes" },
    );
    // Rate-limited per manager and kind: an earlier write of a kind would have taken its one line.
    assert.deepEqual(
      lines.map((l) => [l.kind, l.object]),
      [
        ["PersistentVolume", { name: "marker" }],
        ["PersistentVolumeClaim", { name: "marker", namespace: "default" }],
        ["Node", { name: "marker-node" }],
      ],
      JSON.stringify(lines, null, 2),
    );
    for (const series of await competingWrites(kvc)) {
      assert.match(series, /field="(spec\.claimRef|spec\.volumeName|status\.volumesAttached)"/);
    }
    kvc.child.kill("SIGTERM");
    await kvc.exited;
    await kcm.stop();
    kcm = undefined;
  });

  test("KCM's volume loops on: kvc warns in its log, with an Event and in its metric", async () => {
    // kvc's binder off: beside KCM's, which of the two binds the pair would be a race.
    const kvc = await startKvc(cp.kubeconfigPath, [
      ...BINDER_FLAGS,
      "--controllers=*,-persistentvolume-binder-controller",
    ]);
    await kvc.ready();
    kcm = await cp.startKubeControllerManager({
      controllers: KCM_VOLUME_LOOPS,
      args: ["--pvclaimbinder-sync-period=1s"],
    });
    await pair("contested");
    await bound("contested", "KCM to bind the pair");

    const line = await waitFor(
      () =>
        warnings(kvc).find(
          (l) => l.kind === "PersistentVolume" && (l.object as { name?: string }).name === "contested",
        ),
      { timeoutMs: 30_000, what: "kvc's warning about the PV" },
    );
    assert.equal(line.manager, KCM_FIELD_MANAGER);
    assert.equal(line.level, 40); // pino's warn
    assert.match(String(line.field), /^(spec\.claimRef|status\.phase|metadata\.annotations\[.*\])$/);
    assert.match(String(line.msg), /--controllers .*docs\/operations\.md#installing-beside-kcm/);
    const event = await waitFor(
      async () =>
        (await core.listNamespacedEvent({ namespace: "default" })).items.find(
          (e: CoreV1Event) => e.reason === "CompetingWriter" && e.involvedObject.name === "contested",
        ),
      { timeoutMs: 30_000, what: "kvc's Event about the PV" },
    );
    assert.equal(event.type, "Warning");
    assert.equal(event.involvedObject.kind, "PersistentVolume");
    assert.match(event.message ?? "", /kube-controller-manager wrote .* persistentvolume-binder-controller/);
    const series = await competingWrites(kvc);
    assert.ok(
      series.some((s) => /manager="kube-controller-manager",kind="PersistentVolume"/.test(s)),
      series.join("\n"),
    );
    kvc.child.kill("SIGTERM");
    await kvc.exited;
    await kcm.stop();
  });

  test("in shadow mode, where KCM's loops are meant to run, no warning", async () => {
    const shadow = await startKvc(cp.kubeconfigPath, [
      "--shadow",
      "--pvclaimbinder-sync-period=1s",
      "--kube-api-qps=-1",
    ]);
    await shadow.ready();
    kcm = await cp.startKubeControllerManager({
      controllers: KCM_VOLUME_LOOPS,
      args: ["--pvclaimbinder-sync-period=1s"],
    });
    const bindings = async () => {
      const res = await shadow.get("/shadow");
      assert.equal(res.status, 200, res.body);
      return (JSON.parse(res.body) as ShadowSummary).decisions
        .filter((d) => d.kind === "binding")
        .reduce((n, d) => n + d.count, 0);
    };
    await pair("shadowed");
    await bound("shadowed", "KCM to bind the pair");
    // A binding is compared once the shadow has seen KCM's write of it: what kvc would warn of.
    await waitFor(async () => (await bindings()) > 0, {
      timeoutMs: 60_000,
      what: "the shadow to compare KCM's binding",
    });
    assert.deepEqual(warnings(shadow), []);
    assert.deepEqual(await competingWrites(shadow), []);
    await kcm.stop();
  });
});
