/**
 * Memory: settled RSS of kvc against upstream kube-controller-manager, one after the other on the same
 * embedded control plane (everything is in its steady state, so neither writes and both see the same
 * objects). Each is measured after two sync periods past its start, once its RSS has been flat for
 * 10 s. kvc runs compiled (dist/) as in the image. Prints a markdown table; asserts nothing.
 *
 * - pairs (default): the PV binder alone once its caches hold N bound PV/PVC pairs (default 50,000),
 *   kvc once more with --shadow (issue 15).
 *   npm run bench:memory [-- --pairs=50000]
 * - mixed: a realistic cluster (bench/mixed-cluster.ts; default 1,000 nodes, 30,000 pods of which 10%
 *   mount a claim, 5,000 bound PV/PVC pairs) with all four loops running: binder, attach/detach, PVC
 *   and PV protection.
 *   npm run bench:memory -- --mode=mixed [--nodes=1000 --pods=30000 --claims=5000]
 */
import { parseArgs } from "node:util";
import { LocalControlPlane } from "../src/controlplane/local-control-plane.js";
import { sleep, realClock } from "../src/runtime/clock.js";
import {
  ALL_LOOPS,
  benchClients,
  createPreBoundPair,
  pool,
  rssMiB,
  setClaimBound,
  setVolumeBound,
  startCompiledKvc,
  type StartedController,
} from "./support.js";
import { createMixedCluster } from "./mixed-cluster.js";

const { values } = parseArgs({
  options: {
    mode: { type: "string", default: "pairs" },
    pairs: { type: "string", default: "50000" },
    nodes: { type: "string", default: "1000" },
    pods: { type: "string", default: "30000" },
    claims: { type: "string", default: "5000" },
  },
});
if (values.mode !== "pairs" && values.mode !== "mixed")
  throw new Error(`--mode: pairs or mixed, not ${values.mode}`);
const N = Number(values.pairs);
const CONCURRENCY = 32;
const SYNC_PERIOD_S = 15;
const progress = (line: string) => process.stderr.write(`bench: ${line}\n`);

const cp = await LocalControlPlane.start();
try {
  const { core, storage } = benchClients(cp);

  /** Starts one controller, waits two sync periods and then for a flat RSS; returns MiB. */
  async function measure(start: () => Promise<StartedController>) {
    const started = performance.now();
    const controller = await start();
    try {
      const samples: number[] = [];
      for (;;) {
        await sleep(realClock, 1000);
        samples.push(rssMiB(controller.pid));
        const window = samples.slice(-10);
        const flat =
          window.length === 10 && Math.max(...window) - Math.min(...window) < 0.02 * Math.max(...window);
        if ((performance.now() - started) / 1000 >= 2 * SYNC_PERIOD_S && flat) break;
      }
      return { rss: samples.at(-1)!, peak: Math.max(...samples) };
    } finally {
      await controller.stop();
    }
  }
  const row = (name: string, m: { rss: number; peak: number }) =>
    `| ${name} | ${m.rss.toFixed(0)} | ${m.peak.toFixed(0)} |`;
  const ratio = (kvc: { rss: number; peak: number }, kcm: { rss: number; peak: number }) =>
    `| kvc / KCM | ${(kvc.rss / kcm.rss).toFixed(2)} | ${(kvc.peak / kcm.peak).toFixed(2)} |`;
  const flags = [`--pvclaimbinder-sync-period=${SYNC_PERIOD_S}s`];

  if (values.mode === "mixed") {
    const size = { nodes: Number(values.nodes), pods: Number(values.pods), claims: Number(values.claims) };
    const t0 = performance.now();
    await createMixedCluster(core, storage, size, CONCURRENCY, progress);
    progress(`cluster created in ${((performance.now() - t0) / 1000).toFixed(0)} s`);
    const controllers = ALL_LOOPS;
    const kcm = await measure(async () => {
      const p = await cp.startKubeControllerManager({ controllers, args: flags });
      return { pid: p.pid!, stop: () => p.stop() };
    });
    const kvc = await measure(() =>
      startCompiledKvc(cp.kubeconfigPath, [
        `--controllers=${controllers.join(",")}`,
        `--flex-volume-plugin-dir=${cp.dir}/flexvolume`,
        ...flags,
      ]),
    );
    console.log(
      `\nMemory, mixed cluster: ${size.nodes} nodes, ${size.pods} pods (10% with a claim), ${size.claims} bound PV/PVC pairs; binder, attach/detach, PVC and PV protection\n`,
    );
    console.log("| controller | RSS MiB (settled) | RSS MiB (peak) |");
    console.log("| --- | ---: | ---: |");
    console.log(row("kvc", kvc));
    console.log(row("kube-controller-manager", kcm));
    console.log(ratio(kvc, kcm));
  } else {
    const ids = Array.from({ length: N }, (_, i) => String(i).padStart(6, "0"));
    const t0 = performance.now();
    let done = 0;
    // A bound pair as the binder leaves it, so the controllers under test have nothing to write.
    await pool(ids, CONCURRENCY, async (id) => {
      await createPreBoundPair(core, {
        namespace: "default",
        claim: `pvc-${id}`,
        volume: `pv-${id}`,
        source: { hostPath: { path: `/tmp/bench/${id}` } },
        bindCompleted: true,
        claimLabels: { app: `app-${Number(id) % 100}` },
      });
      await setVolumeBound(core, `pv-${id}`);
      await setClaimBound(core, "default", `pvc-${id}`);
      if (++done % 5000 === 0) progress(`${done}/${N} bound pairs created`);
    });
    progress(`${N} pairs in ${((performance.now() - t0) / 1000).toFixed(0)} s`);

    const kcm = await measure(async () => {
      const p = await cp.startKubeControllerManager({
        controllers: ["persistentvolume-binder-controller"],
        args: flags,
      });
      return { pid: p.pid!, stop: () => p.stop() };
    });
    const kvc = await measure(() =>
      startCompiledKvc(cp.kubeconfigPath, ["--controllers=persistentvolume-binder-controller", ...flags]),
    );
    // Shadow mode (issue 15): the same loops, writes recorded, plus the comparison and the events' informers.
    const shadow = await measure(() =>
      startCompiledKvc(cp.kubeconfigPath, [
        "--shadow",
        "--controllers=persistentvolume-binder-controller",
        ...flags,
      ]),
    );
    const stillBound = (
      await core.listNamespacedPersistentVolumeClaim({ namespace: "default" })
    ).items.filter((c) => c.status?.phase === "Bound").length;

    console.log(
      `\nPV binder memory with ${N} PVs + ${N} PVCs cached (all Bound; ${stillBound} still Bound after)\n`,
    );
    console.log("| controller | RSS MiB (settled) | RSS MiB (peak) |");
    console.log("| --- | ---: | ---: |");
    console.log(row("kvc", kvc));
    console.log(row("kvc --shadow", shadow));
    console.log(row("kube-controller-manager", kcm));
    console.log(ratio(kvc, kcm));
  }
} finally {
  await cp.stop();
}
