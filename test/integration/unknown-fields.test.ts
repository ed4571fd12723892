import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { CoreV1Api } from "@kubernetes/client-node";
import { LocalControlPlane } from "../../src/controlplane/local-control-plane.js";
import { ApiClients } from "../../src/runtime/client.js";
import { waitFor } from "../../src/util/wait.js";
import { BINDER_FLAGS, killAllKvc, startKvc } from "../support/kvc-process.js";

/*
 * kvc writes PVs and claims back whole (PUT). A field the API has and client-node's models lack must
 * survive: PersistentVolumeClaimStatus.healthStatus (v1.37, gate CSIVolumeHealth) is one, against
 * client-node 2.0.1. Before model-codec, binding the claim erased it. managedFields, which kvc does not
 * keep, must survive too.
 */
describe("fields client-node's models lack survive kvc's writes", () => {
  let cp: LocalControlPlane;
  let core: CoreV1Api;

  before(async () => {
    cp = await LocalControlPlane.start({ apiserverArgs: ["--feature-gates=CSIVolumeHealth=true"] });
    core = cp.kubeConfig().makeApiClient(CoreV1Api);
  });
  after(async () => {
    killAllKvc();
    await cp.stop();
  });

  test("a claim's status.healthStatus, across its binding (PUTs of the claim and its status)", async () => {
    const healthStatus = {
      healthConditions: [{ status: "Degraded", reason: "SlowIO", message: "latency above 1s" }],
      lastTransitionTime: "2026-12-04T10:00:00Z",
    };
    await core.createPersistentVolume({
      body: {
        metadata: { name: "v" },
        spec: {
          capacity: { storage: "1Gi" },
          accessModes: ["ReadWriteOnce"],
          storageClassName: "",
          hostPath: { path: "/tmp/kvc-it/unknown-fields" },
        },
      },
    });
    await core.createNamespacedPersistentVolumeClaim({
      namespace: "default",
      body: {
        metadata: { name: "c" },
        spec: {
          accessModes: ["ReadWriteOnce"],
          resources: { requests: { storage: "1Gi" } },
          storageClassName: "",
        },
      },
    });
    // As JSON: client-node's models would drop the field from the request.
    const clients = new ApiClients(cp.kubeConfig(), { qps: -1, burst: 0 });
    const path = "/api/v1/namespaces/default/persistentvolumeclaims/c";
    const created = (await clients.requestJson("GET", path)) as { status?: object };
    created.status = { ...created.status, healthStatus };
    await clients.requestJson("PUT", `${path}/status`, { body: created });
    type Raw = { metadata?: { managedFields?: { manager?: string; subresource?: string }[] } };
    const managers = (o: Raw) =>
      (o.metadata?.managedFields ?? []).map((f) => `${f.manager ?? ""} ${f.subresource ?? ""}`).sort();
    const before = managers((await clients.requestJson("GET", path)) as Raw);
    assert.ok(before.length > 0);
    const kvc = await startKvc(cp.kubeconfigPath, BINDER_FLAGS);
    await kvc.ready();
    await waitFor(
      async () =>
        (await core.readNamespacedPersistentVolumeClaim({ namespace: "default", name: "c" })).status
          ?.phase === "Bound",
      { timeoutMs: 60_000, what: "claim c Bound" },
    );
    // Read as JSON: client-node's typed read would drop the field itself.
    const raw = (await clients.requestJson("GET", path)) as { status?: { healthStatus?: unknown } };
    assert.deepEqual(raw.status?.healthStatus, healthStatus);
    // kvc keeps no managedFields (trimManagedFields) and PUTs without them: the apiserver keeps the
    // object's own and adds kvc's.
    const after = managers(raw as Raw);
    assert.ok(
      before.every((m) => after.includes(m)),
      `managedFields before ${JSON.stringify(before)}, after ${JSON.stringify(after)}`,
    );
    assert.ok(after.length > before.length, "kvc's own update is recorded");
  });
});
