/**
 * Failover (issue 30 goal 1): on one control plane holding the mixed cluster of bench/memory.ts
 * (--mode=mixed: 1,000 nodes, 30,000 pods, 5,000 bound pairs; --quick: 100, 3,000, 500), kvc then
 * upstream KCM, each as two replicas with the four volume loops, the same flags and client limits,
 * and default leader election (15 s lease, 10 s renew deadline, 2 s retry):
 *   fresh start  a first replica started with a new claim (and an Available volume for it) and a new
 *                pod waiting: seconds from its start to the claim Bound and to the pod's
 *                VolumeAttachment created (its first decisions);
 *   SIGTERM      a second replica, standby, then the leader SIGTERMed and at that moment a new claim
 *                and a new pod created: seconds until the claim is Bound and the VolumeAttachment
 *                exists;
 *   SIGKILL      a third replica, standby, then the leader SIGKILLed, the same: seconds after the
 *                fault, and beyond the lease (after the last renewal + the lease duration, when a
 *                standby may take over at the earliest) and after the new leader's acquireTime.
 * After SIGTERM, also when the Lease stopped naming the old leader (kvc releases it at shutdown, KCM
 * lets it expire). Also the standby's RSS and the watches it holds on the apiserver (apiserver_longrunning_requests
 * before and after it started). The new pods mount bound claims no pod mounts yet (their CSI volumes
 * need a VolumeAttachment); no attacher answers, so the VolumeAttachment's existence is the decision.
 * kvc runs compiled (dist/, `npm run build`) with the image's Node options. Prints markdown; asserts nothing.
 *   npm run bench:failover [-- --quick] [-- --nodes=1000 --pods=30000 --claims=5000]
 */
import { readFileSync } from "node:fs";
import { parseArgs } from "node:util";
import { CoordinationV1Api, CoreV1Api, StorageV1Api } from "@kubernetes/client-node";
import { probe } from "../src/controlplane/https-probe.js";
import { LocalControlPlane } from "../src/controlplane/local-control-plane.js";
import { mergePatch } from "../src/runtime/client.js";
import { waitFor } from "../src/util/wait.js";
import { createMixedCluster, podMountingUnmountedClaim, type MixedClusterSize } from "./mixed-cluster.js";
import {
  ALL_LOOPS,
  benchClients,
  rssMiB,
  startVolumeLoops,
  type Impl,
  type StartedController,
} from "./support.js";

const { values } = parseArgs({
  options: {
    quick: { type: "boolean", default: false },
    nodes: { type: "string" },
    pods: { type: "string" },
    claims: { type: "string" },
  },
});
const defaults = values.quick
  ? { nodes: 100, pods: 3000, claims: 500 }
  : { nodes: 1000, pods: 30_000, claims: 5000 };
const size: MixedClusterSize = {
  nodes: Number(values.nodes ?? defaults.nodes),
  pods: Number(values.pods ?? defaults.pods),
  claims: Number(values.claims ?? defaults.claims),
};
const CONCURRENCY = 32;
const LEASE_S = 15; // both sides' default --leader-elect-lease-duration
const LEASES: Record<Impl, string> = { kvc: "kube-volume-controller", kcm: "kube-controller-manager" };
/** KCM's default client limits, on both sides. */
const LIMITS = { qps: 20, burst: 30 };

const cp = await LocalControlPlane.start();
const core = cp.kubeConfig().makeApiClient(CoreV1Api);
const storage = cp.kubeConfig().makeApiClient(StorageV1Api);
const coordination = cp.kubeConfig().makeApiClient(CoordinationV1Api);

/** Open WATCH requests on the apiserver, all clients together. */
async function watches(): Promise<number> {
  const { body } = await probe(`${cp.server}/metrics`, {
    ca: readFileSync(cp.caFile, "utf8"),
    token: cp.token,
  });
  let n = 0;
  for (const m of body.matchAll(/^apiserver_longrunning_requests\{[^}]*verb="WATCH"[^}]*\} (\d+)/gm))
    n += Number(m[1]);
  return n;
}

let trials = 0;
/** One fault's new objects: a claim (its volume already Available) and a pod needing an attachment. */
interface Trial {
  claim: string;
  pod: ReturnType<typeof podMountingUnmountedClaim>;
}

