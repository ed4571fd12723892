import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { CoordinationV1Api, CoreV1Api, V1MicroTime } from "@kubernetes/client-node";
import { LocalControlPlane } from "../../src/controlplane/local-control-plane.js";
import { waitGone } from "../support/api.js";
import { killAllKvc, startKvc as startKvcProcess } from "../support/kvc-process.js";
import { waitFor } from "../../src/util/wait.js";

describe("kvc run on the real control plane", () => {
  let cp: LocalControlPlane;
  let coordination: CoordinationV1Api;

  before(async () => {
    cp = await LocalControlPlane.start();
    coordination = cp.kubeConfig().makeApiClient(CoordinationV1Api);
  });
  after(async () => {
    killAllKvc();
    await cp.stop();
  });

  const startKvc = (lease: string, ...extra: string[]) =>
    startKvcProcess(cp.kubeconfigPath, [
      "--leader-elect-resource-namespace=default",
      `--leader-elect-resource-name=${lease}`,
      ...extra,
    ]);

  test("serves health and metrics, holds its Lease, and releases it on SIGTERM", async () => {
    const kvc = await startKvc("kvc-run-test");
    await kvc.ready();
    const healthz = await kvc.get("/healthz?verbose");
    assert.equal(healthz.status, 200);
    assert.match(healthz.body, /\[\+\]leaderElection ok/);
    // A standby is ready too: wait for the lease to be held before looking at the leader's metrics.
    const lease = await waitFor(
      async () => {
        const l = await coordination.readNamespacedLease({ namespace: "default", name: "kvc-run-test" });
        return l.spec?.holderIdentity ? l : undefined;
      },
      { timeoutMs: 30_000, what: "kvc to hold its lease" },
    );
    assert.match(lease.spec?.holderIdentity ?? "", /_/);
    // The first renewal (a PUT) comes one retry period after the lease was created (a POST).
    const renewed = /^rest_client_requests_total\{code="200",method="PUT",host="127\.0\.0\.1:\d+"\} \d+$/m;
    const metrics = await waitFor(
      async () => {
        const body = (await kvc.get("/metrics")).body;
        return renewed.test(body) ? body : undefined;
      },
      { timeoutMs: 30_000, what: "kvc to renew its lease" },
    );
    assert.match(metrics, /^leader_election_master_status\{name="kvc-run-test"\} 1$/m);

    // JSON logs in Kubernetes' shape
    const line = kvc
      .logs()
      .split("\n")
      .find((l) => l.includes("started leading"));
    assert.ok(line, kvc.logs());
    const entry = JSON.parse(line) as Record<string, unknown>;
    assert.equal(typeof entry.ts, "number");
    assert.equal(entry.msg, "started leading");

    kvc.child.kill("SIGTERM");
    const [code] = await kvc.exited;
    assert.equal(code, 0, kvc.logs());
    const released = await coordination.readNamespacedLease({ namespace: "default", name: "kvc-run-test" });
    assert.equal(released.spec?.holderIdentity ?? "", "", "the lease is released for a standby");
  });

  test("runs the protection controllers: unused claims and unbound volumes can be deleted", async () => {
    const kvc = await startKvc("kvc-run-protection");
    // Ready means leading with synced informers: this replica, not another, removes the finalizers.
    await kvc.ready();
    await waitFor(
      async () =>
        (await kvc.get("/metrics")).body.includes(
          'leader_election_master_status{name="kvc-run-protection"} 1',
        ),
      { timeoutMs: 30_000, what: "kvc to lead" },
    );
    const core = cp.kubeConfig().makeApiClient(CoreV1Api);
    await core.createNamespacedPersistentVolumeClaim({
      namespace: "default",
      body: {
        metadata: { name: "run-unused" },
        spec: { accessModes: ["ReadWriteOnce"], resources: { requests: { storage: "1Gi" } } },
      },
    });
    await core.createPersistentVolume({
      body: {
        metadata: { name: "run-unbound" },
        spec: { capacity: { storage: "1Gi" }, accessModes: ["ReadWriteOnce"], hostPath: { path: "/tmp/x" } },
      },
    });
    await core.deleteNamespacedPersistentVolumeClaim({ namespace: "default", name: "run-unused" });
    await core.deletePersistentVolume({ name: "run-unbound" });
    await waitGone("the unused PVC", () =>
      core.readNamespacedPersistentVolumeClaim({ namespace: "default", name: "run-unused" }),
    );
    await waitGone("the unbound PV", () => core.readPersistentVolume({ name: "run-unbound" }));
    kvc.child.kill("SIGTERM");
    assert.equal((await kvc.exited)[0], 0, kvc.logs());
  });

  test("losing the lease exits non-zero", async () => {
    const kvc = await startKvc(
      "kvc-run-lost",
      "--leader-elect-lease-duration=3s",
      "--leader-elect-renew-deadline=2s",
      "--leader-elect-retry-period=500ms",
    );
    await waitFor(
      async () => {
        const l = await coordination.readNamespacedLease({ namespace: "default", name: "kvc-run-lost" });
        return l.spec?.holderIdentity ? l : undefined;
      },
      { timeoutMs: 60_000, what: "kvc to take the lease" },
    );
    // Another holder takes the lease over (retrying on conflicts with kvc's own renewals); kvc can no
    // longer renew and must give up within its renew deadline.
    await waitFor(
      async () => {
        const l = await coordination.readNamespacedLease({ namespace: "default", name: "kvc-run-lost" });
        l.spec!.holderIdentity = "someone-else";
        l.spec!.renewTime = new V1MicroTime(Date.now());
        await coordination.replaceNamespacedLease({ namespace: "default", name: "kvc-run-lost", body: l });
        return true;
      },
      { timeoutMs: 30_000, intervalMs: 20, what: "the lease to be taken over" },
    );
    const [code] = await kvc.exited;
    assert.equal(code, 1, kvc.logs());
    assert.match(kvc.logs(), /leaderelection lost/);
  });
});
