import { createWriteStream, mkdirSync } from "node:fs";
import { join } from "node:path";
import { CoreV1Api, StorageV1Api, type KubeConfig } from "@kubernetes/client-node";
import { binaryVersions } from "../controlplane/binaries.js";
import { LocalControlPlane } from "../controlplane/local-control-plane.js";
import {
  applyDemoWorkload,
  DEMO_CSI_DRIVER,
  DEMO_EXPLAIN_COMMAND,
  DEMO_NAMESPACE,
  isSettled,
  renderDemoTable,
} from "../dev/demo.js";
import { startExternalAttacher } from "../dev/external-attacher.js";
import type { RunConfig } from "./options.js";
import { isAlreadyExists } from "../runtime/api-errors.js";
import { silentLogger } from "../runtime/logger.js";
import { run } from "./run.js";
import { sleep, realClock } from "../runtime/clock.js";

export interface DevOptions {
  /** Apply the demo workload and show its table until interrupted. */
  demo: boolean;
}

/**
 * `kvc dev`: builds (cached) and starts an embedded etcd + kube-apiserver, then runs the controllers
 * against it exactly as `kvc run` does, with the demo workload unless turned off, until interrupted;
 * then removes everything it started. Progress goes to stderr, the demo table to stdout and the
 * controllers' logs to a file (interleaved JSON would drown the table).
 */
export async function runDev(config: RunConfig, options: DevOptions): Promise<void> {
  const say = (line: string) => process.stderr.write(`kvc dev: ${line}\n`);
  const started = Date.now();
  // The build, when kube-apiserver or etcd is not cached yet, reports its own progress through `say`.
  const cp = await LocalControlPlane.start({ onProgress: say });
  try {
    const versions = await binaryVersions(cp.binaries);
    say(
      `kube-apiserver ${versions.kubernetes} and etcd ${versions.etcd} ready in ` +
        `${Math.round(cp.startup.etcdMs + cp.startup.apiserverMs)} ms`,
    );
    const logFile = join(cp.dir, "logs", "kvc.log");
    const flexDir = config.flexVolumePluginDir || join(cp.dir, "flexvolume");
    mkdirSync(flexDir, { recursive: true });
    process.stderr.write(
      [
        "",
        `  export KUBECONFIG=${cp.kubeconfigPath}`,
        options.demo
          ? `  kubectl get pv,pvc,volumeattachments -A; kubectl -n ${DEMO_NAMESPACE} get pods\n` +
            `  ${DEMO_EXPLAIN_COMMAND}   # why this claim stays Pending (npm run kvc -- explain ...)`
          : "  kubectl get pv,pvc -A",
        "",
        `  controllers: ${[...config.controllers].join(", ")}`,
        `  logs: tail -f ${logFile}`,
        `  FlexVolume drivers: ${flexDir}`,
        config.securePort > 0
          ? `  metrics: curl -k -H "Authorization: Bearer $(kubectl config view --raw -o jsonpath='{.users[0].user.token}')" https://${config.bindAddress}:${config.securePort}/metrics`
          : "",
        "  Press Ctrl-C to stop; every process and file of this run is removed.",
        "",
      ].join("\n") + "\n",
    );
    const stopDemo = new AbortController();
    const running = run(
      {
        ...config,
        kubeconfig: cp.kubeconfigPath,
        master: undefined,
        leaderElection: undefined,
        flexVolumePluginDir: flexDir,
        // Delegated authentication and authorization against the embedded apiserver, unless set.
        authentication: {
          ...config.authentication,
          kubeconfig: config.authentication.kubeconfig ?? cp.kubeconfigPath,
        },
        authorization: {
          ...config.authorization,
          kubeconfig: config.authorization.kubeconfig ?? cp.kubeconfigPath,
        },
      },
      { logDestination: createWriteStream(logFile, { flags: "a" }) },
    ).finally(() => {
      stopDemo.abort();
    });
    const demo = options.demo ? showDemo(cp.kubeConfig(), started, say, stopDemo.signal) : Promise.resolve();
    await Promise.all([running, demo]);
  } finally {
    say("stopping the control plane ...");
    await cp.stop();
  }
}

/** Applies the demo, runs the stand-in external-attacher and redraws the table until `signal` aborts. */
async function showDemo(
  kubeConfig: KubeConfig,
  started: number,
  say: (line: string) => void,
  signal: AbortSignal,
): Promise<void> {
  const core = kubeConfig.makeApiClient(CoreV1Api);
  const storage = kubeConfig.makeApiClient(StorageV1Api);
  await applyDemoWorkload(core, storage, isAlreadyExists);
  say("demo workload applied; a stand-in external-attacher plays the CSI driver's side");
  const attacher = startExternalAttacher({
    kubeConfig,
    drivers: [DEMO_CSI_DRIVER],
    log: silentLogger,
    signal,
  });
  const tty = process.stdout.isTTY;
  let shown = "";
  let settledAt: number | undefined;
  try {
    while (!signal.aborted) {
      let table: string;
      try {
        const [claims, attachments] = await Promise.all([
          core.listNamespacedPersistentVolumeClaim({ namespace: DEMO_NAMESPACE }),
          storage.listVolumeAttachment(),
        ]);
        const state = { claims: claims.items, attachments: attachments.items };
        if (settledAt === undefined && isSettled(state)) settledAt = Date.now();
        table = renderDemoTable(state);
        if (settledAt !== undefined) {
          table += `\nsettled ${((settledAt - started) / 1000).toFixed(1)} s after start; Ctrl-C to stop`;
        }
      } catch (err) {
        table = `(cannot read the demo state: ${(err as Error).message})`;
      }
      if (table !== shown) {
        // On a terminal the table is redrawn in place; otherwise each change is printed once.
        if (tty && shown) process.stdout.write(`\x1b[${shown.split("\n").length}A\x1b[J`);
        process.stdout.write(`${table}\n`);
        shown = table;
      }
      await sleep(realClock, 500, signal).catch(() => undefined);
    }
  } finally {
    await attacher.stop();
  }
}
