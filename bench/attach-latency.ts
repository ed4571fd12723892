/**
 * Attach latency: from a pod's creation (scheduled to a managed node, its CSI claim already bound) to
 * the VolumeAttachment the attach/detach controller creates, p50/p99 over N pods (default 200), for
 * kvc and for upstream kube-controller-manager, one after the other on the same embedded control
 * plane, each with KCM's default client limits (20 qps, burst 30), or with `--unthrottled` none.
 * Prints a markdown table; asserts nothing.
 *   npm run bench:attach [-- --pods=200 --unthrottled]
 */
import { parseArgs } from "node:util";
import { CoreV1Api, type V1VolumeAttachment } from "@kubernetes/client-node";
import { LocalControlPlane } from "../src/controlplane/local-control-plane.js";
import { InformerFactory } from "../src/runtime/informer/index.js";
import { waitFor } from "../src/util/wait.js";
import { startKvc } from "../test/support/kvc-process.js";
import { createPreBoundPair, pool, setClaimBound } from "./support.js";
import { strategicMergePatch } from "../src/runtime/client.js";

const { values } = parseArgs({
  options: { pods: { type: "string", default: "200" }, unthrottled: { type: "boolean", default: false } },
});
const PODS = Number(values.pods);
// As bench/throughput.ts: limits no run reaches.
const LIMITS = values.unthrottled ? { qps: 100_000, burst: 100_000 } : { qps: 20, burst: 30 };
const CONCURRENCY = 10;
const DRIVER = "bench.csi.example.com";

const cp = await LocalControlPlane.start();
const core = cp.kubeConfig().makeApiClient(CoreV1Api);
const stop = new AbortController();
const informers = new InformerFactory({ kubeConfig: cp.kubeConfig() });
const seen = new Map<string, number>();
informers.volumeAttachments().addEventHandler({
  onAdd: (va: V1VolumeAttachment) => {
    const pv = va.spec.source.persistentVolumeName;
    if (pv !== undefined && !seen.has(pv)) seen.set(pv, performance.now());
  },
});
const informing = informers.start(stop.signal);
await informers.waitForCacheSync(stop.signal);

function percentile(sorted: readonly number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
}

/** Pre-creates the node and N bound CSI claims, then measures pod → VolumeAttachment for each pod. */
async function measure(run: string, start: () => Promise<() => Promise<void>>): Promise<number[]> {
  const node = `node-${run}`;
  await core.createNode({
    body: {
      metadata: {
        name: node,
        annotations: { "volumes.kubernetes.io/controller-managed-attach-detach": "true" },
      },
    },
  });
  await core.patchNodeStatus(
    {
      name: node,
      body: { status: { conditions: [{ type: "Ready", status: "True", reason: "Bench", message: "" }] } },
    },
    strategicMergePatch,
  );
  const ids = Array.from({ length: PODS }, (_, i) => `${run}-${i}`);
  await pool(ids, CONCURRENCY, async (id) => {
    await createPreBoundPair(core, {
      namespace: "default",
      claim: id,
      volume: `pv-${id}`,
      source: { csi: { driver: DRIVER, volumeHandle: id } },
    });
    await setClaimBound(core, "default", id);
  });
  const stopController = await start();
  const created = new Map<string, number>();
  try {
    await pool(ids, CONCURRENCY, async (id) => {
      await core.createNamespacedPod({
        namespace: "default",
        body: {
          metadata: { name: id },
          spec: {
            nodeName: node,
            containers: [{ name: "c", image: "registry.k8s.io/pause:3.10" }],
            volumes: [{ name: "data", persistentVolumeClaim: { claimName: id } }],
          },
        },
      });
      created.set(id, performance.now());
    });
    await waitFor(() => ids.every((id) => seen.has(`pv-${id}`)), {
      timeoutMs: 300_000,
      what: `${run}: a VolumeAttachment for every pod`,
    });
  } finally {
    await stopController();
  }
  return ids.map((id) => seen.get(`pv-${id}`)! - created.get(id)!).sort((a, b) => a - b);
}

try {
  const results: [string, number[]][] = [];
  results.push([
    "kvc",
    await measure("kvc", async () => {
      const kvc = await startKvc(cp.kubeconfigPath, [
        "--leader-elect=false",
        "--controllers=persistentvolume-attach-detach-controller",
        `--flex-volume-plugin-dir=${cp.dir}/flexvolume`,
        `--kube-api-qps=${LIMITS.qps}`,
        `--kube-api-burst=${LIMITS.burst}`,
      ]);
      await kvc.ready();
      return async () => {
        kvc.child.kill("SIGTERM");
        await kvc.exited;
      };
    }),
  ]);
  results.push([
    "kube-controller-manager",
    await measure("kcm", async () => {
      const kcm = await cp.startKubeControllerManager({
        controllers: ["persistentvolume-attach-detach-controller"],
        qps: LIMITS.qps,
        burst: LIMITS.burst,
      });
      return () => kcm.stop();
    }),
  ]);
  const [kvc, kcm] = results.map(([, l]) => l);
  console.log(
    `\nAttach latency, pod created → VolumeAttachment created, ${PODS} pods, ${CONCURRENCY} creates in flight, ` +
      `${values.unthrottled ? "unthrottled" : "20 qps / 30 burst"}\n`,
  );
  console.log("| controller | p50 (ms) | p99 (ms) | max (ms) |");
  console.log("| --- | ---: | ---: | ---: |");
  for (const [name, l] of results) {
    console.log(
      `| ${name} | ${percentile(l, 50).toFixed(0)} | ${percentile(l, 99).toFixed(0)} | ${l.at(-1)!.toFixed(0)} |`,
    );
  }
  console.log(
    `| kvc / KCM | ${(percentile(kvc!, 50) / percentile(kcm!, 50)).toFixed(2)} | ${(percentile(kvc!, 99) / percentile(kcm!, 99)).toFixed(2)} | |`,
  );
} finally {
  stop.abort();
  await informing;
  await cp.stop();
}
