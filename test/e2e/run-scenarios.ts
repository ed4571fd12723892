/**
 * The e2e scenario suite as a command: kubeconfig in, one line per scenario out, exit 1 on a failure.
 *   tsx test/e2e/run-scenarios.ts --kubeconfig=… --wffc-class=standard --csi-class=csi-hostpath-sc
 * On a cluster with a real node: --kubelet (pods are deleted gracefully), --pod-image, --data-image (with sh: the data scenario runs),
 * --hostpath-data-dir (the csi-hostpath driver's directory on the node: Delete reclaim must empty it
 * of the volume) and --attached-by (the field manager that must create VolumeAttachments).
 */
import { existsSync } from "node:fs";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { loadKubeConfig } from "../../src/runtime/client.js";
import { runScenarios } from "./scenarios.js";

const { values } = parseArgs({
  options: {
    kubeconfig: { type: "string" },
    namespace: { type: "string", default: "kvc-e2e" },
    "wffc-class": { type: "string", default: "standard" },
    "csi-class": { type: "string", default: "csi-hostpath-sc" },
    "schedule-onto": { type: "string" },
    kubelet: { type: "boolean", default: false },
    "pod-image": { type: "string" },
    "data-image": { type: "string" },
    "hostpath-data-dir": { type: "string" },
    "attached-by": { type: "string" },
  },
});
const dataDir = values["hostpath-data-dir"];
const results = await runScenarios({
  kubeConfig: loadKubeConfig(values.kubeconfig, undefined),
  namespace: values.namespace,
  wffcClass: values["wffc-class"],
  csiClass: values["csi-class"],
  scheduleOnto: values["schedule-onto"],
  kubelet: values.kubelet,
  podImage: values["pod-image"],
  dataImage: values["data-image"],
  attachedBy: values["attached-by"],
  driverHasVolume: dataDir ? (handle) => Promise.resolve(existsSync(join(dataDir, handle))) : undefined,
});
for (const r of results) {
  console.log(
    `${r.passed ? "PASS" : "FAIL"} ${r.name} (${(r.ms / 1000).toFixed(1)} s)${r.error ? `: ${r.error}` : ""}`,
  );
}
process.exitCode = results.every((r) => r.passed) ? 0 : 1;
