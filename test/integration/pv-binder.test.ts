import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import {
  CoreV1Api,
  StorageV1Api,
  type V1PersistentVolume,
  type V1PersistentVolumeClaim,
} from "@kubernetes/client-node";
import { LocalControlPlane } from "../../src/controlplane/local-control-plane.js";
import { waitFor } from "../../src/util/wait.js";
import { waitGone } from "../support/api.js";
import { BINDER_FLAGS, killAllKvc, startKvc, type KvcProcess } from "../support/kvc-process.js";

/** Objects per scenario, as upstream's KUBE_INTEGRATION_PV_OBJECTS. */
const N = Number(process.env.KVC_INTEGRATION_PV_OBJECTS ?? 100);
const TIMEOUT_MS = 60_000 + N * 1_000;

function volume(
  name: string,
  size: string,
  extra: Partial<V1PersistentVolume["spec"]> = {},
  labels = {},
): V1PersistentVolume {
  return {
    metadata: { name, labels },
    spec: {
      capacity: { storage: size },
      accessModes: ["ReadWriteOnce"],
      persistentVolumeReclaimPolicy: "Retain",
      storageClassName: "",
      hostPath: { path: `/tmp/kvc-it/${name}` },
      ...extra,
    },
  };
}

function claim(
  namespace: string,
  name: string,
  size: string,
  spec: Partial<V1PersistentVolumeClaim["spec"]> = {},
): V1PersistentVolumeClaim {
  return {
    metadata: { name, namespace },
    spec: {
      accessModes: ["ReadWriteOnce"],
      resources: { requests: { storage: size } },
      storageClassName: "",
      ...spec,
    },
  };
}

