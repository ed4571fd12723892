import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { after, before, describe, test } from "node:test";
import {
  CoreV1Api,
  StorageV1Api,
  type V1PersistentVolume,
  type V1PersistentVolumeClaim,
  type V1PersistentVolumeSpec,
} from "@kubernetes/client-node";
import { load } from "js-yaml";
import { LocalControlPlane } from "../../src/controlplane/local-control-plane.js";
import { explainClaim, type ClaimExplanation } from "../../src/explain/claim.js";
import { ClusterReader } from "../../src/explain/cluster.js";
import { explainVolume } from "../../src/explain/volume.js";
import { waitFor } from "../../src/util/wait.js";
import { BINDER_FLAGS, killAllKvc, startKvc } from "../support/kvc-process.js";

const cli = fileURLToPath(new URL("../../src/app/cli.ts", import.meta.url));
const run = promisify(execFile);

describe("kvc explain pvc on the real control plane", () => {
  let cp: LocalControlPlane;
  let core: CoreV1Api;
  let storage: StorageV1Api;

  before(async () => {
    cp = await LocalControlPlane.start();
    core = cp.kubeConfig().makeApiClient(CoreV1Api);
    storage = cp.kubeConfig().makeApiClient(StorageV1Api);
    for (const name of ["reasons", "conclusions", "binds"]) {
      await core.createNamespace({ body: { metadata: { name } } });
    }
  });
  after(async () => {
    killAllKvc();
    await cp.stop();
  });

  /** A PV in `phase` (set through the status subresource, as the binder would). */
  async function volume(
    name: string,
    size: string,
    spec: Partial<V1PersistentVolumeSpec> = {},
    metadata: V1PersistentVolume["metadata"] = {},
    phase = "Available",
  ): Promise<void> {
    const created = await core.createPersistentVolume({
      body: {
        metadata: { ...metadata, name },
        spec: {
          capacity: { storage: size },
          accessModes: ["ReadWriteOnce"],
          persistentVolumeReclaimPolicy: "Retain",
          storageClassName: "",
          // A VolumeAttributesClass needs a CSI volume.
          ...(spec.csi ? {} : { hostPath: { path: `/tmp/kvc-explain/${name}` } }),
          ...spec,
        },
      },
    });
    await core.replacePersistentVolumeStatus({ name, body: { ...created, status: { phase } } });
  }

  async function claim(
    namespace: string,
    name: string,
    spec: Partial<NonNullable<V1PersistentVolumeClaim["spec"]>> = {},
    annotations: Record<string, string> = {},
  ): Promise<void> {
    await core.createNamespacedPersistentVolumeClaim({
      namespace,
      body: {
        metadata: { name, namespace, annotations },
        spec: {
          accessModes: ["ReadWriteOnce"],
          resources: { requests: { storage: "10Gi" } },
          storageClassName: "",
          ...spec,
        },
      },
    });
  }

  async function explain(namespace: string, name: string): Promise<ClaimExplanation> {
    const reader = new ClusterReader({ kubeconfig: cp.kubeconfigPath, namespace });
    const inputs = await reader.claimInputs(name);
    assert.ok(inputs, `claim ${namespace}/${name} exists`);
    return explainClaim(inputs);
  }

  const codes = (r: ClaimExplanation, volume: string) =>
    r.volumes.verdicts.find((v) => v.name === volume)?.reasons.map((x) => x.code);

  test("each reason code, read from the API", async () => {
    const zone = { labels: { zone: "a" } };
    await claim("reasons", "data", { selector: { matchLabels: { zone: "a" } } });
    await volume("r-class", "10Gi", { storageClassName: "gold" }, zone);
    await volume("r-small", "5Gi", {}, zone);
    await volume("r-modes", "10Gi", { accessModes: ["ReadOnlyMany"] }, zone);
    await volume("r-block", "10Gi", { volumeMode: "Block" }, zone);
    await volume("r-selector", "10Gi", {}, { labels: { zone: "b" } });
    await volume("r-other", "10Gi", { claimRef: { namespace: "reasons", name: "someone" } }, zone);
    await volume("r-pending", "10Gi", {}, zone, "Pending");
    await volume(
      "r-vac",
      "10Gi",
      { volumeAttributesClassName: "fast", csi: { driver: "vac.example.com", volumeHandle: "h" } },
      zone,
    );
    await volume("r-deleting", "10Gi", {}, { ...zone, finalizers: ["example.com/hold"] });
    await core.deletePersistentVolume({ name: "r-deleting" });
    await waitFor(
      async () => (await core.readPersistentVolume({ name: "r-deleting" })).metadata?.deletionTimestamp,
      { timeoutMs: 10_000, what: "r-deleting to be deleting" },
    );
    await core.createNode({
      body: { metadata: { name: "node-b", labels: { zone: "b" } } },
    });
    await volume("r-affinity", "10Gi", {
      storageClassName: "topo",
      nodeAffinity: {
        required: {
          nodeSelectorTerms: [{ matchExpressions: [{ key: "zone", operator: "In", values: ["a"] }] }],
        },
      },
    });

    const r = await explain("reasons", "data");
    assert.deepEqual(codes(r, "r-class"), ["ClassMismatch"]);
    assert.deepEqual(codes(r, "r-small"), ["TooSmall"]);
    assert.deepEqual(codes(r, "r-modes"), ["AccessModes"]);
    assert.deepEqual(codes(r, "r-block"), ["VolumeMode"]);
    assert.deepEqual(codes(r, "r-selector"), ["Selector"]);
    assert.deepEqual(codes(r, "r-other"), ["BoundToOther"]);
    assert.deepEqual(codes(r, "r-pending"), ["NotAvailable"]);
    assert.deepEqual(codes(r, "r-vac"), ["AttributesClass"]);
    assert.deepEqual(codes(r, "r-deleting"), ["Deleting"]);
    // Only r-pending fails on nothing but its phase: the binder waits for it to turn Available.
    assert.equal(r.conclusion.kind, "WaitForVolumeAvailable");
    assert.equal(r.conclusion.volume, "r-pending");

    await storage.createStorageClass({
      body: {
        metadata: { name: "topo" },
        provisioner: "example.com/topo",
        volumeBindingMode: "WaitForFirstConsumer",
      },
    });
    await claim(
      "reasons",
      "placed",
      { storageClassName: "topo" },
      { "volume.kubernetes.io/selected-node": "node-b" },
    );
    const placed = await explain("reasons", "placed");
    assert.deepEqual(codes(placed, "r-affinity"), ["NodeAffinity"]);
    assert.equal(placed.conclusion.kind, "Provision");
  });

  test("each conclusion, read from the API", async () => {
    const ns = "conclusions";
    await storage.createStorageClass({
      body: { metadata: { name: "alive" }, provisioner: "alive.example.com", volumeBindingMode: "Immediate" },
    });
    await storage.createCSIDriver({ body: { metadata: { name: "alive.example.com" }, spec: {} } });
    await storage.createStorageClass({
      body: { metadata: { name: "dead" }, provisioner: "dead.example.com", volumeBindingMode: "Immediate" },
    });
    await storage.createStorageClass({
      body: {
        metadata: { name: "later" },
        provisioner: "later.example.com",
        volumeBindingMode: "WaitForFirstConsumer",
      },
    });
    await volume("c-fit", "10Gi", { storageClassName: "fits" });
    await claim(ns, "bind", { storageClassName: "fits" });
    await claim(ns, "alive", { storageClassName: "alive" });
    await claim(ns, "dead", { storageClassName: "dead" });
    await claim(ns, "later", { storageClassName: "later" });
    await claim(ns, "missing", { storageClassName: "missing" });
    await claim(ns, "none", { resources: { requests: { storage: "1Ti" } } });
    await claim(ns, "requested", { volumeName: "not-there" });
    // Naming a volume: the binder's checkVolumeSatisfyClaim; the selector does not count.
    await volume("c-named", "10Gi");
    await claim(ns, "named", { volumeName: "c-named", selector: { matchLabels: { zone: "a" } } });
    await volume("c-named-small", "1Gi");
    await claim(ns, "named-small", { volumeName: "c-named-small" });
    const completed = { "pv.kubernetes.io/bind-completed": "yes" };
    await claim(ns, "lost", { volumeName: "c-never-there" }, completed);

    const bind = await explain(ns, "bind");
    assert.deepEqual([bind.conclusion.kind, bind.conclusion.volume], ["Bind", "c-fit"]);
    const alive = await explain(ns, "alive");
    assert.equal(alive.conclusion.kind, "Provision");
    assert.equal(alive.conclusion.provisioner?.alive, true);
    const dead = await explain(ns, "dead");
    assert.equal(dead.conclusion.provisioner?.alive, false);
    assert.equal((await explain(ns, "later")).conclusion.kind, "WaitForFirstConsumer");
    assert.equal((await explain(ns, "missing")).conclusion.kind, "ClassNotFound");
    assert.equal((await explain(ns, "none")).conclusion.kind, "NoMatchNoClass");
    assert.equal((await explain(ns, "requested")).conclusion.kind, "WaitForRequestedVolume");
    const named = await explain(ns, "named");
    assert.deepEqual([named.conclusion.kind, named.conclusion.volume], ["BindRequested", "c-named"]);
    const small = await explain(ns, "named-small");
    assert.equal(small.conclusion.kind, "WaitForRequestedVolume");
    assert.match(small.conclusion.message, /requested PV is too small/);
    assert.equal((await explain(ns, "lost")).conclusion.kind, "Lost");
    // Bound: "explain's 'would bind X' is what kvc then does" below. Invalid needs a claim the
    // apiserver rejects (bad selector, unknown access mode, no request): unit tests only.
  });

  test("the CLI: -o json, -o yaml, human output; KUBECONFIG and --context as kubectl", async () => {
    const env = { ...process.env, KUBECONFIG: cp.kubeconfigPath, NO_COLOR: "1" };
    const args = ["--import", "tsx", cli, "explain", "pvc", "bind", "-n", "conclusions"];
    const json = JSON.parse(
      (await run(process.execPath, [...args, "-o", "json"], { env })).stdout,
    ) as ClaimExplanation;
    assert.equal(json.apiVersion, "kvc.explain/v1");
    assert.deepEqual([json.conclusion.kind, json.conclusion.volume], ["Bind", "c-fit"]);
    const yaml = load(
      (await run(process.execPath, [...args, "-o", "yaml"], { env })).stdout,
    ) as ClaimExplanation;
    assert.deepEqual(yaml, json);
    const human = (await run(process.execPath, args, { env })).stdout;
    assert.match(human, /Conclusion: Bind: would bind volume c-fit/);
    assert.ok(!human.includes("\u001b["), "no colour when not on a terminal");
    await assert.rejects(
      run(process.execPath, [...args, "--context", "nowhere"], { env }),
      (err: Error & { stderr: string; code: number }) => {
        assert.equal(err.code, 1);
        assert.match(err.stderr, /context "nowhere" does not exist/);
        return true;
      },
    );
  });

  test("explain pv: each conclusion; Failed with its last warning event, deletion held by a finalizer", async () => {
    const reader = new ClusterReader({ kubeconfig: cp.kubeconfigPath });
    const explainPV = async (name: string) => {
      const inputs = await reader.volumeInputs(name);
      assert.ok(inputs, `volume ${name} exists`);
      return explainVolume(inputs);
    };
    await volume(
      "p-released",
      "1Gi",
      { claimRef: { namespace: "conclusions", name: "gone", uid: "u0" } },
      {},
      "Released",
    );
    const released = await explainPV("p-released");
    assert.equal(released.conclusion.kind, "Retained");
    assert.equal(released.volume.claimRef, "conclusions/gone");

    await volume("p-failed", "1Gi", { persistentVolumeReclaimPolicy: "Delete" }, {}, "Failed");
    await core.createNamespacedEvent({
      namespace: "default",
      body: {
        metadata: { name: "p-failed.1", namespace: "default" },
        involvedObject: { kind: "PersistentVolume", name: "p-failed", apiVersion: "v1" },
        type: "Warning",
        reason: "VolumeFailedDelete",
        message: "the storage refused",
        lastTimestamp: new Date(),
      },
    });
    const failed = await explainPV("p-failed");
    assert.equal(failed.conclusion.kind, "Failed");
    assert.deepEqual(
      [failed.lastWarning?.reason, failed.lastWarning?.message],
      ["VolumeFailedDelete", "the storage refused"],
    );

    // Every other phase and what the binder does about it.
    const kinds: [string, string][] = [];
    const check = async (name: string) => kinds.push([name, (await explainPV(name)).conclusion.kind]);
    await core.createPersistentVolume({
      body: {
        metadata: { name: "p-new" },
        spec: { capacity: { storage: "1Gi" }, accessModes: ["ReadWriteOnce"], hostPath: { path: "/tmp/x" } },
      },
    });
    await check("p-new");
    await volume("p-free", "1Gi");
    await check("p-free");
    await volume("p-reserved", "1Gi", { claimRef: { namespace: "conclusions", name: "nobody" } });
    await check("p-reserved");
    await claim("conclusions", "holder", { volumeName: "p-bound" });
    const holder = await core.readNamespacedPersistentVolumeClaim({
      namespace: "conclusions",
      name: "holder",
    });
    const ref = { namespace: "conclusions", name: "holder", uid: holder.metadata?.uid ?? "" };
    await volume("p-bound", "10Gi", { claimRef: ref }, {}, "Bound");
    await check("p-bound");
    await volume("p-orphan", "1Gi", { claimRef: { ...ref, uid: "u-old" } }, {}, "Bound");
    await check("p-orphan");
    const releasedBy = (name: string, policy: string) =>
      volume(
        name,
        "1Gi",
        {
          persistentVolumeReclaimPolicy: policy,
          claimRef: { namespace: "conclusions", name: "gone", uid: "u1" },
        },
        {},
        "Released",
      );
    await releasedBy("p-delete", "Delete");
    await check("p-delete");
    await releasedBy("p-recycle", "Recycle");
    await check("p-recycle");
    assert.deepEqual(kinds, [
      ["p-new", "NotSynced"],
      ["p-free", "Available"],
      ["p-reserved", "PreBound"],
      ["p-bound", "Bound"],
      ["p-orphan", "ClaimGone"],
      ["p-delete", "WillDelete"],
      ["p-recycle", "WillRecycle"],
    ]);

    await volume("p-held", "1Gi", {}, { finalizers: ["example.com/hold"] });
    await core.deletePersistentVolume({ name: "p-held" });
    const held = await explainPV("p-held");
    assert.ok(held.volume.deletionTimestamp);
    // The apiserver's StorageObjectInUseProtection admission adds pv-protection, which kvc would remove.
    assert.deepEqual(held.finalizers.map((f) => f.name).sort(), [
      "example.com/hold",
      "kubernetes.io/pv-protection",
    ]);

    const env = { ...process.env, KUBECONFIG: cp.kubeconfigPath };
    const out = (
      await run(process.execPath, ["--import", "tsx", cli, "explain", "pv", "p-released", "-o", "json"], {
        env,
      })
    ).stdout;
    assert.equal((JSON.parse(out) as { conclusion: { kind: string } }).conclusion.kind, "Retained");
  });

  test("explain's 'would bind X' is what kvc then does", async () => {
    const ns = "binds";
    // Each claim has its own class, so that the choices do not interact.
    await volume("b-small-fit", "10Gi", { storageClassName: "smallest" });
    await volume("b-big", "50Gi", { storageClassName: "smallest" });
    await claim(ns, "smallest", { storageClassName: "smallest" });
    await volume("b-prebound", "20Gi", { storageClassName: "pre", claimRef: { namespace: ns, name: "pre" } });
    await volume("b-free", "10Gi", { storageClassName: "pre" });
    await claim(ns, "pre", { storageClassName: "pre" });
    // Fewest access modes first: the bigger RWO volume before the RWO+ROX one.
    await volume("b-rwo-rox", "10Gi", {
      storageClassName: "modes",
      accessModes: ["ReadWriteOnce", "ReadOnlyMany"],
    });
    await volume("b-rwo", "30Gi", { storageClassName: "modes" });
    await claim(ns, "modes", { storageClassName: "modes" });
    await volume("b-label-b", "10Gi", { storageClassName: "sel" }, { labels: { zone: "b" } });
    await volume("b-label-a", "40Gi", { storageClassName: "sel" }, { labels: { zone: "a" } });
    await claim(ns, "sel", { storageClassName: "sel", selector: { matchLabels: { zone: "a" } } });
    await volume("b-fs", "10Gi", { storageClassName: "blk" });
    await volume("b-blk", "60Gi", { storageClassName: "blk", volumeMode: "Block" });
    await claim(ns, "blk", { storageClassName: "blk", volumeMode: "Block" });

    const expected = new Map<string, string | null>();
    for (const name of ["smallest", "pre", "modes", "sel", "blk"]) {
      const r = await explain(ns, name);
      assert.equal(r.conclusion.kind, "Bind", `${name}: ${r.conclusion.message}`);
      expected.set(name, r.conclusion.volume);
    }
    assert.deepEqual(Object.fromEntries(expected), {
      smallest: "b-small-fit",
      pre: "b-prebound",
      modes: "b-rwo",
      sel: "b-label-a",
      blk: "b-blk",
    });

    const kvc = await startKvc(cp.kubeconfigPath, BINDER_FLAGS);
    await kvc.ready();
    for (const [name, volumeName] of expected) {
      const bound = await waitFor(
        async () => {
          const c = await core.readNamespacedPersistentVolumeClaim({ namespace: ns, name });
          return c.status?.phase === "Bound" ? c : undefined;
        },
        { timeoutMs: 60_000, what: `claim ${ns}/${name} to be Bound (kvc logs: ${kvc.logs().slice(-2000)})` },
      );
      assert.equal(bound.spec?.volumeName, volumeName, name);
      const after = await explain(ns, name);
      assert.deepEqual([after.conclusion.kind, after.conclusion.volume], ["Bound", volumeName]);
    }
  });
});
