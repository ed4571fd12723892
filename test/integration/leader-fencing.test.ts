import assert from "node:assert/strict";
import {
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { fileURLToPath } from "node:url";
import {
  CoordinationV1Api,
  CoreV1Api,
  KubernetesObjectApi,
  StorageV1Api,
  V1MicroTime,
} from "@kubernetes/client-node";
import { probe } from "../../src/controlplane/https-probe.js";
import { LocalControlPlane } from "../../src/controlplane/local-control-plane.js";
import { waitFor } from "../../src/util/wait.js";
import { TAINT_NODE_OUT_OF_SERVICE } from "../../src/attachdetach/reconciler.js";
import { mergePatch } from "../../src/runtime/client.js";
import { serviceAccountKubeconfig } from "../support/api.js";
import {
  createManagedNode,
  createPodWithClaim,
  nodeReportsAttached,
  podWithCSIVolumeOnManagedNode,
} from "../support/attach-detach.js";
import { describeEvents, writesBy } from "../support/audit.js";
import { killAllKvc, startKvc, type KvcProcess } from "../support/kvc-process.js";
import { manifestObjects } from "../support/manifests.js";
import { TcpProxy } from "../support/tcp-proxy.js";

/*
 * Fencing of a kvc leader, proven on the real apiserver: who wrote what comes from its audit log,
 * where each replica's User-Agent carries its leader identity.
 */

const ns = "default";
const FLEX_FIXTURE = fileURLToPath(new URL("../fixtures/flexvolume/fake-driver.sh", import.meta.url));
/** Short leader-election timings (lease > renew > 1.2 × retry), so takeovers take seconds. */
const FAST_ELECTION = [
  "--leader-elect-lease-duration=4s",
  "--leader-elect-renew-deadline=3s",
  "--leader-elect-retry-period=500ms",
];

/** Whether a process runs the executable in `dir` (its command line names it). */
function driverRunning(dir: string): boolean {
  return readdirSync("/proc").some((pid) => {
    if (!/^\d+$/.test(pid)) return false;
    try {
      return readFileSync(`/proc/${pid}/cmdline`, "utf8").includes(dir);
    } catch {
      return false; // gone meanwhile
    }
  });
}

describe("leader fencing on the real control plane", () => {
  let cp: LocalControlPlane;
  let coordination: CoordinationV1Api;
  let core: CoreV1Api;
  let storage: StorageV1Api;

  before(async () => {
    cp = await LocalControlPlane.start({ audit: true });
    coordination = cp.kubeConfig().makeApiClient(CoordinationV1Api);
    core = cp.kubeConfig().makeApiClient(CoreV1Api);
    storage = cp.kubeConfig().makeApiClient(StorageV1Api);
  });
  after(async () => {
    killAllKvc();
    await cp.stop();
  });

  const holder = async (lease: string) =>
    (await coordination.readNamespacedLease({ namespace: ns, name: lease })).spec?.holderIdentity ?? "";

  /** Waits until `lease` is held by someone other than `not`; returns the holder. */
  const heldBy = (lease: string, not = "", timeoutMs = 60_000) =>
    waitFor(
      async () => {
        try {
          const h = await holder(lease);
          return h && h !== not ? h : undefined;
        } catch {
          return undefined; // not created yet
        }
      },
      { timeoutMs, intervalMs: 50, what: `lease ${lease} to be held${not ? ` by another than ${not}` : ""}` },
    );

  const staticVolume = (name: string) =>
    core.createPersistentVolume({
      body: {
        metadata: { name },
        spec: {
          capacity: { storage: "1Gi" },
          accessModes: ["ReadWriteOnce"],
          storageClassName: name,
          hostPath: { path: `/tmp/kvc-it/${name}` },
        },
      },
    });
  const staticClaim = (name: string) =>
    core.createNamespacedPersistentVolumeClaim({
      namespace: ns,
      body: {
        metadata: { name },
        spec: {
          accessModes: ["ReadWriteOnce"],
          storageClassName: name,
          resources: { requests: { storage: "1Gi" } },
        },
      },
    });
  const staticPair = async (name: string) => {
    await staticVolume(name);
    await staticClaim(name);
  };

  test("a leader resumed after SIGSTOP past its lease writes nothing and exits non-zero", async () => {
    const lease = "kvc-fence-sigstop";
    const args = [
      `--leader-elect-resource-namespace=${ns}`,
      `--leader-elect-resource-name=${lease}`,
      // A renew deadline well above the time a resumed leader needs to re-read the Lease: giving up
      // at it (not at once) would show.
      "--leader-elect-lease-duration=8s",
      "--leader-elect-renew-deadline=6s",
      "--leader-elect-retry-period=500ms",
      "--pvclaimbinder-sync-period=1s",
    ];
    const a = await startKvc(cp.kubeconfigPath, args);
    const aIdentity = await heldBy(lease);
    await a.ready();
    // The standby runs no binder: whatever binding work appears while a is stopped is still there,
    // in a's cache, the moment a resumes.
    const b = await startKvc(cp.kubeconfigPath, [...args, "--controllers=pv-protection"]);
    await b.ready();

    a.child.kill("SIGSTOP");
    try {
      const bIdentity = await heldBy(lease, aIdentity, 30_000);
      assert.notEqual(bIdentity, aIdentity);
      // Plenty of binding work: decoding its watch events on resume delays the elector's Lease read,
      // so a leader without the gate does get writes out before it learns it lost.
      const pairs = Array.from({ length: 40 }, (_, i) => `fence-sigstop-${i}`);
      for (const name of pairs) await staticPair(name);
      const resumed = new Date();
      a.child.kill("SIGCONT");
      const [code] = await a.exited;
      const exitedAfterMs = Date.now() - resumed.getTime();
      assert.equal(code, 1, a.logs());
      assert.match(a.logs(), /leaderelection lost/);

      const writes = writesBy(cp.auditLogPath, aIdentity, resumed);
      assert.deepEqual(writes, [], `the old leader wrote after it resumed:\n${describeEvents(writes)}`);
      const claims = await core.listNamespacedPersistentVolumeClaim({ namespace: ns });
      const bound = claims.items.filter(
        (c) => c.metadata?.name?.startsWith("fence-sigstop") && c.spec?.volumeName,
      );
      assert.deepEqual(bound, [], "nobody bound a claim");
      console.log(`exited ${exitedAfterMs} ms after SIGCONT`);
      // Promptly: within the renew deadline (6 s) even on a starved machine; the audit log above is the
      // safety check.
      assert.ok(exitedAfterMs < 6_000, `exited ${exitedAfterMs} ms after SIGCONT (renew deadline 6 s)`);
      // The audit log does show the new leader's writes (its renewals) in the same window.
      await waitFor(() => writesBy(cp.auditLogPath, bIdentity, resumed).length > 0, {
        timeoutMs: 10_000,
        what: "the new leader's renewals in the audit log",
      });
    } finally {
      a.child.kill("SIGCONT");
      b.child.kill("SIGTERM");
      await b.exited;
    }
  });

  test("a warm standby syncs its informers, writes nothing, and binds at once after the leader's SIGTERM", async () => {
    const lease = "kvc-warm-standby";
    // A retry period longer than the whole test: after its first attempt the standby's next poll
    // would come a minute later, so only its watch of the Lease can see the release in time.
    const retryPeriodMs = 60_000;
    const args = [
      `--leader-elect-resource-namespace=${ns}`,
      `--leader-elect-resource-name=${lease}`,
      "--leader-elect-lease-duration=90s",
      "--leader-elect-renew-deadline=80s",
      `--leader-elect-retry-period=${retryPeriodMs / 1000}s`,
    ];
    const a = await startKvc(cp.kubeconfigPath, args);
    const aIdentity = await heldBy(lease);
    await a.ready();
    const since = new Date();
    const bStarted = performance.now();
    const b = await startKvc(cp.kubeconfigPath, args);
    try {
      // Ready means synced, for a standby too; the log line shows its informers did list and watch.
      await b.ready();
      assert.match((await b.get("/readyz?verbose")).body, /\[\+\]informer-sync ok/);
      await waitFor(() => b.logs().includes('"msg":"informers synced"'), {
        timeoutMs: 10_000,
        what: "the standby's informers to sync",
      });
      assert.equal(await holder(lease), aIdentity);
      // Work for the leader, seen by the standby's handlers too (they queue it, and must not act on
      // it): a claim to bind, and a pod on a managed node whose CSI volume needs attaching.
      const bound = (name: string) =>
        waitFor(
          async () =>
            (await core.readNamespacedPersistentVolumeClaim({ namespace: ns, name })).status?.phase ===
            "Bound",
          { timeoutMs: 30_000, what: `the leader to bind ${name}` },
        );
      await podWithCSIVolumeOnManagedNode(core, {
        name: "warm-standby-1",
        pod: "warm-standby-1",
        node: "warm-standby-node",
        driver: "warm.csi.example.com",
        handle: "warm-standby-1",
        bound,
      });
      await waitFor(
        async () =>
          (await storage.listVolumeAttachment()).items.some(
            (va) => va.spec.source.persistentVolumeName === "warm-standby-1",
          ),
        { timeoutMs: 30_000, what: "the leader to create the VolumeAttachment" },
      );
      // The standby's desired state holds the volume, its actual state nothing yet: it reports neither
      // (a sum over the replicas would alert KubeVolumeControllerDesiredNotAttached).
      const standbyMetrics = (await b.get("/metrics")).body;
      assert.doesNotMatch(
        standbyMetrics,
        /^attachdetach_controller_total_volumes\{[^}]*\} [1-9]/m,
        standbyMetrics,
      );
      const standbyWrites = () =>
        writesBy(cp.auditLogPath, "kube-volume-controller/", since).filter(
          (e) => !(e.userAgent ?? "").includes(aIdentity),
        );
      assert.deepEqual(standbyWrites(), [], `the standby wrote:\n${describeEvents(standbyWrites())}`);

      // The volume Available first: a claim synced before its volume is (a fresh term syncs both
      // queues at once) waits for the binder's resync, in KCM too.
      await staticVolume("warm-standby-2");
      await waitFor(
        async () =>
          (await core.readPersistentVolume({ name: "warm-standby-2" })).status?.phase === "Available",
        { timeoutMs: 30_000, what: "warm-standby-2 to be Available" },
      );
      const stopped = performance.now();
      a.child.kill("SIGTERM");
      await staticClaim("warm-standby-2");
      await waitFor(
        async () =>
          (await core.readNamespacedPersistentVolumeClaim({ namespace: ns, name: "warm-standby-2" })).status
            ?.phase === "Bound",
        { timeoutMs: 30_000, intervalMs: 50, what: "the new leader to bind warm-standby-2" },
      );
      const boundAfterMs = performance.now() - stopped;
      assert.equal((await a.exited)[0], 0, a.logs());
      assert.notEqual(await holder(lease), aIdentity);
      console.log(`warm standby bound a new claim ${boundAfterMs.toFixed(0)} ms after the leader's SIGTERM`);
      // The release was seen by the standby's watch: its first attempt was after bStarted, and a poll
      // (or the lease's expiry) would have come a retry period (60 s) after that at the earliest.
      const tookOverAfterStartMs = performance.now() - bStarted;
      assert.ok(
        tookOverAfterStartMs < retryPeriodMs,
        `bound ${tookOverAfterStartMs.toFixed(0)} ms after the standby started: not by its watch`,
      );
      // Each loop writes through its own client (its own rate limiter, as KCM's NewClient), named at
      // the end of its User-Agent.
      const clientsWriting = (resource: string, subresource?: string) =>
        new Set(
          writesBy(cp.auditLogPath, "kube-volume-controller/", since)
            .filter((e) => e.objectRef?.resource === resource && e.objectRef.subresource === subresource)
            .map((e) => e.userAgent?.split("/").at(-1)),
        );
      assert.deepEqual(clientsWriting("volumeattachments"), new Set(["attachdetach-controller"]));
      assert.deepEqual(
        clientsWriting("persistentvolumeclaims", "status"),
        new Set(["persistent-volume-binder", "pvc-protection-controller"]), // Bound; the Unused condition
      );
    } finally {
      a.child.kill("SIGKILL");
      b.child.kill("SIGTERM");
      await b.exited;
    }
  });

  test("a leader resumed after SIGSTOP past its lease runs no FlexVolume detach", async () => {
    const lease = "kvc-fence-flex";
    const flexDir = mkdtempSync(join(tmpdir(), "kvc-fence-flex-"));
    const driverDir = join(flexDir, "kvc~fence");
    mkdirSync(driverDir);
    copyFileSync(FLEX_FIXTURE, join(driverDir, "fence"));
    const calls = () =>
      existsSync(join(driverDir, ".calls.log"))
        ? readFileSync(join(driverDir, ".calls.log"), "utf8")
            .split("---\n")
            .filter((c) => c !== "")
            .map((c) => c.split("\n")[0])
        : [];
    // Out of service: the detach is forced, so no node GET precedes the driver call. The test is
    // then not a race between two reads after the resume: a leader without the gate on side effects
    // runs the driver in its first reconciler pass, before its elector's Lease read can answer.
    const node = "fence-flex-node";
    await createManagedNode(core, node, {
      spec: { taints: [{ key: TAINT_NODE_OUT_OF_SERVICE, value: "nodeshutdown", effect: "NoExecute" }] },
    });
    const claim = await core.createNamespacedPersistentVolumeClaim({
      namespace: ns,
      body: {
        metadata: { name: "fence-flex" },
        spec: {
          accessModes: ["ReadWriteOnce"],
          resources: { requests: { storage: "1Gi" } },
          volumeName: "fence-flex",
          storageClassName: "",
        },
      },
    });
    await core.createPersistentVolume({
      body: {
        metadata: { name: "fence-flex" },
        spec: {
          capacity: { storage: "1Gi" },
          accessModes: ["ReadWriteOnce"],
          storageClassName: "",
          claimRef: { namespace: ns, name: "fence-flex", uid: claim.metadata!.uid! },
          flexVolume: { driver: "kvc/fence" },
        },
      },
    });
    await core.patchNamespacedPersistentVolumeClaimStatus(
      { namespace: ns, name: "fence-flex", body: { status: { phase: "Bound" } } },
      mergePatch,
    );
    await createPodWithClaim(core, { namespace: ns, name: "fence-flex", node, claimName: "fence-flex" });

    const args = [
      `--leader-elect-resource-namespace=${ns}`,
      `--leader-elect-resource-name=${lease}`,
      "--leader-elect-lease-duration=8s",
      "--leader-elect-renew-deadline=6s",
      "--leader-elect-retry-period=500ms",
    ];
    const a = await startKvc(cp.kubeconfigPath, [
      ...args,
      "--controllers=attachdetach",
      `--flex-volume-plugin-dir=${flexDir}`,
    ]);
    const aIdentity = await heldBy(lease);
    await a.ready();
    // The standby runs no attach/detach controller: every driver call is the old leader's.
    const b = await startKvc(cp.kubeconfigPath, [...args, "--controllers=pv-protection"]);
    await b.ready();
    try {
      await nodeReportsAttached(core, node, "kvc/fence/fence-flex").catch((err: unknown) => {
        throw new Error(`${(err as Error).message}; the leader's log:\n${a.logs()}`);
      });
      // The pod goes; the driver fails the detach, which backs off (500 ms, doubling) and is due
      // again while the leader is stopped.
      writeFileSync(join(driverDir, ".mode"), "fail");
      await core.deleteNamespacedPod({ namespace: ns, name: "fence-flex", gracePeriodSeconds: 0 });
      // Failed, not only started: a driver call in flight when the leader stops is another case.
      await waitFor(() => a.logs().includes("DetachVolume.Detach failed"), {
        timeoutMs: 60_000,
        what: "a failed detach",
      });
      a.child.kill("SIGSTOP");
      writeFileSync(join(driverDir, ".mode"), "ok");
      const before = calls().length;
      assert.notEqual(await heldBy(lease, aIdentity, 30_000), aIdentity);
      const logged = a.logs().length;
      a.child.kill("SIGCONT");
      const [code] = await a.exited;
      assert.equal(code, 1, a.logs());
      assert.match(a.logs(), /leaderelection lost/);
      // It did try: the check below is not passing because nothing was due.
      assert.match(a.logs().slice(logged), /attacherDetacher\.DetachVolume started/, a.logs());
      // A driver it started may still be starting (the call is logged by the driver itself): wait
      // until none runs. spawn() returns once the driver is exec'd, so one started is seen here.
      await waitFor(() => !driverRunning(driverDir), { timeoutMs: 30_000, what: "the driver calls to end" });
      const acted = calls()
        .slice(before)
        .filter((c) => c === "attach" || c === "detach");
      assert.deepEqual(acted, [], `the old leader ran its driver after it resumed:\n${a.logs()}`);
    } finally {
      a.child.kill("SIGCONT");
      b.child.kill("SIGTERM");
      await b.exited;
      rmSync(flexDir, { recursive: true, force: true });
    }
  });

  test("a lost lease ends the process at once, without releasing", async () => {
    const lease = "kvc-fence-lost";
    // A renew deadline far above the retry period: giving up at it (not at once) would show.
    const kvc = await startKvc(cp.kubeconfigPath, [
      `--leader-elect-resource-namespace=${ns}`,
      `--leader-elect-resource-name=${lease}`,
      "--leader-elect-lease-duration=12s",
      "--leader-elect-renew-deadline=10s",
      "--leader-elect-retry-period=500ms",
    ]);
    await heldBy(lease);
    await kvc.ready();
    let taken: Date | undefined;
    await waitFor(
      async () => {
        const l = await coordination.readNamespacedLease({ namespace: ns, name: lease });
        l.spec!.holderIdentity = "someone-else";
        l.spec!.renewTime = new V1MicroTime(Date.now());
        await coordination.replaceNamespacedLease({ namespace: ns, name: lease, body: l });
        taken = new Date();
        return true;
      },
      { timeoutMs: 30_000, intervalMs: 20, what: "the lease to be taken over" },
    );
    const [code] = await kvc.exited;
    const exitedAfterMs = Date.now() - taken!.getTime();
    assert.equal(code, 1, kvc.logs());
    console.log(`exited ${exitedAfterMs} ms after the takeover`);
    // At once, because it saw the other holder (not at the renew deadline, 10 s): the cause says so.
    assert.match(
      kvc.logs(),
      /"holder":"someone-else"[^\n]*"msg":"lease is held by another replica: leadership lost"/,
    );
    assert.ok(exitedAfterMs < 10_000, `exited ${exitedAfterMs} ms after the takeover (renew deadline 10 s)`);
    assert.equal(await holder(lease), "someone-else");
    // No write check here: a takeover forced by writing the Lease (unlike a candidate, which waits out
    // the lease) leaves kvc's writes admitted until its next renewal finds it; the SIGSTOP test covers it.
  });

  test("a replica forbidden its Lease logs why once and fails /readyz with the reason, until RBAC is fixed", async () => {
    // The shipped RBAC allows the Lease in the kube-volume-controller namespace only.
    const objects = KubernetesObjectApi.makeApiClient(cp.kubeConfig());
    for (const o of manifestObjects().filter((o) => o.kind !== "Deployment")) await objects.create(o);
    const kubeconfig = await serviceAccountKubeconfig(cp, "kube-volume-controller", "kube-volume-controller");
    const kvc = await startKvc(kubeconfig, [
      `--leader-elect-resource-namespace=${ns}`,
      "--leader-elect-resource-name=kube-volume-controller",
      ...FAST_ELECTION,
    ]);
    // An authenticated client (here the ServiceAccount's own token) is told why; an anonymous one is not.
    const forbidden = await waitFor(
      async () => {
        const r = await kvc.get("/readyz?verbose");
        return r.status === 500 && r.body.includes("[-]leader-election-lease failed") ? r.body : undefined;
      },
      { timeoutMs: 30_000, intervalMs: 100, what: "/readyz to fail on the Lease" },
    );
    const anonymous = await probe(kvc.url("/readyz?verbose"));
    assert.match(anonymous.body, /^\[-\]leader-election-lease failed: reason withheld$/m, anonymous.body);
    assert.match(
      forbidden,
      /\[-\]leader-election-lease failed: lease default\/kube-volume-controller: error retrieving lease lock: leases\.coordination\.k8s\.io "kube-volume-controller" is forbidden: User "system:serviceaccount:kube-volume-controller:kube-volume-controller" cannot get resource "leases"/,
    );
    // Five refused attempts later, the cause is still logged once.
    await waitFor(
      async () => {
        const m = /^rest_client_requests_total\{code="403",method="GET",[^}]*\} (\d+)$/m.exec(
          // The ServiceAccount may not read /metrics; the admin may.
          (await kvc.get("/metrics", cp.kubeConfig().getCurrentUser()?.token)).body,
        );
        return Number(m?.[1] ?? 0) >= 5;
      },
      { timeoutMs: 30_000, intervalMs: 100, what: "five refused Lease reads" },
    );
    // The refusal's lines only: a read timing out on a starved machine is another cause, logged once too.
    const logged = () =>
      kvc
        .logs()
        .split("\n")
        .filter(
          (line) => line.includes('"msg":"error retrieving lease lock"') && line.includes("is forbidden"),
        ).length;
    assert.equal(logged(), 1, kvc.logs());

    // Fixing the RBAC (the Role in the Lease's namespace) makes it ready again, by itself.
    for (const o of manifestObjects().filter((o) => o.kind === "Role" || o.kind === "RoleBinding")) {
      await objects.create({ ...o, metadata: { ...o.metadata, namespace: ns } });
    }
    await kvc.ready(30_000);
    assert.equal(logged(), 1, kvc.logs());
    assert.match(kvc.logs(), /lease is accessible again/);
    kvc.child.kill("SIGTERM");
    assert.equal((await kvc.exited)[0], 0, kvc.logs());
  });

  test("a request the apiserver never answers times out and is retried", async () => {
    const proxy = await TcpProxy.start(cp.apiserverPort);
    let kvcs: KvcProcess[] = [];
    try {
      proxy.mode = "blackhole";
      const master = `--master=https://127.0.0.1:${proxy.port}`;
      // With leader election, the Lease requests (deadline: the renew deadline); without, informer lists.
      const leader = await startKvc(cp.kubeconfigPath, [
        master,
        // Its informers list from the start too (warm standby): their lists, cut off with the path,
        // must come back in time for the ready() below.
        "--kube-api-request-timeout=1s",
        `--leader-elect-resource-namespace=${ns}`,
        "--leader-elect-resource-name=kvc-fence-hung",
        ...FAST_ELECTION,
      ]);
      const plain = await startKvc(cp.kubeconfigPath, [
        master,
        "--leader-elect=false",
        "--kube-api-request-timeout=1s",
      ]);
      kvcs = [leader, plain];
      const timedOut = (kvc: KvcProcess, ms: number) =>
        waitFor(() => kvc.logs().includes(`no answer within ${ms} ms`), {
          // kvc starts in seconds, but the test machine may be loaded.
          timeoutMs: 60_000,
          what: `a request to time out after ${ms} ms`,
        }).catch((err: unknown) => {
          throw new Error(`${(err as Error).message}; its log:\n${kvc.logs()}`);
        });
      await timedOut(leader, 3000);
      await timedOut(plain, 1000);
      const body = (await leader.get("/readyz?verbose")).body;
      assert.match(body, /\[-\]leader-election-lease failed: .*no answer within 3000 ms/, body);

      // The path comes back (for new connections): both retry, and get there.
      proxy.mode = "forward";
      await Promise.all(kvcs.map((k) => k.ready(30_000)));
      assert.ok(await heldBy("kvc-fence-hung"));
      for (const k of kvcs) {
        k.child.kill("SIGTERM");
        assert.equal((await k.exited)[0], 0, k.logs());
      }
    } finally {
      for (const k of kvcs) k.child.kill("SIGKILL");
      await proxy.close();
    }
  });
});
