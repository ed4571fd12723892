import assert from "node:assert/strict";
import { spawn, type ChildProcess } from "node:child_process";
import { once } from "node:events";
import { after, before, describe, test } from "node:test";
import { fileURLToPath } from "node:url";
import { CoordinationV1Api, CoreV1Api, V1MicroTime } from "@kubernetes/client-node";
import { probe } from "../../src/controlplane/https-probe.js";
import { LocalControlPlane } from "../../src/controlplane/local-control-plane.js";
import { freePort } from "../../src/controlplane/ports.js";
import { isNotFound } from "../../src/runtime/api-errors.js";
import { waitFor } from "../../src/util/wait.js";

const cli = fileURLToPath(new URL("../../src/cli.ts", import.meta.url));

describe("kvc run on the real control plane", () => {
  let cp: LocalControlPlane;
  let coordination: CoordinationV1Api;
  const children: ChildProcess[] = [];

  before(async () => {
    cp = await LocalControlPlane.start();
    coordination = cp.kubeConfig().makeApiClient(CoordinationV1Api);
  });
  after(async () => {
    for (const c of children) c.kill("SIGKILL");
    await cp.stop();
  });

  async function startKvc(lease: string, ...extra: string[]) {
    const port = await freePort();
    const child = spawn(
      process.execPath,
      [
        "--import",
        "tsx",
        cli,
        "run",
        `--kubeconfig=${cp.kubeconfigPath}`,
        "--bind-address=127.0.0.1",
        `--secure-port=${port}`,
        "--leader-elect-resource-namespace=default",
        `--leader-elect-resource-name=${lease}`,
        ...extra,
      ],
      { stdio: ["ignore", "ignore", "pipe"] },
    );
    children.push(child);
    let logs = "";
    child.stderr.on("data", (c: Buffer) => (logs += c.toString()));
    const exited = once(child, "exit") as Promise<[number | null, string | null]>;
    return {
      child,
      port,
      exited,
      logs: () => logs,
      url: (path: string) => `http://127.0.0.1:${port}${path}`,
    };
  }

  test("serves health and metrics, holds its Lease, and releases it on SIGTERM", async () => {
    const kvc = await startKvc("kvc-run-test");
    await waitFor(async () => (await probe(kvc.url("/readyz"))).status === 200, {
      timeoutMs: 60_000,
      what: "/readyz to pass",
    });
    const healthz = await probe(kvc.url("/healthz?verbose"));
    assert.equal(healthz.status, 200);
    assert.match(healthz.body, /\[\+\]leaderElection ok/);
    const lease = await coordination.readNamespacedLease({ namespace: "default", name: "kvc-run-test" });
    assert.match(lease.spec?.holderIdentity ?? "", /_/);
    const metrics = (await probe(kvc.url("/metrics"))).body;
    assert.match(metrics, /^leader_election_master_status\{name="kvc-run-test"\} 1$/m);
    assert.match(
      metrics,
      /^rest_client_requests_total\{code="200",method="PUT",host="127\.0\.0\.1:\d+"\} \d+$/m,
    );

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
    const gone = async (read: () => Promise<unknown>) => {
      try {
        await read();
        return false;
      } catch (err) {
        if (isNotFound(err)) return true;
        throw err;
      }
    };
    await waitFor(
      () =>
        gone(() => core.readNamespacedPersistentVolumeClaim({ namespace: "default", name: "run-unused" })),
      {
        timeoutMs: 60_000,
        what: "the unused PVC's protection finalizer to be removed",
      },
    );
    await waitFor(() => gone(() => core.readPersistentVolume({ name: "run-unbound" })), {
      timeoutMs: 60_000,
      what: "the unbound PV's protection finalizer to be removed",
    });
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
