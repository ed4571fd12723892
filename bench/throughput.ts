/**
 * Binding and provisioning throughput, and memory, of kvc against upstream kube-controller-manager,
 * each on a fresh embedded control plane in the same run:
 *   binding       N pre-created PV/PVC pairs, controller started, until every claim is Bound;
 *                 at KCM's default client limits (20 qps, burst 30) and unthrottled; plus the
 *                 apiserver's ceiling: a plain loop of the binder's four writes per pair.
 *   provisioning  N claims of a hostPath class (in-process provisioner), until every claim is Bound.
 *   memory        RSS of each controller process once its caches hold the N bound pairs.
 * kvc runs compiled (dist/, `npm run build`) as in the image. Prints markdown tables; asserts nothing.
 *   npm run bench:throughput [-- --pairs=1000]
 */
import { parseArgs } from "node:util";
import { CoreV1Api, StorageV1Api, type V1PersistentVolumeClaim } from "@kubernetes/client-node";
import { LocalControlPlane } from "../src/controlplane/local-control-plane.js";
import { ANN_BIND_COMPLETED, ANN_BOUND_BY_CONTROLLER } from "../src/persistentvolume/annotations.js";
import { waitFor } from "../src/util/wait.js";
import {
  mergePatch,
  pool,
  rssMiB,
  setClaimBound,
  setVolumeBound,
  startCompiledKvc,
  type StartedController,
} from "./support.js";

const { values } = parseArgs({ options: { pairs: { type: "string", default: "1000" } } });
const N = Number(values.pairs);
const CREATE_CONCURRENCY = 16;

type Impl = "kvc" | "kcm";
interface Limits {
  qps: number;
  burst: number;
}
const DEFAULT_LIMITS: Limits = { qps: 20, burst: 30 };
const UNTHROTTLED: Limits = { qps: 100_000, burst: 100_000 };

const ids = Array.from({ length: N }, (_, i) => String(i).padStart(6, "0"));

