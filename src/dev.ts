import { once } from "node:events";
import { binaryVersions } from "./controlplane/binaries.js";
import { LocalControlPlane } from "./controlplane/local-control-plane.js";

/**
 * `kvc dev`: the embedded control plane for trying things out. The controllers are not written yet,
 * so for now this starts etcd + kube-apiserver and says how to reach them.
 */
export async function runDev(): Promise<void> {
  const log = (line: string) => process.stderr.write(`kvc dev: ${line}\n`);
  log("building the control plane if it is not cached (the first build takes 10-30 minutes) ...");
  const cp = await LocalControlPlane.start({ onProgress: log });
  const versions = await binaryVersions(cp.binaries);
  log(
    `kube-apiserver ${versions.kubernetes} and etcd ${versions.etcd} ready in ` +
      `${Math.round(cp.startup.etcdMs + cp.startup.apiserverMs)} ms`,
  );
  process.stdout.write(
    [
      "",
      `  export KUBECONFIG=${cp.kubeconfigPath}`,
      "  kubectl get --raw /version",
      "",
      "  The volume controllers are not part of this build yet: only the control plane runs.",
      "  Press Ctrl-C to stop; every process and file of this run is removed.",
      "",
    ].join("\n"),
  );
  await Promise.race([once(process, "SIGINT"), once(process, "SIGTERM")]);
  log("stopping ...");
  await cp.stop();
}
