/**
 * What the benchmarks share: bounded concurrency (p-queue), RSS and CPU (the controller's, the
 * apiserver's, etcd's), kvc's longest event-loop block, kvc run compiled as the image runs it, and kvc
 * or KCM running the same volume loops with the same flags.
 */
import { spawn } from "node:child_process";
import { once } from "node:events";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import type { CoreV1Api, V1PersistentVolumeSpec } from "@kubernetes/client-node";
import PQueue from "p-queue";
import { probe } from "../src/controlplane/https-probe.js";
import { ANN_BIND_COMPLETED, ANN_BOUND_BY_CONTROLLER } from "../src/persistentvolume/annotations.js";
import { freePort } from "../src/controlplane/ports.js";
import { abortedWhen, waitFor } from "../src/util/wait.js";
import type { LocalControlPlane } from "../src/controlplane/local-control-plane.js";
import { imageEntrypoint } from "../test/support/image.js";
import { ApiClients, mergePatch } from "../src/runtime/client.js";
import { realClock, sleep } from "../src/runtime/clock.js";

/**
 * The control plane's API through kvc's client, unthrottled: one connection pool. client-node 2.0.1's
 * own (makeApiClient) opens a new TLS connection for every request (see RequestAuthentication in
 * src/runtime/client.ts); creating PV/PVC pairs through it ran at 210–270 objects/s at any
 * concurrency, through this at 1,300–1,800 (the mixed cluster's 30,000 pods took 690–1,031 s).
 */
export function benchClients(cp: LocalControlPlane): ApiClients {
  return new ApiClients(cp.kubeConfig(), { qps: -1, burst: 0 });
}

/** Runs `fn` over `items` with at most `concurrency` in flight; rejects with the first failure. */
export async function pool<T>(
  items: readonly T[],
  concurrency: number,
  fn: (item: T) => Promise<unknown>,
): Promise<void> {
  await new PQueue({ concurrency }).addAll(items.map((item) => () => fn(item)));
}

/** Creates, for each id, a 1Gi Retain hostPath PV `pv-<id>` and then a claim `pvc-<id>` that fits it. */
export async function createPairs(
  core: CoreV1Api,
  ids: readonly string[],
  concurrency: number,
): Promise<void> {
  await pool(ids, concurrency, (id) =>
    core.createPersistentVolume({
      body: {
        metadata: { name: `pv-${id}` },
        spec: {
          capacity: { storage: "1Gi" },
          accessModes: ["ReadWriteOnce"],
          storageClassName: "",
          persistentVolumeReclaimPolicy: "Retain",
          hostPath: { path: `/tmp/bench/${id}` },
        },
      },
    }),
  );
  await createClaims(core, ids, concurrency, "");
}

/** Creates a 1Gi ReadWriteOnce claim `pvc-<id>` of the class in `default` for each id. */
export function createClaims(
  core: CoreV1Api,
  ids: readonly string[],
  concurrency: number,
  storageClassName: string,
): Promise<void> {
  return pool(ids, concurrency, (id) =>
    core.createNamespacedPersistentVolumeClaim({
      namespace: "default",
      body: {
        metadata: { name: `pvc-${id}` },
        spec: {
          accessModes: ["ReadWriteOnce"],
          storageClassName,
          resources: { requests: { storage: "1Gi" } },
        },
      },
    }),
  );
}

/** CPU time (user + system) a process has used so far, seconds. */
export function cpuSeconds(pid: number): number {
  // /proc/<pid>/stat: utime and stime are fields 14 and 15, after the parenthesised command name.
  const fields = readFileSync(`/proc/${pid}/stat`, "utf8")
    .replace(/^.*\) /s, "")
    .split(" ");
  return (Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS;
}

/** USER_HZ: what /proc reports CPU times in, 100 on every Linux this runs on. */
const CLOCK_TICKS = 100;

/**
 * CPU seconds of the apiserver, etcd and this process (the load generator) from now until the
 * returned function is called: with the controller's, which of them a run saturates.
 */
export function cpuFromNow(cp: LocalControlPlane): () => Record<"apiserver" | "etcd" | "bench", number> {
  const at = () => {
    const own = process.cpuUsage();
    return {
      apiserver: cpuSeconds(cp.apiserver!.pid!),
      etcd: cpuSeconds(cp.etcd.pid!),
      bench: (own.user + own.system) / 1e6,
    };
  };
  const start = at();
  return () => {
    const end = at();
    return {
      apiserver: end.apiserver - start.apiserver,
      etcd: end.etcd - start.etcd,
      bench: end.bench - start.bench,
    };
  };
}

