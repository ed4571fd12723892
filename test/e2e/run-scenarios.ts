/**
 * The e2e scenario suite as a command: kubeconfig in, one line per scenario out, exit 1 on a failure.
 *   tsx test/e2e/run-scenarios.ts --kubeconfig=… --wffc-class=standard --csi-class=csi-hostpath-sc
 */
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
  },
});
const results = await runScenarios({
  kubeConfig: loadKubeConfig(values.kubeconfig, undefined),
  namespace: values.namespace,
  wffcClass: values["wffc-class"],
  csiClass: values["csi-class"],
  scheduleOnto: values["schedule-onto"],
});
for (const r of results) {
  console.log(
    `${r.passed ? "PASS" : "FAIL"} ${r.name} (${(r.ms / 1000).toFixed(1)} s)${r.error ? `: ${r.error}` : ""}`,
  );
}
process.exitCode = results.every((r) => r.passed) ? 0 : 1;
