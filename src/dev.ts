import { binaryVersions } from "./controlplane/binaries.js";
import { LocalControlPlane } from "./controlplane/local-control-plane.js";
import type { RunConfig } from "./options.js";
import { run } from "./run.js";

/**
 * `kvc dev`: builds (cached) and starts an embedded etcd + kube-apiserver, then runs the controllers
 * against it exactly as `kvc run` does, until interrupted; then removes everything it started.
 */
export async function runDev(config: RunConfig): Promise<void> {
  const say = (line: string) => process.stderr.write(`kvc dev: ${line}\n`);
  say("building the control plane if it is not cached (the first build takes 10-30 minutes) ...");
  const cp = await LocalControlPlane.start({ onProgress: say });
  try {
    const versions = await binaryVersions(cp.binaries);
    say(
      `kube-apiserver ${versions.kubernetes} and etcd ${versions.etcd} ready in ` +
        `${Math.round(cp.startup.etcdMs + cp.startup.apiserverMs)} ms`,
    );
    process.stderr.write(
      [
        "",
        `  export KUBECONFIG=${cp.kubeconfigPath}`,
        "  kubectl get pv,pvc -A",
        "",
        `  controllers: ${[...config.controllers].join(", ")}`,
        config.securePort > 0 ? `  metrics: http://${config.bindAddress}:${config.securePort}/metrics` : "",
        "  Press Ctrl-C to stop; every process and file of this run is removed.",
        "",
      ].join("\n") + "\n",
    );
    await run({ ...config, kubeconfig: cp.kubeconfigPath, master: undefined, leaderElection: undefined });
  } finally {
    say("stopping the control plane ...");
    await cp.stop();
  }
}