/** Resident set size of a process, MiB: now (VmRSS), or its peak so far (VmHWM, the kernel's high-water mark). */
export function rssMiB(pid: number, which: "now" | "peak" = "now"): number {
  const field = which === "now" ? "VmRSS" : "VmHWM";
  const kb = new RegExp(`${field}:\\s+(\\d+)`).exec(readFileSync(`/proc/${pid}/status`, "utf8"))?.[1];
  return Number(kb) / 1024;
}

/** The four volume loops, as deployed: binder, attach/detach, PVC and PV protection. */
export const ALL_LOOPS = [
  "persistentvolume-binder-controller",
  "persistentvolume-attach-detach-controller",
  "persistentvolumeclaim-protection-controller",
  "persistentvolume-protection-controller",
] as const;

export interface StartedController {
  pid: number;
  /** kvc's https://127.0.0.1:<port>, where it serves /metrics. */
  url?: string;
  stop(): Promise<void>;
}

const root = fileURLToPath(new URL("..", import.meta.url));

/**
 * `kvc run` from dist/ (`npm run build`) started as the image's entrypoint starts it (the same Node
 * options, then `nodeArgs`, e.g. --cpu-prof), without leader election unless `leaderElect`; resolves
 * once /readyz passes.
 */
export async function startCompiledKvc(
  kubeconfig: string,
  args: readonly string[],
  { leaderElect = false, nodeArgs = [] }: { leaderElect?: boolean; nodeArgs?: readonly string[] } = {},
): Promise<StartedController> {
  const port = await freePort();
  const [, ...entrypoint] = imageEntrypoint();
  const child = spawn(
    process.execPath,
    [
      ...entrypoint.slice(0, -1),
      ...nodeArgs,
      join(root, entrypoint.at(-1)!),
      "run",
      `--kubeconfig=${kubeconfig}`,
      `--leader-elect=${leaderElect}`,
      "--bind-address=127.0.0.1",
      `--secure-port=${port}`,
      ...args,
    ],
    { stdio: "ignore" },
  );
  const exited = once(child, "exit") as Promise<[number | null, string | null]>;
  await waitFor(async () => (await probe(`https://127.0.0.1:${port}/readyz`)).status === 200, {
    timeoutMs: 10 * 60_000,
    what: "kvc to be ready",
    signal: abortedWhen(
      exited,
      (r) => new Error(`kvc exited with code ${String(r?.[0])} before it was ready`),
    ),
  });
  return {
    pid: child.pid!,
    url: `https://127.0.0.1:${port}`,
    stop: async () => {
      child.kill("SIGTERM");
      await exited;
    },
  };
}

/**
 * Scrapes kvc's /metrics every `everyMs` until stopped; stop() scrapes once more and resolves with the
 * longest event-loop block seen, seconds: the largest nodejs_eventloop_lag_max_seconds. prom-client
 * resets that histogram at every scrape, so each scrape covers the time since the one before and
 * none is missed; a scrape is slow when the loop is blocked, so it waits as long as it must.
 */
export function sampleEventLoopBlock(
  kvc: StartedController,
  token: string,
  everyMs = 10_000,
): { stop(): Promise<number> } {
  let longest = 0;
  const scrape = async () => {
    const { status, body } = await probe(`${kvc.url!}/metrics`, { token, timeoutMs: 10 * 60_000 });
    if (status !== 200) throw new Error(`kvc /metrics: HTTP ${status}`);
    const max = /^nodejs_eventloop_lag_max_seconds (\S+)$/m.exec(body)?.[1];
    if (max === undefined) throw new Error("kvc /metrics: no nodejs_eventloop_lag_max_seconds");
    longest = Math.max(longest, Number(max));
  };
  const stopped = new AbortController();
  // A failed scrape ends the sampling and fails stop(): not an unhandled rejection that would end
  // the bench with the controller still running.
  const sampling = (async () => {
    while (!stopped.signal.aborted) {
      await scrape();
      await sleep(realClock, everyMs, stopped.signal).catch(() => undefined);
    }
  })();
  sampling.catch(() => undefined);
  return {
    stop: async () => {
      stopped.abort();
      await sampling;
      await scrape();
      return longest;
    },
  };
}

