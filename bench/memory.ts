/**
 * Memory: RSS of the PV binder once its caches hold N bound PV/PVC pairs (default 50,000: 50k PVs +
 * 50k PVCs), kvc against upstream kube-controller-manager, one after the other on the same embedded
 * control plane (everything is already Bound, so neither writes and both see the same objects).
 * Each is measured after two sync periods past its start, once its RSS has been flat for 10 s.
 * kvc runs compiled (dist/) as in the image, then once more with --shadow (issue 15). Prints a markdown table; asserts nothing.
 *   npm run bench:memory [-- --pairs=50000]
 */
import { parseArgs } from "node:util";
import { CoreV1Api } from "@kubernetes/client-node";
import { LocalControlPlane } from "../src/controlplane/local-control-plane.js";
import { sleep, realClock } from "../src/runtime/clock.js";
import {
  createPreBoundPair,
  pool,
  rssMiB,
  setClaimBound,
  setVolumeBound,
  startCompiledKvc,
  type StartedController,
} from "./support.js";

const { values } = parseArgs({ options: { pairs: { type: "string", default: "50000" } } });
const N = Number(values.pairs);
const CONCURRENCY = 32;
const SYNC_PERIOD_S = 15;

const cp = await LocalControlPlane.start();
try {
  const core = cp.kubeConfig().makeApiClient(CoreV1Api);
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
    if (++done % 5000 === 0) process.stderr.write(`bench: ${done}/${N} bound pairs created\n`);
  });
  process.stderr.write(`bench: ${N} pairs in ${((performance.now() - t0) / 1000).toFixed(0)} s\n`);

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

  const flags = [`--pvclaimbinder-sync-period=${SYNC_PERIOD_S}s`];
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
  const stillBound = (await core.listNamespacedPersistentVolumeClaim({ namespace: "default" })).items.filter(
    (c) => c.status?.phase === "Bound",
  ).length;

  console.log(
    `\nPV binder memory with ${N} PVs + ${N} PVCs cached (all Bound; ${stillBound} still Bound after)\n`,
  );
  console.log("| controller | RSS MiB (settled) | RSS MiB (peak) |");
  console.log("| --- | ---: | ---: |");
  console.log(`| kvc | ${kvc.rss.toFixed(0)} | ${kvc.peak.toFixed(0)} |`);
  console.log(`| kvc --shadow | ${shadow.rss.toFixed(0)} | ${shadow.peak.toFixed(0)} |`);
  console.log(`| kube-controller-manager | ${kcm.rss.toFixed(0)} | ${kcm.peak.toFixed(0)} |`);
  console.log(`| kvc / KCM | ${(kvc.rss / kcm.rss).toFixed(2)} | ${(kvc.peak / kcm.peak).toFixed(2)} |`);
} finally {
  await cp.stop();
}
