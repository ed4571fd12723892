/**
 * Idle cost (issue 30 goal 2): the CPU kvc and upstream kube-controller-manager use in a settled
 * cluster where nothing changes, one after the other on the same embedded control plane. The cluster
 * is bench/mixed-cluster.ts's (default 100 nodes, 3,000 pods of which 10% mount a claim, 500 bound
 * PV/PVC pairs, all attached), in its steady state, so neither controller has anything to write. Both
 * run the four volume loops with the same flags and leader election on; kvc runs compiled (dist/)
 * with the image's Node options. Each is left to settle, then its CPU time (user + system, /proc) is
 * read over a fixed window. Prints a markdown table; asserts nothing.
 *   npm run bench:idle [-- --window=120 --settle=60 --nodes=100 --pods=3000 --claims=500 --quick]
 *   --cpu-prof=DIR  also writes kvc's V8 CPU profile (node --cpu-prof) to DIR
 */
import { parseArgs } from "node:util";
import { LocalControlPlane } from "../src/controlplane/local-control-plane.js";
import { realClock, sleep } from "../src/runtime/clock.js";
import { createMixedCluster } from "./mixed-cluster.js";
import { ALL_LOOPS, benchClients, cpuSeconds, startCompiledKvc, type StartedController } from "./support.js";

const { values } = parseArgs({
  options: {
    nodes: { type: "string", default: "100" },
    pods: { type: "string", default: "3000" },
    claims: { type: "string", default: "500" },
    window: { type: "string" },
    settle: { type: "string" },
    quick: { type: "boolean", default: false },
    "cpu-prof": { type: "string" },
  },
});
const WINDOW_S = Number(values.window ?? (values.quick ? 30 : 120));
/** From ready to the window: leader election, the informers' lists, the first passes. */
const SETTLE_S = Number(values.settle ?? (values.quick ? 30 : 60));
const CONCURRENCY = 32;
const progress = (line: string) => process.stderr.write(`bench: ${line}\n`);

const cp = await LocalControlPlane.start();
try {
  const size = { nodes: Number(values.nodes), pods: Number(values.pods), claims: Number(values.claims) };
  const t0 = performance.now();
  const { core, storage } = benchClients(cp);
  await createMixedCluster(core, storage, size, CONCURRENCY, progress);
  progress(`cluster created in ${((performance.now() - t0) / 1000).toFixed(0)} s`);

  /** Starts one controller, lets it settle, and returns its CPU over the window in mCPU. */
  async function measure(name: string, start: () => Promise<StartedController>): Promise<number> {
    const controller = await start();
    try {
      await sleep(realClock, SETTLE_S * 1000);
      const before = cpuSeconds(controller.pid);
      const started = performance.now();
      await sleep(realClock, WINDOW_S * 1000);
      const mcpu = ((cpuSeconds(controller.pid) - before) * 1e6) / (performance.now() - started);
      progress(`${name}: ${mcpu.toFixed(1)} mCPU`);
      return mcpu;
    } finally {
      await controller.stop();
    }
  }

  // Leader election on for both (the harness starts KCM with --leader-elect=false: the last one counts).
  const flags = ["--pvclaimbinder-sync-period=15s", `--flex-volume-plugin-dir=${cp.dir}/flexvolume`];
  const kvc = await measure("kvc", () =>
    startCompiledKvc(cp.kubeconfigPath, [`--controllers=${ALL_LOOPS.join(",")}`, ...flags], {
      leaderElect: true,
      nodeArgs: values["cpu-prof"] ? ["--cpu-prof", `--cpu-prof-dir=${values["cpu-prof"]}`] : [],
    }),
  );
  const kcm = await measure("kube-controller-manager", async () => {
    const p = await cp.startKubeControllerManager({
      controllers: [...ALL_LOOPS],
      args: [...flags, "--leader-elect=true"],
    });
    return { pid: p.pid!, stop: () => p.stop() };
  });

  console.log(
    `\nIdle CPU, settled cluster: ${size.nodes} nodes, ${size.pods} pods (10% with a claim), ${size.claims} bound and attached PV/PVC pairs; all four loops, leader election on; ${WINDOW_S} s window after ${SETTLE_S} s\n`,
  );
  console.log("| kvc mCPU | KCM mCPU | kvc / KCM |");
  console.log("| ---: | ---: | ---: |");
  console.log(`| ${kvc.toFixed(1)} | ${kcm.toFixed(1)} | ${(kvc / kcm).toFixed(2)} |`);
} finally {
  await cp.stop();
}