async function createPairs(core: CoreV1Api): Promise<void> {
  await pool(ids, CREATE_CONCURRENCY, (id) =>
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
  await createClaims(core, "");
}

function createClaims(core: CoreV1Api, storageClassName: string): Promise<void> {
  return pool(ids, CREATE_CONCURRENCY, (id) =>
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

async function boundCount(core: CoreV1Api): Promise<number> {
  let bound = 0;
  let cont: string | undefined;
  do {
    const page = await core.listNamespacedPersistentVolumeClaim({
      namespace: "default",
      limit: 5000,
      ...(cont && { _continue: cont }),
    });
    bound += page.items.filter((c: V1PersistentVolumeClaim) => c.status?.phase === "Bound").length;
    cont = page.metadata?._continue;
  } while (cont);
  return bound;
}

async function startController(
  cp: LocalControlPlane,
  impl: Impl,
  limits: Limits,
): Promise<StartedController> {
  const flags = ["--pvclaimbinder-sync-period=15s", "--enable-hostpath-provisioner"];
  if (impl === "kcm") {
    const kcm = await cp.startKubeControllerManager({
      controllers: ["persistentvolume-binder-controller"],
      qps: limits.qps,
      burst: limits.burst,
      args: flags,
    });
    return { pid: kcm.pid!, stop: () => kcm.stop() };
  }
  return startCompiledKvc(cp.kubeconfigPath, [
    "--controllers=persistentvolume-binder-controller",
    `--kube-api-qps=${limits.qps}`,
    `--kube-api-burst=${limits.burst}`,
    ...flags,
  ]);
}

/** Fresh control plane, objects created, controller started; seconds until all N claims are Bound. */
async function measure(impl: Impl, limits: Limits, kind: "binding" | "provisioning") {
  const cp = await LocalControlPlane.start();
  try {
    const core = cp.kubeConfig().makeApiClient(CoreV1Api);
    if (kind === "binding") await createPairs(core);
    else {
      await cp
        .kubeConfig()
        .makeApiClient(StorageV1Api)
        .createStorageClass({ body: { metadata: { name: "hp" }, provisioner: "kubernetes.io/host-path" } });
      await createClaims(core, "hp");
    }
    const started = performance.now();
    const controller = await startController(cp, impl, limits);
    try {
      await waitFor(async () => (await boundCount(core)) === N, {
        timeoutMs: 60 * 60_000,
        intervalMs: 250,
        what: `${impl}: ${N} claims Bound`,
      });
      const seconds = (performance.now() - started) / 1000;
      return { seconds, rss: rssMiB(controller.pid) };
    } finally {
      await controller.stop();
    }
  } finally {
    await cp.stop();
  }
}

/** The apiserver's ceiling: the binder's four writes per pair, as fast as a loop can send them. */
async function ceiling(): Promise<number> {
  const cp = await LocalControlPlane.start();
  try {
    const core = cp.kubeConfig().makeApiClient(CoreV1Api);
    await createPairs(core);
    const started = performance.now();
    await pool(ids, CREATE_CONCURRENCY, async (id) => {
      const claim = await core.readNamespacedPersistentVolumeClaim({
        namespace: "default",
        name: `pvc-${id}`,
      });
      const claimRef = {
        kind: "PersistentVolumeClaim",
        namespace: "default",
        name: `pvc-${id}`,
        uid: claim.metadata!.uid!,
      };
      await core.patchPersistentVolume(
        {
          name: `pv-${id}`,
          body: {
            metadata: { annotations: { [ANN_BOUND_BY_CONTROLLER]: "yes" } },
            spec: { claimRef },
          },
        },
        mergePatch,
      );
      await setVolumeBound(core, `pv-${id}`);
      await core.patchNamespacedPersistentVolumeClaim(
        {
          namespace: "default",
          name: `pvc-${id}`,
          body: {
            metadata: {
              annotations: {
                [ANN_BIND_COMPLETED]: "yes",
                [ANN_BOUND_BY_CONTROLLER]: "yes",
              },
            },
            spec: { volumeName: `pv-${id}` },
          },
        },
        mergePatch,
      );
      await setClaimBound(core, "default", `pvc-${id}`);
    });
    return (performance.now() - started) / 1000;
  } finally {
    await cp.stop();
  }
}

const rows: string[] = [];
const fmt = (s: number) => s.toFixed(1);
const binding: Record<string, { seconds: number; rss: number }> = {};
for (const [label, limits] of [
  ["20 qps / 30 burst", DEFAULT_LIMITS],
  ["unthrottled", UNTHROTTLED],
] as const) {
  binding[`kvc ${label}`] = await measure("kvc", limits, "binding");
  binding[`kcm ${label}`] = await measure("kcm", limits, "binding");
}
const ceilingSeconds = await ceiling();
console.log(`\nBinding ${N} pre-created PV/PVC pairs (from controller start to all Bound)\n`);
console.log(
  "| client limits | kvc s | kvc binds/s | KCM s | KCM binds/s | kvc/KCM time | kvc/ceiling time |",
);
console.log("| --- | ---: | ---: | ---: | ---: | ---: | ---: |");
for (const label of ["20 qps / 30 burst", "unthrottled"]) {
  const a = binding[`kvc ${label}`]!;
  const b = binding[`kcm ${label}`]!;
  rows.push(
    `| ${label} | ${fmt(a.seconds)} | ${(N / a.seconds).toFixed(0)} | ${fmt(b.seconds)} | ${(N / b.seconds).toFixed(0)} | ${(a.seconds / b.seconds).toFixed(2)} | ${(a.seconds / ceilingSeconds).toFixed(2)} |`,
  );
}
console.log(rows.join("\n"));
console.log(
  `\napiserver ceiling (4 writes per pair, ${CREATE_CONCURRENCY} in flight): ${fmt(ceilingSeconds)} s, ${(N / ceilingSeconds).toFixed(0)} pairs/s`,
);

const kvcProv = await measure("kvc", UNTHROTTLED, "provisioning");
const kcmProv = await measure("kcm", UNTHROTTLED, "provisioning");
console.log(`\nProvisioning ${N} hostPath claims, unthrottled\n`);
console.log("| controller | s | claims/s |");
console.log("| --- | ---: | ---: |");
console.log(`| kvc | ${fmt(kvcProv.seconds)} | ${(N / kvcProv.seconds).toFixed(0)} |`);
console.log(`| kube-controller-manager | ${fmt(kcmProv.seconds)} | ${(N / kcmProv.seconds).toFixed(0)} |`);
console.log(`| kvc / KCM time | ${(kvcProv.seconds / kcmProv.seconds).toFixed(2)} | |`);

console.log(`\nMemory (RSS once ${N} pairs are bound and cached, unthrottled run)\n`);
console.log("| controller | RSS MiB |");
console.log("| --- | ---: |");
console.log(`| kvc | ${binding["kvc unthrottled"]!.rss.toFixed(0)} |`);
console.log(`| kube-controller-manager | ${binding["kcm unthrottled"]!.rss.toFixed(0)} |`);
