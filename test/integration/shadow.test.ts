import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { promisify } from "node:util";
import { fileURLToPath } from "node:url";
import { after, before, describe, test } from "node:test";
import { CoreV1Api, StorageV1Api, type V1PersistentVolume } from "@kubernetes/client-node";
import { LocalControlPlane } from "../../src/controlplane/local-control-plane.js";
import type { Comparison } from "../../src/shadow/comparator.js";
import type { ShadowSummary } from "../../src/shadow/shadow-mode.js";
import { waitFor } from "../../src/util/wait.js";
import { describeEvents, writesBy } from "../support/audit.js";
import { killAllKvc, startKvc, type KvcProcess } from "../support/kvc-process.js";

const GRACE_S = 30;
const cli = fileURLToPath(new URL("../../src/app/cli.ts", import.meta.url));

/**
 * `kvc run --shadow` beside upstream kube-controller-manager on the real control plane: its decisions
 * are compared with KCM's, and the apiserver's audit log shows it never wrote.
 */
describe("kvc run --shadow beside KCM on the real control plane", () => {
  let cp: LocalControlPlane;
  let core: CoreV1Api;
  let storage: StorageV1Api;
  let shadow: KvcProcess;
  /** Disagreements of the test below about objects the hostPath difference does not touch. */
  let unaffected: Comparison[] | undefined;
  const started = new Date();

  before(async () => {
    cp = await LocalControlPlane.start({ audit: true });
    core = cp.kubeConfig().makeApiClient(CoreV1Api);
    storage = cp.kubeConfig().makeApiClient(StorageV1Api);
    // The one difference from KCM's flags: hostPath provisioning, enabled only in kvc.
    shadow = await startKvc(cp.kubeconfigPath, [
      "--shadow",
      `--shadow-grace-period=${GRACE_S}s`,
      "--pvclaimbinder-sync-period=1s",
      "--enable-hostpath-provisioner",
      "--kube-api-qps=-1",
    ]);
    await shadow.ready();
  });
  after(async () => {
    killAllKvc();
    await cp.stop();
  });

  const summary = async (): Promise<ShadowSummary> => {
    const res = await shadow.get("/shadow");
    assert.equal(res.status, 200, res.body);
    return JSON.parse(res.body) as ShadowSummary;
  };
  const about = (s: ShadowSummary, word: string): Comparison[] =>
    s.disagreements.filter((d) => d.key.includes(word));

  const volume = (name: string, size: string): V1PersistentVolume => ({
    metadata: { name },
    spec: {
      capacity: { storage: size },
      accessModes: ["ReadWriteOnce"],
      persistentVolumeReclaimPolicy: "Retain",
      storageClassName: "",
      hostPath: { path: `/tmp/${name}` },
    },
  });
  const claim = (namespace: string, name: string, size: string, storageClassName = "") =>
    core.createNamespacedPersistentVolumeClaim({
      namespace,
      body: {
        metadata: { name },
        spec: {
          accessModes: ["ReadWriteOnce"],
          storageClassName,
          resources: { requests: { storage: size } },
        },
      },
    });

  test("a claim bound by hand to another PV than kvc chose is a difference", async () => {
    // No KCM yet: kvc decides, the hand acts.
    await core.createNamespace({ body: { metadata: { name: "shadow-differ" } } });
    await core.createPersistentVolume({ body: volume("d-small", "1Gi") });
    await core.createPersistentVolume({ body: volume("d-big", "5Gi") });
    await claim("shadow-differ", "d-claim", "1Gi");
    await waitFor(
      async () => (await summary()).waiting.some((w) => w.key === "binding pvc shadow-differ/d-claim"),
      {
        timeoutMs: 30_000,
        what: "kvc's binding decision, waiting for upstream's",
      },
    );
    const pv = await core.readPersistentVolume({ name: "d-big" });
    pv.spec = {
      ...pv.spec,
      claimRef: { kind: "PersistentVolumeClaim", namespace: "shadow-differ", name: "d-claim" },
    };
    await core.replacePersistentVolume({ name: "d-big", body: pv });
    const s = await waitFor(
      async () => {
        const s = await summary();
        return about(s, "binding pvc shadow-differ/d-claim").length > 0 ? s : undefined;
      },
      { timeoutMs: 30_000, what: "the binding compared" },
    );
    assert.deepEqual(
      about(s, "binding pvc shadow-differ/d-claim").map((d) => [d.outcome, d.kvc, d.upstream]),
      [["differ", "d-small", "d-big"]],
    );
    assert.match(shadow.logs(), /"msg":"shadow: differ decision"/);
  });

  test("beside KCM, the claims only kvc can provision are kvc-only", async () => {
    await cp.startKubeControllerManager({
      controllers: [
        "persistentvolume-binder-controller",
        "persistentvolume-attach-detach-controller",
        "persistentvolumeclaim-protection-controller",
        "persistentvolume-protection-controller",
      ],
      args: ["--pvclaimbinder-sync-period=1s"],
    });
    const ns = "shadow-agree";
    await core.createNamespace({ body: { metadata: { name: ns } } });
    await storage.createStorageClass({
      body: { metadata: { name: "a-hostpath" }, provisioner: "kubernetes.io/host-path" },
    });
    const agreedPhases = async () =>
      (await summary()).decisions
        .filter((d) => d.kind === "phase" && d.outcome === "agree")
        .reduce((n, d) => n + d.count, 0);
    const before = await agreedPhases();
    for (let i = 0; i < 3; i++)
      await core.createPersistentVolume({ body: volume(`a-pv-${i}`, `${i + 1}Gi`) });
    // The claims only once both sides have the volumes (each made them Available): a claim that
    // reaches a binder before its volume gets FailedBinding there, a race of the test, not kvc's.
    await waitFor(async () => (await agreedPhases()) >= before + 3, {
      timeoutMs: 30_000,
      what: "the volumes' Available compared",
    });
    for (let i = 0; i < 3; i++) await claim(ns, `a-claim-${i}`, `${i + 1}Gi`);
    const hp = await claim(ns, "a-hostpath-claim", "1Gi", "a-hostpath");
    // a-claim-0 may as well get d-small (1Gi, left from the test above): upstream's tie-break.
    const claims = await waitFor(
      async () => {
        const all = await Promise.all(
          [0, 1, 2].map((i) =>
            core.readNamespacedPersistentVolumeClaim({ namespace: ns, name: `a-claim-${i}` }),
          ),
        );
        return all.every((c) => c.status?.phase === "Bound") ? all : undefined;
      },
      { timeoutMs: 60_000, what: "KCM to bind the static claims" },
    );
    // Deleting a claim: its protection finalizer removed, its volume Released (Retain).
    const released = claims[0]?.spec?.volumeName ?? "";
    await core.deleteNamespacedPersistentVolumeClaim({ namespace: ns, name: "a-claim-0" });
    await waitFor(
      async () => (await core.readPersistentVolume({ name: released })).status?.phase === "Released",
      {
        timeoutMs: 60_000,
        what: `KCM to release ${released}`,
      },
    );
    // Every decision settled: agreed, or one-sided after the grace window.
    const s = await waitFor(
      async () => {
        const s = await summary();
        return s.pending === 0 && about(s, "provisioning pvc shadow-agree/a-hostpath-claim").length > 0
          ? s
          : undefined;
      },
      { timeoutMs: 60_000 + 3 * GRACE_S * 1000, what: "every decision settled" },
    );
    const uid = hp.metadata?.uid ?? "?";
    const disagreements = s.disagreements.filter(
      (d) => !["shadow-differ", "d-small", "d-big"].some((w) => d.key.includes(w)),
    );
    const affected = (d: Comparison) => d.key.includes("a-hostpath-claim") || d.key.includes(uid);
    unaffected = disagreements.filter((d) => !affected(d));
    assert.ok(
      disagreements.some(
        (d) =>
          d.outcome === "kvc-only" &&
          d.key === "provisioning pvc shadow-agree/a-hostpath-claim" &&
          d.kvc === "provisioned by kubernetes.io/host-path",
      ),
      JSON.stringify(disagreements, null, 2),
    );
    const compared = (kind: string, outcomes: readonly string[]) =>
      s.decisions
        .filter((d) => d.kind === kind && outcomes.includes(d.outcome))
        .reduce((n, d) => n + d.count, 0);
    // Every static claim's binding was compared (its outcome: the test below), with the claim's
    // status the binder writes.
    assert.ok(compared("binding", ["agree", "tie"]) >= 3, JSON.stringify(s.decisions));
    assert.ok(compared("claim-status", ["agree", "tie"]) >= 3, JSON.stringify(s.decisions));
    assert.ok(compared("finalizer-removal", ["agree"]) >= 1, JSON.stringify(s.decisions));
    // One binding here may tie (a-claim-0 between a-pv-0 and d-small), no more.
    assert.ok(
      s.decisions.filter((d) => d.kind === "binding" && d.outcome === "tie").every((d) => d.count <= 1),
      JSON.stringify(s.decisions),
    );
    assert.deepEqual(s.unparsed, { count: 0, recent: [] });
    const metrics = (await shadow.get("/metrics")).body;
    assert.match(
      metrics,
      /^kvc_shadow_decisions_total\{controller="persistentvolume-binder-controller",kind="provisioning",outcome="kvc-only"\} [1-9]/m,
    );

    // kvc shadow report prints the same summary as a table.
    const tokenFile = join(cp.dir, "shadow-report-token");
    writeFileSync(tokenFile, cp.kubeConfig().getCurrentUser()?.token ?? "");
    const { stdout } = await promisify(execFile)(process.execPath, [
      "--import",
      "tsx",
      cli,
      "shadow",
      "report",
      `--server=https://127.0.0.1:${shadow.port}`,
      `--token-file=${tokenFile}`,
      "--insecure-skip-tls-verify",
    ]);
    assert.match(stdout, /^persistentvolume-binder-controller\s+provisioning\s+kvc-only\s+\d+$/m);
    assert.match(stdout, /kvc-only\s+provisioning pvc shadow-agree\/a-hostpath-claim/);
  });

  test("beside KCM, the decisions about the other claims and volumes agree or tie", () => {
    // Also where KCM's write reached kvc's informer before kvc synced the version KCM acted on: the
    // binder syncs that version too (syncEveryVersion), so it still says what kvc would have done.
    assert.deepEqual(unaffected, [], "the static claims and volumes: agree or tie only");
  });

  test("the shadow wrote nothing: no write of its User-Agent in the audit log", () => {
    // TokenReviews and SubjectAccessReviews (authenticating GET /shadow) change nothing in the cluster.
    const writes = writesBy(cp.auditLogPath, "kube-volume-controller/v", started).filter(
      (e) => !["tokenreviews", "subjectaccessreviews"].includes(e.objectRef?.resource ?? ""),
    );
    assert.deepEqual(writes, [], describeEvents(writes));
    // The audit log does record this kvc's requests: its reads are no writes, but its reviews are.
    assert.ok(
      writesBy(cp.auditLogPath, "kube-volume-controller", started).length > 0,
      "the audit log sees kvc's requests at all",
    );
  });
});