/** The volume, Available, before the fault; the claim and the pod come with it (create()). */
async function prepare(): Promise<Trial> {
  const k = trials++;
  const name = `failover-${k}`;
  await core.createPersistentVolume({
    body: {
      metadata: { name },
      spec: {
        capacity: { storage: "1Gi" },
        accessModes: ["ReadWriteOnce"],
        storageClassName: name,
        persistentVolumeReclaimPolicy: "Retain",
        hostPath: { path: `/tmp/bench/${name}` },
      },
    },
  });
  // Available now, whoever leads: a claim synced before its volume is Available waits for the
  // binder's resync (15 s), on both sides, which would hide the failover.
  await core.patchPersistentVolumeStatus({ name, body: { status: { phase: "Available" } } }, mergePatch);
  const pod = podMountingUnmountedClaim(size, size.claims - 1 - k, k % size.nodes, name);
  return { claim: name, pod };
}

async function create(t: Trial): Promise<void> {
  await Promise.all([
    core.createNamespacedPersistentVolumeClaim({
      namespace: "default",
      body: {
        metadata: { name: t.claim },
        spec: {
          accessModes: ["ReadWriteOnce"],
          storageClassName: t.claim,
          resources: { requests: { storage: "1Gi" } },
        },
      },
    }),
    core.createNamespacedPod({ namespace: t.pod.pod.metadata!.namespace!, body: t.pod.pod }),
  ]);
}

/** Wall-clock times (ms since the epoch) at which the claim was seen Bound and the attachment seen. */
async function decided(t: Trial): Promise<{ bound: number; attached: number }> {
  let bound = NaN;
  let attached = NaN;
  await waitFor(
    async () => {
      if (Number.isNaN(bound)) {
        const c = await core.readNamespacedPersistentVolumeClaim({ namespace: "default", name: t.claim });
        if (c.status?.phase === "Bound") bound = Date.now();
      }
      if (Number.isNaN(attached)) {
        try {
          await storage.readVolumeAttachment({ name: t.pod.attachment });
          attached = Date.now();
        } catch {
          // not yet
        }
      }
      return !Number.isNaN(bound) && !Number.isNaN(attached);
    },
    { timeoutMs: 10 * 60_000, intervalMs: 50, what: `${t.claim} Bound and ${t.pod.attachment} created` },
  );
  return { bound, attached };
}

const lease = (impl: Impl) =>
  coordination.readNamespacedLease({ namespace: "kube-system", name: LEASES[impl] });
const microTime = (t: unknown) => new Date(String(t)).getTime();

/** Wall-clock time at which `impl`'s Lease was seen naming another holder than `holder`, or none. */
async function leaseLeft(impl: Impl, holder: string | undefined): Promise<number> {
  await waitFor(async () => (await lease(impl)).spec?.holderIdentity !== holder, {
    timeoutMs: 5 * 60_000,
    intervalMs: 50,
    what: `${LEASES[impl]} to leave ${holder}`,
  });
  return Date.now();
}

interface Measured {
  /** Seconds from the start or the fault. */
  bound: number;
  attached: number;
  /** Seconds after the new leader's acquireTime. */
  boundAfterAcquire: number;
  attachedAfterAcquire: number;
  /** SIGKILL: seconds after the last renewal + the lease duration. */
  boundBeyondLease?: number;
  attachedBeyondLease?: number;
}

async function measure(impl: Impl, t: Trial, at: number, expiry?: number): Promise<Measured> {
  const d = await decided(t);
  const acquired = microTime((await lease(impl)).spec?.acquireTime);
  return {
    bound: (d.bound - at) / 1000,
    attached: (d.attached - at) / 1000,
    boundAfterAcquire: (d.bound - acquired) / 1000,
    attachedAfterAcquire: (d.attached - acquired) / 1000,
    ...(expiry !== undefined && {
      boundBeyondLease: (d.bound - expiry) / 1000,
      attachedBeyondLease: (d.attached - expiry) / 1000,
    }),
  };
}

interface Report {
  fresh: Measured;
  sigterm: Measured;
  /** Seconds from the SIGTERM until the Lease no longer names the old leader (released or taken over). */
  leaseFreed: number;
  sigkill: Measured;
  standbyRss: number;
  leaderRss: number;
  standbyWatches: number;
}

const start = (impl: Impl) => startVolumeLoops(cp, impl, { loops: ALL_LOOPS, ...LIMITS, leaderElect: true });

/** A standby started beside the leader: its RSS once serving (kvc: synced) and the watches it opened. */
async function standby(impl: Impl): Promise<{ replica: StartedController; watches: number }> {
  const before = await watches();
  const replica = await start(impl);
  return { replica, watches: (await watches()) - before };
}

