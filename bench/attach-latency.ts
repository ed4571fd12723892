/**
 * Attach latency: from a pod's creation (scheduled to a managed node, its CSI claim already bound) to
 * the VolumeAttachment the attach/detach controller creates, p50/p99 over N pods (default 200) spread
 * over `--nodes` nodes (default 1), for kvc (compiled, as in the image) and for upstream
 * kube-controller-manager, each on a fresh embedded control plane (at 100,000 pods the second would
 * otherwise see the first's), with KCM's default client limits (20 qps, burst 30), or with
 * `--unthrottled` none. The pods are created `--concurrency` at a time (default 10) once the
 * controller is ready. Per side also: VolumeAttachments a second over the run, the CPU seconds of the
 * controller, the apiserver and etcd over it, and kvc's longest event-loop block.
 * Prints markdown tables; asserts nothing.
 *   npm run bench:attach [-- --pods=200 --nodes=1 --concurrency=10 --unthrottled]
 */
import { parseArgs } from "node:util";
import type { V1VolumeAttachment } from "@kubernetes/client-node";
import { LocalControlPlane } from "../src/controlplane/local-control-plane.js";
import { InformerFactory } from "../src/runtime/informer/index.js";
import { waitFor } from "../src/util/wait.js";
import {
  benchClients,
  cpuFromNow,
  cpuSeconds,
  createPreBoundPair,
  pool,
  sampleEventLoopBlock,
  setClaimBound,
  startVolumeLoops,
  type Impl,
} from "./support.js";
import { strategicMergePatch } from "../src/runtime/client.js";

const { values } = parseArgs({
  options: {
    pods: { type: "string", default: "200" },
    nodes: { type: "string", default: "1" },
    concurrency: { type: "string", default: "10" },
    unthrottled: { type: "boolean", default: false },
  },
});
const PODS = Number(values.pods);
const NODES = Number(values.nodes);
// As bench/throughput.ts: limits no run reaches.
const LIMITS = values.unthrottled ? { qps: 100_000, burst: 100_000 } : { qps: 20, burst: 30 };
const CONCURRENCY = Number(values.concurrency);
/** Creating the nodes and claims before the controller starts (through benchClients' one pool). */
const SETUP_CONCURRENCY = 64;
const DRIVER = "bench.csi.example.com";
const progress = (line: string) => process.stderr.write(`bench: ${line}\n`);

function percentile(sorted: readonly number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
}

interface Run {
  /** pod → VolumeAttachment, ms, sorted. */
  latencies: number[];
  /** From the first pod's creation to the last VolumeAttachment, s. */
  seconds: number;
  controllerCpu: number;
  cpu: Record<"apiserver" | "etcd" | "bench", number>;
  block?: number;
}

/** Fresh control plane, nodes and N bound CSI claims; then the controller, then a pod per claim. */
async function measure(impl: Impl): Promise<Run> {
  const cp = await LocalControlPlane.start();
  const stop = new AbortController();
  try {
    const { core } = benchClients(cp);
    const informers = new InformerFactory({ kubeConfig: cp.kubeConfig() });
    const seen = new Map<string, number>();
    informers.volumeAttachments().addEventHandler({
      onAdd: (va: V1VolumeAttachment) => {
        const pv = va.spec.source.persistentVolumeName;
        if (pv !== undefined && !seen.has(pv)) seen.set(pv, performance.now());
      },
    });
    void informers.start(stop.signal);
    await informers.waitForCacheSync(stop.signal);

    const nodes = Array.from({ length: NODES }, (_, i) => `node-${i}`);
    await pool(nodes, SETUP_CONCURRENCY, async (node) => {
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
    });
    const ids = Array.from({ length: PODS }, (_, i) => `pod-${i}`);
    await pool(ids, SETUP_CONCURRENCY, async (id) => {
      await createPreBoundPair(core, {
        namespace: "default",
        claim: id,
        volume: `pv-${id}`,
        source: { csi: { driver: DRIVER, volumeHandle: id } },
      });
      await setClaimBound(core, "default", id);
    });
    progress(`${impl}: ${NODES} nodes and ${PODS} bound claims created`);

    const cpu = cpuFromNow(cp);
    const controller = await startVolumeLoops(cp, impl, {
      loops: ["persistentvolume-attach-detach-controller"],
      ...LIMITS,
      kvcArgs: [`--flex-volume-plugin-dir=${cp.dir}/flexvolume`],
    });
    const loop = controller.url === undefined ? undefined : sampleEventLoopBlock(controller, cp.token);
    const created = new Map<string, number>();
    try {
      const first = performance.now();
      await pool(ids, CONCURRENCY, async (id) => {
        await core.createNamespacedPod({
          namespace: "default",
          body: {
            metadata: { name: id },
            spec: {
              nodeName: nodes[Number(id.slice("pod-".length)) % NODES]!,
              containers: [{ name: "c", image: "registry.k8s.io/pause:3.10" }],
              volumes: [{ name: "data", persistentVolumeClaim: { claimName: id } }],
            },
          },
        });
        created.set(id, performance.now());
      });
      await waitFor(() => ids.every((id) => seen.has(`pv-${id}`)), {
        timeoutMs: 60 * 60_000,
        what: `${impl}: a VolumeAttachment for every pod`,
      });
      const seconds = (Math.max(...seen.values()) - first) / 1000;
      const controllerCpu = cpuSeconds(controller.pid);
      const used = cpu();
      const block = await loop?.stop();
      progress(`${impl}: ${PODS} VolumeAttachments in ${seconds.toFixed(1)} s`);
      return {
        latencies: ids.map((id) => seen.get(`pv-${id}`)! - created.get(id)!).sort((a, b) => a - b),
        seconds,
        controllerCpu,
        cpu: used,
        ...(block !== undefined && { block }),
      };
    } finally {
      await controller.stop();
    }
  } finally {
    stop.abort();
    await cp.stop();
  }
}

const kvc = await measure("kvc");
const kcm = await measure("kcm");
console.log(
  `\nAttach latency, pod created → VolumeAttachment created, ${PODS} pods on ${NODES} node(s), ${CONCURRENCY} creates in flight, ` +
    `${values.unthrottled ? "unthrottled" : "20 qps / 30 burst"}\n`,
);
console.log(
  "| controller | p50 (ms) | p99 (ms) | max (ms) | VolumeAttachments/s | controller CPU s (cores) | apiserver CPU s (cores) | etcd CPU s (cores) | bench cores | longest event-loop block s |",
);
console.log("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
for (const [name, r] of [
  ["kvc", kvc],
  ["kube-controller-manager", kcm],
] as const) {
  const l = r.latencies;
  const cores = (cpu: number) => `${cpu.toFixed(1)} (${(cpu / r.seconds).toFixed(2)})`;
  console.log(
    `| ${name} | ${percentile(l, 50).toFixed(0)} | ${percentile(l, 99).toFixed(0)} | ${l.at(-1)!.toFixed(0)} | ${(PODS / r.seconds).toFixed(0)} | ${cores(r.controllerCpu)} | ${cores(r.cpu.apiserver)} | ${cores(r.cpu.etcd)} | ${(r.cpu.bench / r.seconds).toFixed(2)} | ${r.block === undefined ? "n/a" : r.block.toFixed(2)} |`,
  );
}
console.log(
  `| kvc / KCM | ${(percentile(kvc.latencies, 50) / percentile(kcm.latencies, 50)).toFixed(2)} | ${(percentile(kvc.latencies, 99) / percentile(kcm.latencies, 99)).toFixed(2)} | | ${(kcm.seconds / kvc.seconds).toFixed(2)} | | | | | |`,
);
