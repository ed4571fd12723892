/**
 * Shadow mode's cost (issue 15): the same workload once with kvc running the four volume loops, once
 * with KCM running them and `kvc run --shadow` beside it, each on a fresh embedded control plane. The
 * workload: N PVs (1Gi, Retain, class "") and N claims that bind to them, created after the
 * controllers are ready; measured until every claim is Bound and SETTLE_S more (syncs, resyncs and,
 * in shadow mode, the comparison's grace window). Reports kvc's CPU seconds over that time and its
 * RSS (settled, peak). kvc runs compiled (dist/) as in the image. Prints a markdown table; asserts nothing.
 *   npm run bench:shadow [-- --pairs=1000]
 */
import { parseArgs } from "node:util";
import { CoreV1Api } from "@kubernetes/client-node";
import { LocalControlPlane } from "../src/controlplane/local-control-plane.js";
import { realClock, sleep } from "../src/runtime/clock.js";
import { waitFor } from "../src/util/wait.js";
import { cpuSeconds, createPairs, rssMiB, startCompiledKvc } from "./support.js";

const { values } = parseArgs({ options: { pairs: { type: "string", default: "1000" } } });
const N = Number(values.pairs);
const CONCURRENCY = 16;
const SETTLE_S = 30;
const CONTROLLERS = [
  "persistentvolume-binder-controller",
  "persistentvolume-attach-detach-controller",
  "persistentvolumeclaim-protection-controller",
  "persistentvolume-protection-controller",
];
const FLAGS = ["--pvclaimbinder-sync-period=15s"];
const ids = Array.from({ length: N }, (_, i) => String(i).padStart(6, "0"));

interface Result {
  cpu: number;
  rss: number;
  peak: number;
  boundS: number;
}

async function run(shadow: boolean): Promise<Result> {
  const cp = await LocalControlPlane.start();
  try {
    const core = cp.kubeConfig().makeApiClient(CoreV1Api);
    const kcm = shadow
      ? await cp.startKubeControllerManager({ controllers: CONTROLLERS, args: FLAGS })
      : undefined;
    const kvc = await startCompiledKvc(cp.kubeconfigPath, [
      ...(shadow ? ["--shadow", "--shadow-grace-period=10s"] : []),
      `--controllers=${CONTROLLERS.join(",")}`,
      ...FLAGS,
    ]);
    try {
      const cpu0 = cpuSeconds(kvc.pid);
      const t0 = performance.now();
      const samples: number[] = [];
      const sampler = setInterval(() => samples.push(rssMiB(kvc.pid)), 1000);
      try {
        await createPairs(core, ids, CONCURRENCY);
        await waitFor(
          async () =>
            (await core.listNamespacedPersistentVolumeClaim({ namespace: "default" })).items.filter(
              (c) => c.status?.phase === "Bound",
            ).length === N,
          { timeoutMs: 30 * 60_000, intervalMs: 1000, what: "every claim Bound" },
        );
        const boundS = (performance.now() - t0) / 1000;
        await sleep(realClock, SETTLE_S * 1000);
        return {
          cpu: cpuSeconds(kvc.pid) - cpu0,
          rss: rssMiB(kvc.pid),
          peak: Math.max(...samples),
          boundS,
        };
      } finally {
        clearInterval(sampler);
      }
    } finally {
      await kvc.stop();
      await kcm?.stop();
    }
  } finally {
    await cp.stop();
  }
}

const normal = await run(false);
const shadow = await run(true);
console.log(`\nkvc and kvc --shadow (beside KCM) on ${N} PVs + ${N} claims bound after start\n`);
console.log(`| kvc | all Bound after | kvc CPU s (until +${SETTLE_S} s) | RSS MiB settled | RSS MiB peak |`);
console.log("| --- | ---: | ---: | ---: | ---: |");
for (const [name, r] of [
  ["binding itself", normal],
  ["--shadow, KCM binding", shadow],
] as const) {
  console.log(
    `| ${name} | ${r.boundS.toFixed(0)} s | ${r.cpu.toFixed(1)} | ${r.rss.toFixed(0)} | ${r.peak.toFixed(0)} |`,
  );
}