async function run(impl: Impl): Promise<Report> {
  const replicas: StartedController[] = [];
  try {
    const first = await prepare();
    await create(first);
    const started = Date.now();
    const a = await start(impl);
    replicas.push(a);
    const fresh = await measure(impl, first, started);
    console.error(`${impl}: fresh start decided`);

    const b = await standby(impl);
    replicas.push(b.replica);
    const term = await prepare();
    const standbyRss = rssMiB(b.replica.pid);
    const leaderRss = rssMiB(a.pid);
    const terminated = Date.now();
    const holder = (await lease(impl)).spec?.holderIdentity;
    process.kill(a.pid, "SIGTERM");
    const [left] = await Promise.all([leaseLeft(impl, holder), create(term)]);
    const sigterm = await measure(impl, term, terminated);
    const leaseFreed = (left - terminated) / 1000;
    console.error(`${impl}: SIGTERM decided`);

    const c = await standby(impl);
    replicas.push(c.replica);
    const kill = await prepare();
    const killed = Date.now();
    process.kill(b.replica.pid, "SIGKILL");
    const [lastRenewal] = await Promise.all([
      lease(impl).then((l) => microTime(l.spec?.renewTime)),
      create(kill),
    ]);
    const sigkill = await measure(impl, kill, killed, lastRenewal + LEASE_S * 1000);
    console.error(`${impl}: SIGKILL decided`);
    return {
      fresh,
      sigterm,
      leaseFreed,
      sigkill,
      standbyRss,
      leaderRss,
      standbyWatches: Math.max(b.watches, c.watches),
    };
  } finally {
    await Promise.all(replicas.map((r) => r.stop()));
  }
}

try {
  const started = performance.now();
  const pooled = benchClients(cp);
  await createMixedCluster(pooled.core, pooled.storage, size, CONCURRENCY, (line) => {
    console.error(`${((performance.now() - started) / 1000).toFixed(0)} s: ${line}`);
  });
  const kvc = await run("kvc");
  const kcm = await run("kcm");
  const row = (label: string, get: (r: Report) => number | undefined, digits = 1) => {
    const [x, y] = [get(kvc)!, get(kcm)!];
    console.log(`| ${label} | ${x.toFixed(digits)} | ${y.toFixed(digits)} | ${(x / y).toFixed(2)} |`);
  };
  console.log(
    `\nFailover, mixed cluster: ${size.nodes} nodes, ${size.pods} pods, ${size.claims} bound pairs; four loops, ` +
      `2 replicas, lease 15 s / renew 10 s / retry 2 s; seconds (${new Date().toISOString().slice(0, 10)})\n`,
  );
  console.log("| | kvc | KCM | kvc/KCM |");
  console.log("| --- | ---: | ---: | ---: |");
  row("fresh start → claim Bound", (r) => r.fresh.bound);
  row("fresh start → VolumeAttachment", (r) => r.fresh.attached);
  row("SIGTERM → Lease released (kvc) or taken over (KCM)", (r) => r.leaseFreed);
  row("SIGTERM → claim Bound", (r) => r.sigterm.bound);
  row("SIGTERM → VolumeAttachment", (r) => r.sigterm.attached);
  row("SIGKILL → claim Bound", (r) => r.sigkill.bound);
  row("SIGKILL → VolumeAttachment", (r) => r.sigkill.attached);
  row("SIGKILL, beyond the lease → claim Bound", (r) => r.sigkill.boundBeyondLease);
  row("SIGKILL, beyond the lease → VolumeAttachment", (r) => r.sigkill.attachedBeyondLease);
  row("SIGTERM, new leader's acquire → claim Bound", (r) => r.sigterm.boundAfterAcquire, 2);
  row("SIGTERM, new leader's acquire → VolumeAttachment", (r) => r.sigterm.attachedAfterAcquire, 2);
  row("SIGKILL, new leader's acquire → claim Bound", (r) => r.sigkill.boundAfterAcquire, 2);
  row("SIGKILL, new leader's acquire → VolumeAttachment", (r) => r.sigkill.attachedAfterAcquire, 2);
  row("standby RSS, MiB", (r) => r.standbyRss, 0);
  row("leader RSS, MiB", (r) => r.leaderRss, 0);
  row("watches a standby holds", (r) => r.standbyWatches, 0);
} finally {
  await cp.stop();
}
