/*
 * Every metric the chart's dashboard and alert rules name is one a running kvc exports: the names
 * in each PromQL expression (test/support/promql.ts) against a real /metrics scrape of kvc run
 * against the real kube-apiserver, in production mode and in shadow mode (kvc_shadow_* exists only
 * there). A histogram offers only its _bucket, _sum and _count series (test/support/exposition.ts).
 */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { CoreV1Api, StorageV1Api } from "@kubernetes/client-node";
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
  let leader: KvcProcess;

  before(async () => {
    cp = await LocalControlPlane.start();
    let shadow: KvcProcess;
    [leader, shadow] = await Promise.all([
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

  test("the alerts' gauges: a claim waiting for its first consumer apart from one to bind, VolumeAttachments pending", async () => {
    const core = cp.kubeConfig().makeApiClient(CoreV1Api);
    const storage = cp.kubeConfig().makeApiClient(StorageV1Api);
    await storage.createStorageClass({
      body: {
        metadata: { name: "monitoring-wait" },
        provisioner: "example.com/none",
        volumeBindingMode: "WaitForFirstConsumer",
      },
    });
    const claim = async (name: string, storageClassName: string) =>
      core.createNamespacedPersistentVolumeClaim({
        namespace: "default",
        body: {
          metadata: { name },
          spec: {
            storageClassName,
            accessModes: ["ReadWriteOnce"],
            resources: { requests: { storage: "1Gi" } },
          },
        },
      });
    // No pod uses it: it waits by design. No class and no PV: nothing will ever bind it.
    const noPod = await claim("monitoring-no-pod", "monitoring-wait");
    const noVolume = await claim("monitoring-no-volume", "");
    const attachment = async (name: string, finalizers: string[] = []) =>
      storage.createVolumeAttachment({
        body: {
          metadata: { name, finalizers },
          spec: {
            attacher: "monitoring.csi.example.com",
            nodeName: "monitoring-node",
            source: { persistentVolumeName: name },
          },
        },
      });
    const attaching = await attachment("monitoring-attaching");
    await attachment("monitoring-detaching", ["example.com/hold"]);
    const detaching = await storage.deleteVolumeAttachment({ name: "monitoring-detaching" });

    const seconds = (time: Date | undefined) => String((time?.getTime() ?? Number.NaN) / 1000);
    const expected = [
      `kvc_unbound_pvc_oldest_creation_timestamp_seconds{storage_class="monitoring-wait",waiting_for="first_consumer"} ${seconds(noPod.metadata?.creationTimestamp)}`,
      `kvc_unbound_pvc_oldest_creation_timestamp_seconds{storage_class="",waiting_for="binding"} ${seconds(noVolume.metadata?.creationTimestamp)}`,
      `kvc_volumeattachment_oldest_pending_timestamp_seconds{attacher="monitoring.csi.example.com",operation="attach"} ${seconds(attaching.metadata?.creationTimestamp)}`,
      `kvc_volumeattachment_oldest_pending_timestamp_seconds{attacher="monitoring.csi.example.com",operation="detach"} ${seconds(detaching.metadata?.deletionTimestamp)}`,
    ];
    let body = "";
    await waitFor(
      async () => {
        body = (await leader.get("/metrics")).body;
        return expected.every((line) => body.split("\n").includes(line));
      },
      { timeoutMs: 30_000, what: "the gauges to report the claims and VolumeAttachments" },
    ).catch((err: unknown) => {
      const ours = body.split("\n").filter((l) => l.startsWith("kvc_"));
      throw new Error(`${String(err)}\nwanted:\n${expected.join("\n")}\ngot:\n${ours.join("\n")}`);
    });
  });
});