/** The binder's PV status write: phase Bound. */
export function setVolumeBound(core: CoreV1Api, name: string): Promise<unknown> {
  return core.patchPersistentVolumeStatus({ name, body: { status: { phase: "Bound" } } }, mergePatch);
}

/** The binder's PVC status write: Bound, with the 1Gi ReadWriteOnce of the benchmarks' volumes. */
export function setClaimBound(core: CoreV1Api, namespace: string, name: string): Promise<unknown> {
  return core.patchNamespacedPersistentVolumeClaimStatus(
    {
      namespace,
      name,
      body: { status: { phase: "Bound", accessModes: ["ReadWriteOnce"], capacity: { storage: "1Gi" } } },
    },
    mergePatch,
  );
}

export interface PreBoundPair {
  namespace: string;
  claim: string;
  volume: string;
  source: Pick<V1PersistentVolumeSpec, "hostPath" | "csi">;
  /** Marks both as the binder marks a finished bind (bind-completed, bound-by-controller). */
  bindCompleted?: boolean;
  claimLabels?: Record<string, string>;
}

/** A 1Gi ReadWriteOnce claim (class "") naming the volume, and the volume's claimRef with its uid. */
export async function createPreBoundPair(core: CoreV1Api, pair: PreBoundPair): Promise<void> {
  const byController = pair.bindCompleted && { [ANN_BOUND_BY_CONTROLLER]: "yes" };
  const claim = await core.createNamespacedPersistentVolumeClaim({
    namespace: pair.namespace,
    body: {
      metadata: {
        name: pair.claim,
        ...(pair.claimLabels && { labels: pair.claimLabels }),
        ...(byController && { annotations: { ...byController, [ANN_BIND_COMPLETED]: "yes" } }),
      },
      spec: {
        accessModes: ["ReadWriteOnce"],
        storageClassName: "",
        volumeName: pair.volume,
        resources: { requests: { storage: "1Gi" } },
      },
    },
  });
  await core.createPersistentVolume({
    body: {
      metadata: { name: pair.volume, ...(byController && { annotations: byController }) },
      spec: {
        capacity: { storage: "1Gi" },
        accessModes: ["ReadWriteOnce"],
        storageClassName: "",
        persistentVolumeReclaimPolicy: "Retain",
        ...pair.source,
        claimRef: {
          kind: "PersistentVolumeClaim",
          apiVersion: "v1",
          namespace: pair.namespace,
          name: pair.claim,
          uid: claim.metadata!.uid!,
        },
      },
    },
  });
}

export type Impl = "kvc" | "kcm";

/**
 * kvc (compiled, as the image runs it) or upstream KCM on `cp`, running `loops` with the same flags
 * and client limits; KCM's leader election is on when `leaderElect` (its default Lease and timings),
 * as kvc's. Resolves once it serves (kvc: /readyz; KCM: /healthz).
 */
export async function startVolumeLoops(
  cp: LocalControlPlane,
  impl: Impl,
  o: {
    loops: readonly string[];
    qps: number;
    burst: number;
    leaderElect?: boolean;
    kvcArgs?: readonly string[];
  },
): Promise<StartedController> {
  const flags = [
    "--pvclaimbinder-sync-period=15s",
    "--enable-hostpath-provisioner",
    // As kubeadm deploys KCM: /metrics answers the control plane's admin token (sampleEventLoopBlock).
    `--authentication-kubeconfig=${cp.kubeconfigPath}`,
    `--authorization-kubeconfig=${cp.kubeconfigPath}`,
  ];
  if (impl === "kcm") {
    const kcm = await cp.startKubeControllerManager({
      controllers: [...o.loops],
      qps: o.qps,
      burst: o.burst,
      // After the harness's --leader-elect=false: the last one counts.
      args: [...flags, ...(o.leaderElect ? ["--leader-elect=true"] : [])],
    });
    return { pid: kcm.pid!, stop: () => kcm.stop() };
  }
  return startCompiledKvc(
    cp.kubeconfigPath,
    [
      `--controllers=${o.loops.join(",")}`,
      `--kube-api-qps=${o.qps}`,
      `--kube-api-burst=${o.burst}`,
      ...flags,
      ...(o.kvcArgs ?? []),
    ],
    { leaderElect: o.leaderElect ?? false },
  );
}