describe("PV binder on the real control plane (ports of upstream's persistent_volumes_test.go)", () => {
  let cp: LocalControlPlane;
  let core: CoreV1Api;
  let storage: StorageV1Api;
  let kvc: KvcProcess;
  let nsCount = 0;

  before(async () => {
    cp = await LocalControlPlane.start();
    core = cp.kubeConfig().makeApiClient(CoreV1Api);
    storage = cp.kubeConfig().makeApiClient(StorageV1Api);
    kvc = await startKvc(cp.kubeconfigPath, BINDER_FLAGS);
    await kvc.ready();
  });
  after(async () => {
    killAllKvc();
    await cp.stop();
  });

  async function namespace(): Promise<string> {
    const name = `pvb-${++nsCount}`;
    await core.createNamespace({ body: { metadata: { name } } });
    return name;
  }

  async function boundClaim(ns: string, name: string): Promise<V1PersistentVolumeClaim> {
    return waitFor(
      async () => {
        const c = await core.readNamespacedPersistentVolumeClaim({ namespace: ns, name });
        return c.status?.phase === "Bound" ? c : undefined;
      },
      {
        timeoutMs: TIMEOUT_MS,
        what: `claim ${ns}/${name} to be Bound (kvc logs: ${kvc.logs().slice(-2000)})`,
      },
    );
  }

  async function boundVolume(name: string): Promise<V1PersistentVolume> {
    return waitFor(
      async () => {
        const v = await core.readPersistentVolume({ name });
        return v.status?.phase === "Bound" ? v : undefined;
      },
      { timeoutMs: TIMEOUT_MS, what: `volume ${name} to be Bound` },
    );
  }

  test("a pre-created PV and PVC bind both ways (bind-completed, bound-by-controller, claimRef uid)", async () => {
    const ns = await namespace();
    await core.createPersistentVolume({ body: volume("static-pv", "1Gi") });
    await core.createNamespacedPersistentVolumeClaim({ namespace: ns, body: claim(ns, "static", "1Gi") });
    const c = await boundClaim(ns, "static");
    assert.equal(c.spec?.volumeName, "static-pv");
    assert.equal(c.metadata?.annotations?.["pv.kubernetes.io/bind-completed"], "yes");
    assert.equal(c.metadata?.annotations?.["pv.kubernetes.io/bound-by-controller"], "yes");
    assert.equal(c.status?.capacity?.storage, "1Gi");
    const v = await boundVolume("static-pv");
    assert.equal(v.spec?.claimRef?.uid, c.metadata?.uid);
    assert.equal(v.metadata?.annotations?.["pv.kubernetes.io/bound-by-controller"], "yes");
  });

  test("MultiPVs: N PVs of 1..N Gi, one claim of N/2 Gi binds exactly the N/2 Gi PV", async () => {
    const ns = await namespace();
    for (let i = 1; i <= N; i++) {
      await core.createPersistentVolume({
        body: volume(`multi-${i}`, `${i}Gi`, { storageClassName: "multi" }),
      });
    }
    const half = Math.max(1, Math.floor(N / 2));
    await core.createNamespacedPersistentVolumeClaim({
      namespace: ns,
      body: claim(ns, "multi", `${half}Gi`, { storageClassName: "multi" }),
    });
    const c = await boundClaim(ns, "multi");
    assert.equal(c.spec?.volumeName, `multi-${half}`);
    const bound = (await core.listPersistentVolume()).items.filter(
      (v) => v.spec?.storageClassName === "multi" && v.status?.phase === "Bound",
    );
    assert.deepEqual(
      bound.map((v) => v.metadata?.name),
      [`multi-${half}`],
    );
  });

  test("ClaimLabelSelector (+MatchExpressions): only the PV whose labels match binds", async () => {
    const ns = await namespace();
    await core.createPersistentVolume({
      body: volume("sel-good", "10G", { storageClassName: "sel" }, { foo: "valA", bar: "" }),
    });
    await core.createPersistentVolume({
      body: volume("sel-bad", "10G", { storageClassName: "sel" }, { foo: "valB", baz: "" }),
    });
    await core.createNamespacedPersistentVolumeClaim({
      namespace: ns,
      body: claim(ns, "sel", "10G", {
        storageClassName: "sel",
        selector: {
          matchLabels: { foo: "valA" },
          matchExpressions: [
            { key: "foo", operator: "In", values: ["valA"] },
            { key: "baz", operator: "DoesNotExist" },
            { key: "bar", operator: "Exists" },
          ],
        },
      }),
    });
    const c = await boundClaim(ns, "sel");
    assert.equal(c.spec?.volumeName, "sel-good");
    // The claim may bind before the volume worker has made sel-bad Available (matching does not
    // look at the phase): wait for that, then it must still be unbound.
    const bad = await waitFor(
      async () => {
        const pv = await core.readPersistentVolume({ name: "sel-bad" });
        return pv.status?.phase === "Available" && pv;
      },
      { timeoutMs: TIMEOUT_MS, what: "sel-bad to be Available" },
    );
    assert.equal(bad.spec?.claimRef, undefined);
  });

  test("BindRace: of N claims, the one a PV is pre-bound to by name gets it", async () => {
    const ns = await namespace();
    const target = `race-${Math.floor(N / 2)}`;
    for (let i = 0; i <= N; i++) {
      await core.createNamespacedPersistentVolumeClaim({
        namespace: ns,
        body: claim(ns, `race-${i}`, "5Gi", { storageClassName: "race" }),
      });
    }
    await core.createPersistentVolume({
      body: volume("race-pv", "5Gi", {
        storageClassName: "race",
        claimRef: { kind: "PersistentVolumeClaim", namespace: ns, name: target },
      }),
    });
    const c = await boundClaim(ns, target);
    assert.equal(c.spec?.volumeName, "race-pv");
    const v = await boundVolume("race-pv");
    assert.equal(v.spec?.claimRef?.name, target);
    assert.equal(v.spec?.claimRef?.uid, c.metadata?.uid);
  });

  test("MultiPVsDiffAccessModes: an RWX claim gets the RWX PV, an RWO claim the RWO one", async () => {
    const ns = await namespace();
    await core.createPersistentVolume({ body: volume("am-rwo", "5Gi", { storageClassName: "am" }) });
    await core.createPersistentVolume({
      body: volume("am-rwx", "5Gi", { storageClassName: "am", accessModes: ["ReadWriteMany"] }),
    });
    await core.createNamespacedPersistentVolumeClaim({
      namespace: ns,
      body: claim(ns, "rwx", "5Gi", { storageClassName: "am", accessModes: ["ReadWriteMany"] }),
    });
    assert.equal((await boundClaim(ns, "rwx")).spec?.volumeName, "am-rwx");
    await core.createNamespacedPersistentVolumeClaim({
      namespace: ns,
      body: claim(ns, "rwo", "5Gi", { storageClassName: "am" }),
    });
    assert.equal((await boundClaim(ns, "rwo")).spec?.volumeName, "am-rwo");
  });

  test("ProvisionMultiPVCs: N claims of a hostPath class are provisioned and bound; deleting them deletes the PVs", async () => {
    const ns = await namespace();
    await storage.createStorageClass({
      body: {
        metadata: { name: "hostpath-it" },
        provisioner: "kubernetes.io/host-path",
        reclaimPolicy: "Delete",
      },
    });
    for (let i = 0; i < N; i++) {
      await core.createNamespacedPersistentVolumeClaim({
        namespace: ns,
        body: claim(ns, `prov-${i}`, "1Gi", { storageClassName: "hostpath-it" }),
      });
    }
    const names: string[] = [];
    for (let i = 0; i < N; i++) {
      const c = await boundClaim(ns, `prov-${i}`);
      assert.equal(c.spec?.volumeName, `pvc-${c.metadata?.uid ?? ""}`);
      names.push(c.spec?.volumeName ?? "");
    }
    const pv = await core.readPersistentVolume({ name: names[0]! });
    assert.equal(pv.metadata?.annotations?.["pv.kubernetes.io/provisioned-by"], "kubernetes.io/host-path");
    for (let i = 0; i < N; i++) {
      await core.deleteNamespacedPersistentVolumeClaim({ namespace: ns, name: `prov-${i}` });
    }
    for (const name of names)
      await waitGone(`provisioned PV ${name}`, () => core.readPersistentVolume({ name }), TIMEOUT_MS);
  });

  test("RetroactiveStorageClassAssignment: class-less claims get the default class once one exists", async () => {
    const ns = await namespace();
    const body = claim(ns, "retro", "1Gi");
    delete body.spec!.storageClassName;
    await core.createNamespacedPersistentVolumeClaim({ namespace: ns, body });
    await storage.createStorageClass({
      body: {
        metadata: {
          name: "retro-default",
          annotations: { "storageclass.kubernetes.io/is-default-class": "true" },
        },
        provisioner: "example.com/none",
      },
    });
    try {
      await waitFor(
        async () =>
          (await core.readNamespacedPersistentVolumeClaim({ namespace: ns, name: "retro" })).spec
            ?.storageClassName === "retro-default",
        { timeoutMs: TIMEOUT_MS, what: "the default class to be assigned" },
      );
    } finally {
      await storage.deleteStorageClass({ name: "retro-default" });
    }
  });

  test("/metrics serves the binder's pv_collector gauges, counted from its cache", async () => {
    const ns = await namespace();
    const pvName = `${ns}-metrics`;
    await core.createPersistentVolume({ body: volume(pvName, "1Gi") });
    await core.createNamespacedPersistentVolumeClaim({
      namespace: ns,
      body: claim(ns, "metrics", "1Gi", { volumeName: pvName }),
    });
    await boundClaim(ns, "metrics");
    const line = `pv_collector_bound_pvc_count{namespace="${ns}",storage_class="",volume_attributes_class=""} 1`;
    const body = await waitFor(
      async () => {
        const res = await kvc.get("/metrics");
        return res.status === 200 && res.body.split("\n").includes(line) ? res.body : undefined;
      },
      { timeoutMs: TIMEOUT_MS, what: `/metrics to show ${line}` },
    );
    for (const name of [
      "pv_collector_total_pv_count",
      "volume_operation_total_seconds",
      "retroactive_storageclass_total",
    ]) {
      assert.match(body, new RegExp(`^# TYPE ${name} `, "m"));
    }
  });
});
