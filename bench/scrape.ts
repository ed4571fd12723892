/**
 * The cost of one /metrics scrape with many objects, and how long it blocks the event loop (the
 * thread that renews the Lease): the PV binder's pv_collector gauges and the attach/detach
 * controller's state gauges count every volume, claim, pod volume and VolumeAttachment at scrape time. Prints the
 * scrape's wall time and the longest stretch without a turn of the event loop; asserts nothing.
 *   npx tsx bench/scrape.ts [objects per kind, default 50000]
 */
import type {
  V1PersistentVolume,
  V1PersistentVolumeClaim,
  V1VolumeAttachment,
} from "@kubernetes/client-node";
import { Registry } from "prom-client";
import { AttachDetachMetrics } from "../src/attachdetach/metrics.js";
import { PersistentVolumeMetrics } from "../src/persistentvolume/metrics.js";
import { realClock } from "../src/runtime/clock.js";
import { specFromPersistentVolume, type VolumeSpec } from "../src/volume/plugin.js";

const n = Number(process.argv[2] ?? 50_000);
const volumes: V1PersistentVolume[] = [];
const claims: V1PersistentVolumeClaim[] = [];
const attachments: V1VolumeAttachment[] = [];
for (let i = 0; i < n; i++) {
  const csi = i % 2 === 0;
  volumes.push({
    metadata: { name: `pv-${i}` },
    spec: {
      storageClassName: `class-${i % 10}`,
      volumeMode: "Filesystem",
      ...(csi
        ? { csi: { driver: `driver-${i % 3}.example.com`, volumeHandle: `h-${i}` } }
        : { hostPath: { path: `/tmp/${i}` } }),
    },
    status: { phase: i % 4 === 0 ? "Available" : "Bound" },
  });
  claims.push({
    metadata: { name: `pvc-${i}`, namespace: `ns-${i % 100}`, creationTimestamp: new Date(i * 1000) },
    spec: { storageClassName: `class-${i % 10}` },
    status: { phase: i % 4 === 0 ? "Pending" : "Bound" },
  });
  attachments.push({
    metadata: { name: `va-${i}`, creationTimestamp: new Date(i * 1000) },
    spec: { attacher: `driver-${i % 3}.example.com`, nodeName: `node-${i % 1000}`, source: {} },
    status: { attached: i % 4 !== 0 },
  });
}
const findPluginBySpec = (spec: VolumeSpec) => {
  const pv = spec.persistentVolume;
  if (pv?.spec?.csi) return { name: "kubernetes.io/csi" };
  if (pv?.spec?.hostPath) return { name: "kubernetes.io/host-path" };
  throw new Error("no plugin");
};
const specs = volumes.map((pv) => specFromPersistentVolume(pv));

const registry = new Registry();
new PersistentVolumeMetrics(registry).forController(
  {
    volumes: () => volumes,
    claims: () => claims,
    findPluginBySpec,
    delaysBinding: (claim) => claim.spec?.storageClassName === "class-0",
  },
  realClock,
);
new AttachDetachMetrics(registry, {
  desiredVolumeSpecs: () => specs,
  actualVolumeSpecs: () => specs,
  podVolumes: () => specs.map((spec, i) => ({ nodeName: `node-${i % 1000}`, spec })),
  findPluginBySpec,
  volumeAttachments: () => attachments,
});

/**
 * The longest stretch between two turns of the event loop, in wall time and in this process's CPU
 * time: on a loaded machine the wall time includes being descheduled; the CPU time is what the
 * scrape itself holds the loop for.
 */
async function scrape(): Promise<{
  wallMs: number;
  longestBlockMs: number;
  longestCpuMs: number;
  bytes: number;
}> {
  let longestBlockMs = 0;
  let longestCpuMs = 0;
  let last = performance.now();
  let lastCpu = process.cpuUsage();
  let done = false;
  const ticker = (async () => {
    while (!done) {
      await new Promise((resolve) => setImmediate(resolve));
      const now = performance.now();
      const cpu = process.cpuUsage(lastCpu);
      longestBlockMs = Math.max(longestBlockMs, now - last);
      longestCpuMs = Math.max(longestCpuMs, (cpu.user + cpu.system) / 1000);
      last = now;
      lastCpu = process.cpuUsage();
    }
  })();
  const t0 = performance.now();
  const text = await registry.metrics();
  const wallMs = performance.now() - t0;
  done = true;
  await ticker;
  return { wallMs, longestBlockMs, longestCpuMs, bytes: text.length };
}

await scrape(); // warm-up
const runs = [];
for (let i = 0; i < 5; i++) runs.push(await scrape());
const median = (xs: number[]) => xs.sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
console.log(
  `${n} PVs, ${n} PVCs, ${n} pod volumes, ${n} VolumeAttachments: scrape ${median(runs.map((r) => r.wallMs)).toFixed(0)} ms wall, ` +
    `longest event-loop block ${median(runs.map((r) => r.longestBlockMs)).toFixed(1)} ms wall, ` +
    `${median(runs.map((r) => r.longestCpuMs)).toFixed(1)} ms CPU (medians of 5), ` +
    `${runs[0]!.bytes} bytes`,
);
