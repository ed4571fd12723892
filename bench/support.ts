/**
 * What the benchmarks share: bounded concurrency (p-queue), RSS, kvc run compiled as the image runs
 * it, and kvc or KCM running the same volume loops with the same flags.
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
import { mergePatch } from "../src/runtime/client.js";

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
    stop: async () => {
      child.kill("SIGTERM");
      await exited;
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
  const flags = ["--pvclaimbinder-sync-period=15s", "--enable-hostpath-provisioner"];
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
