/*
 * Every metric the chart's dashboard and alert rules name is one a running kvc exports: the names
 * in each PromQL expression (test/support/promql.ts) against a real /metrics scrape of kvc run
 * against the real kube-apiserver, in production mode and in shadow mode (kvc_shadow_* exists only
 * there). A histogram offers only its _bucket, _sum and _count series (test/support/exposition.ts).
 */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { LocalControlPlane } from "../../src/controlplane/local-control-plane.js";
import { waitFor } from "../../src/util/wait.js";
import { exposedSeries } from "../support/exposition.js";
import { killAllKvc, startKvc, type KvcProcess } from "../support/kvc-process.js";
import { dashboardExpressions, rules } from "../support/monitoring.js";
import { metricNames } from "../support/promql.js";

/** Every queue of the four loops: present (at 0) once each loop has been built. */
const QUEUES = ["volumes", "claims", "pvcs", "pvcprotection", "pvprotection"];

/**
 * Names PromQL may use that no kvc exports: `up`, which Prometheus writes per scrape target, and
 * the outputs of the rule file's recording rules.
 */
function notKvcMetrics(): Set<string> {
  return new Set(["up", ...rules().flatMap((r) => (r.record ? [r.record] : []))]);
}

/** The /metrics body once every loop's queue is there (the loops are built once kvc leads). */
async function scrapeWithLoops(kvc: KvcProcess): Promise<string> {
  return waitFor(
    async () => {
      const body = (await kvc.get("/metrics")).body;
      return QUEUES.every((q) => body.includes(`workqueue_depth{name="${q}"}`)) ? body : undefined;
    },
    { timeoutMs: 60_000, what: "kvc to build its loops" },
  );
}

describe("dashboard and alert metrics against a real kvc /metrics", () => {
  let cp: LocalControlPlane;
  let exported: Map<string, string>;

  before(async () => {
    cp = await LocalControlPlane.start();
    const [leader, shadow] = await Promise.all([
      startKvc(cp.kubeconfigPath, [
        "--leader-elect-resource-namespace=default",
        "--leader-elect-resource-name=kvc-monitoring-test",
      ]),
      startKvc(cp.kubeconfigPath, ["--shadow"]),
    ]);
    const bodies = await Promise.all([scrapeWithLoops(leader), scrapeWithLoops(shadow)]);
    exported = new Map(bodies.flatMap((body) => [...exposedSeries(body)]));
  });
  after(async () => {
    killAllKvc();
    await cp.stop();
  });

  test("every metric of every dashboard and rule expression is in the scrape", () => {
    const expressions = [
      ...dashboardExpressions(),
      ...rules().map((r) => ({ where: `rule ${r.alert ?? r.record ?? ""}`, expr: r.expr })),
    ];
    const skip = notKvcMetrics();
    const missing: string[] = [];
    const checked = new Set<string>();
    for (const { where, expr } of expressions) {
      const names = metricNames(expr);
      assert.ok(names.length > 0, `${where}: no metric found in ${expr}`);
      for (const name of names) {
        if (skip.has(name)) continue;
        checked.add(name);
        if (!exported.has(name)) missing.push(`${where}: ${name}`);
      }
    }
    assert.deepEqual(missing, [], "metrics kvc does not export");
    // The dashboard and the rules together name most of what kvc exports: a parser finding few is broken.
    assert.ok(checked.size >= 20, `only ${checked.size} metrics found: ${[...checked].join(", ")}`);
  });
});
