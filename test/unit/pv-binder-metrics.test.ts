/*
 * The binder's metrics (upstream pkg/controller/volume/persistentvolume/metrics): the pv_collector
 * gauges counted from the controller's cache on scrape, provision/delete operations timed from their
 * first start to the end of their lifecycle with failures counted meanwhile, and retroactive default
 * StorageClass assignments.
 */
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import type { V1PersistentVolume, V1PersistentVolumeClaim, V1StorageClass } from "@kubernetes/client-node";
import { pino } from "pino";
import { Registry } from "prom-client";
import { ANN_IS_DEFAULT_STORAGE_CLASS, ANN_SELECTED_NODE } from "../../src/persistentvolume/annotations.js";
import { PersistentVolumeMetrics } from "../../src/persistentvolume/metrics.js";
import { PersistentVolumeController } from "../../src/persistentvolume/pv-controller.js";
import { BETA_STORAGE_CLASS_ANNOTATION } from "../../src/persistentvolume/pv-helpers.js";
import { silentLogger } from "../../src/runtime/logger.js";
import { VolumePluginManager } from "../../src/volume/plugin-manager.js";
import {
  claimKeyOf,
  FakeBinderApi,
  MOCK_PLUGIN,
  MockVolumePlugin,
  modify,
  newClaim,
  newExternalVolume,
  newVolume,
  storageClass,
  TestClock,
  withAnnotation,
  withVAC,
  withVolumeMode,
  type PluginCalls,
  type ReactorError,
} from "./pv-binder-framework.js";

interface Setup {
  classes?: V1StorageClass[];
  /** Registers the mock plugin (which supports every volume) with these scripted results. */
  plugin?: PluginCalls;
  volumes?: V1PersistentVolume[];
  claims?: V1PersistentVolumeClaim[];
  errors?: ReactorError[];
  registry?: Registry;
}

/** A controller over the framework's fake API, with metrics on a registry of its own unless given one. */
function newController(setup: Setup = {}) {
  const registry = setup.registry ?? new Registry();
  const api = new FakeBinderApi(setup.errors);
  const clock = new TestClock();
  const plugins = new VolumePluginManager(pino({ level: "silent" }));
  if (setup.plugin) plugins.register([new MockVolumePlugin(setup.plugin)]);
  const classes = setup.classes ?? [];
  const ctrl = new PersistentVolumeController({
    api,
    classes: {
      get: (name) => classes.find((c) => c.metadata?.name === name),
      list: () => classes,
    },
    claims: { get: () => undefined, list: () => [] },
    volumes: { get: (name) => api.volumes.get(name), list: () => [...api.volumes.values()] },
    nodes: { get: () => undefined, list: () => [] },
    pods: { byIndex: () => [] },
    events: { event: () => {} },
    plugins,
    clock,
    log: silentLogger,
    enqueueClaim: () => {},
    enqueueVolume: () => {},
    options: { enableDynamicProvisioning: true },
    metrics: new PersistentVolumeMetrics(registry),
  });
  const volumes = setup.volumes ?? [];
  const claims = setup.claims ?? [];
  ctrl.initializeCaches(volumes, claims);
  for (const volume of volumes) api.addVolume(volume);
  for (const claim of claims) api.addClaim(claim);
  /** Feeds the API's current claim through the controller, as its informer and worker would. */
  const syncClaim = async (key: string) => {
    const claim = api.claims.get(key);
    assert.ok(claim, `no claim ${key}`);
    await ctrl.updateClaim(structuredClone(claim));
    await ctrl.waitForOperations();
  };
  const syncVolume = async (name: string) => {
    const volume = api.volumes.get(name);
    assert.ok(volume, `no volume ${name}`);
    await ctrl.updateVolume(structuredClone(volume));
    await ctrl.waitForOperations();
  };
  return { registry, api, clock, ctrl, syncClaim, syncVolume };
}

type Labels = Partial<Record<string, string | number>>;

const byKey = ([a]: [string, number], [b]: [string, number]) => (a < b ? -1 : a > b ? 1 : 0);

function labelKey(labels: Labels): string {
  return Object.entries(labels)
    .map(([k, v]) => `${k}=${String(v)}`)
    .sort()
    .join(",");
}

/** The metric's series named `series` (e.g. a histogram's _sum), as "labels → value". */
async function samples(registry: Registry, metric: string, series = metric): Promise<Map<string, number>> {
  const found = registry.getSingleMetric(metric);
  assert.ok(found, `${metric} is not registered`);
  const { values } = await found.get();
  return new Map(
    values
      .filter((v) => ("metricName" in v ? v.metricName : metric) === series)
      .map((v): [string, number] => [labelKey(v.labels), v.value])
      .sort(byKey),
  );
}

/** The expected samples, comparable with samples(). */
function series(...entries: [Labels, number][]): Map<string, number> {
  return new Map(entries.map(([labels, n]): [string, number] => [labelKey(labels), n]).sort(byKey));
}

const op = (operation: string, plugin = MOCK_PLUGIN) => ({ plugin_name: plugin, operation_name: operation });

/** The end-to-end histogram's _count and _sum, and both error counters, for one plugin and operation. */
async function operation(registry: Registry, labels: Labels) {
  const get = async (metric: string, name = metric) =>
    (await samples(registry, metric, name)).get(labelKey(labels)) ?? 0;
  return {
    count: await get("volume_operation_total_seconds", "volume_operation_total_seconds_count"),
    seconds: await get("volume_operation_total_seconds", "volume_operation_total_seconds_sum"),
    errors: await get("volume_operation_total_errors"),
    errorsTotal: await get("volume_operation_errors_total"),
  };
}

describe("PV binder metrics", () => {
  test("registers upstream's names, kinds and buckets, once per registry", async () => {
    const registry = new Registry();
    new PersistentVolumeMetrics(registry);
    // A second controller on the same registry reuses the instruments instead of throwing.
    new PersistentVolumeMetrics(registry);
    const kinds = Object.fromEntries(
      (await registry.getMetricsAsJSON()).map((m) => [m.name, { type: m.type, help: m.help }]),
    );
    assert.deepEqual(Object.keys(kinds).sort(), [
      // Not upstream's: its own test below.
      "kvc_unbound_pvc_oldest_creation_timestamp_seconds",
      "pv_collector_bound_pv_count",
      "pv_collector_bound_pvc_count",
      "pv_collector_total_pv_count",
      "pv_collector_unbound_pv_count",
      "pv_collector_unbound_pvc_count",
      "retroactive_storageclass_errors_total",
      "retroactive_storageclass_total",
      "volume_operation_errors_total",
      "volume_operation_total_errors",
      "volume_operation_total_seconds",
    ]);
    assert.equal(kinds.pv_collector_total_pv_count?.type, "gauge");
    assert.equal(kinds.volume_operation_total_errors?.type, "counter");
    assert.equal(kinds.volume_operation_total_seconds?.type, "histogram");
    assert.equal(
      kinds.volume_operation_total_seconds?.help,
      "Storage operation end to end duration in seconds",
    );

    const {
      registry: r,
      ctrl,
      clock,
    } = newController({
      plugin: { delete: [undefined] },
      volumes: [newVolume("volume", "1Gi", "uid", "claim", "Bound", "Delete", "")],
    });
    await ctrl.syncVolume(structuredClone(newVolume("volume", "1Gi", "uid", "claim", "Bound", "Delete", "")));
    await ctrl.waitForOperations();
    clock.advance(1);
    ctrl.deleteVolume(ctrl.cachedVolume("volume")!);
    const text = await r.metrics();
    const buckets = [...text.matchAll(/^volume_operation_total_seconds_bucket\{le="([^"]+)"/gm)].map(
      (m) => m[1],
    );
    assert.deepEqual(buckets, [
      "0.1",
      "0.25",
      "0.5",
      "1",
      "2.5",
      "5",
      "10",
      "15",
      "25",
      "50",
      "120",
      "300",
      "600",
      "+Inf",
    ]);
  });

  test("pv_collector gauges count the controller's cache on every scrape", async () => {
    const otherNamespace = modify(newClaim("claim5", "uid5", "1Gi", "", "Pending", undefined), (c) => {
      c.metadata!.namespace = "other";
    });
    const { registry, ctrl } = newController({
      plugin: {},
      volumes: [
        newVolume("pv-bound", "1Gi", "uid1", "claim1", "Bound", "Retain", "gold"),
        newVolume("pv-available", "1Gi", "", "", "Available", "Retain", "gold"),
        newVolume("pv-released", "1Gi", "uid9", "claim9", "Released", "Retain", ""),
        withVolumeMode(newVolume("pv-block", "1Gi", "", "", "Available", "Retain", "silver"), "Block"),
        newExternalVolume("pv-csi", "1Gi", "uid2", "claim2", "Bound", "Delete", "gold", "ebs.csi.aws.com"),
      ],
      claims: [
        newClaim("claim1", "uid1", "1Gi", "pv-bound", "Bound", "gold"),
        newClaim("claim2", "uid2", "1Gi", "pv-csi", "Bound", "gold"),
        newClaim("claim3", "uid3", "1Gi", "", "Pending", "gold"),
        withVAC(newClaim("claim4", "uid4", "1Gi", "", "Pending", "silver"), "fast"),
        otherNamespace,
        // The beta annotation wins over spec.storageClassName, as GetPersistentVolumeClaimClass.
        withAnnotation(
          newClaim("claim6", "uid6", "1Gi", "", "Pending", "gold"),
          BETA_STORAGE_CLASS_ANNOTATION,
          "bronze",
        ),
      ],
    });
    const fs = "Filesystem";
    assert.deepEqual(
      await samples(registry, "pv_collector_total_pv_count"),
      series(
        [{ plugin_name: MOCK_PLUGIN, volume_mode: fs }, 3],
        [{ plugin_name: MOCK_PLUGIN, volume_mode: "Block" }, 1],
        // CSI volumes carry their driver (GetFullQualifiedPluginNameForVolume).
        [{ plugin_name: `${MOCK_PLUGIN}:ebs.csi.aws.com`, volume_mode: fs }, 1],
      ),
    );
    assert.deepEqual(
      await samples(registry, "pv_collector_bound_pv_count"),
      series([{ storage_class: "gold" }, 2]),
    );
    assert.deepEqual(
      await samples(registry, "pv_collector_unbound_pv_count"),
      series([{ storage_class: "gold" }, 1], [{ storage_class: "" }, 1], [{ storage_class: "silver" }, 1]),
    );
    const pvc = (namespace: string, storageClass: string, vac = "") => ({
      namespace,
      storage_class: storageClass,
      volume_attributes_class: vac,
    });
    assert.deepEqual(
      await samples(registry, "pv_collector_bound_pvc_count"),
      series([pvc("default", "gold"), 2]),
    );
    assert.deepEqual(
      await samples(registry, "pv_collector_unbound_pvc_count"),
      series(
        [pvc("default", "gold"), 1],
        [pvc("default", "silver", "fast"), 1],
        [pvc("other", ""), 1],
        [pvc("default", "bronze"), 1],
      ),
    );

    // Deletions leave the cache, and series nothing has any more disappear.
    ctrl.deleteVolume(ctrl.cachedVolume("pv-block")!);
    ctrl.deleteClaim(ctrl.cachedClaim("default/claim4")!);
    assert.deepEqual(
      await samples(registry, "pv_collector_unbound_pv_count"),
      series([{ storage_class: "gold" }, 1], [{ storage_class: "" }, 1]),
    );
    assert.deepEqual(
      await samples(registry, "pv_collector_unbound_pvc_count"),
      series([pvc("default", "gold"), 1], [pvc("other", ""), 1], [pvc("default", "bronze"), 1]),
    );

    // A stopped controller's cache is no longer counted.
    await ctrl.shutdown();
    assert.deepEqual(await samples(registry, "pv_collector_total_pv_count"), new Map());
    assert.deepEqual(await samples(registry, "pv_collector_bound_pvc_count"), new Map());
  });

  test("the oldest unbound claim's creation time is kept apart for claims waiting for a first consumer", async () => {
    const created = (claim: V1PersistentVolumeClaim, iso: string) =>
      modify(claim, (c) => {
        c.metadata!.creationTimestamp = new Date(iso);
      });
    const { registry } = newController({
      classes: [
        storageClass("wait", MOCK_PLUGIN, "WaitForFirstConsumer"),
        storageClass("now", MOCK_PLUGIN, "Immediate"),
      ],
      claims: [
        created(newClaim("no-pod", "uid1", "1Gi", "", "Pending", "wait"), "2026-01-01T00:00:00Z"),
        // The scheduler chose a node: binding it is the binder's (and a provisioner's) work now.
        created(
          withAnnotation(
            newClaim("scheduled", "uid2", "1Gi", "", "Pending", "wait"),
            ANN_SELECTED_NODE,
            "node1",
          ),
          "2026-01-02T00:00:00Z",
        ),
        created(newClaim("immediate-old", "uid3", "1Gi", "", "Pending", "now"), "2026-01-03T00:00:00Z"),
        created(newClaim("immediate-new", "uid4", "1Gi", "", "Pending", "now"), "2026-01-04T00:00:00Z"),
        created(newClaim("bound", "uid5", "1Gi", "pv", "Bound", "now"), "2025-01-01T00:00:00Z"),
      ],
    });
    const seconds = (iso: string) => Date.parse(iso) / 1000;
    assert.deepEqual(
      await samples(registry, "kvc_unbound_pvc_oldest_creation_timestamp_seconds"),
      series(
        [{ storage_class: "wait", waiting_for: "first_consumer" }, seconds("2026-01-01T00:00:00Z")],
        [{ storage_class: "wait", waiting_for: "binding" }, seconds("2026-01-02T00:00:00Z")],
        [{ storage_class: "now", waiting_for: "binding" }, seconds("2026-01-03T00:00:00Z")],
      ),
    );
  });

  test("a volume no plugin supports counts as plugin N/A; controllers sharing a registry add up", async () => {
    const registry = new Registry();
    const volume = (name: string) => newVolume(name, "1Gi", "", "", "Available", "Retain", "gold");
    newController({ registry, volumes: [volume("a")] });
    newController({ registry, volumes: [volume("b"), volume("c")] });
    assert.deepEqual(
      await samples(registry, "pv_collector_total_pv_count"),
      series([{ plugin_name: "N/A", volume_mode: "Filesystem" }, 3]),
    );
  });

  test("provisioning is timed from its first attempt to the claim's binding; failures count as errors", async () => {
    const gold = storageClass("gold", MOCK_PLUGIN, "Immediate", { reclaimPolicy: "Delete" });
    const claim = newClaim("claim", "uid", "1Gi", "", "Pending", "gold");
    const { registry, clock, syncClaim } = newController({
      classes: [gold],
      plugin: {
        provision: [
          { expectedParameters: {}, ret: new Error("Mock provisioner error") },
          { expectedParameters: {} },
        ],
      },
      claims: [claim],
    });
    const key = claimKeyOf(claim);

    await syncClaim(key);
    assert.deepEqual(await operation(registry, op("provision")), {
      count: 0,
      seconds: 0,
      errors: 1,
      errorsTotal: 1,
    });

    // Past the operation's backoff, the second attempt provisions the volume ...
    clock.advance(1_000);
    await syncClaim(key);
    assert.deepEqual(await operation(registry, op("provision")), {
      count: 0,
      seconds: 0,
      errors: 1,
      errorsTotal: 1,
    });
    // ... and the sync that binds the claim to it ends the operation, timed from the first attempt.
    clock.advance(1_500);
    await syncClaim(key);
    assert.deepEqual(await operation(registry, op("provision")), {
      count: 1,
      seconds: 2.5,
      errors: 1,
      errorsTotal: 1,
    });
  });

  test("external provisioning is labelled with the class's provisioner; a deleted claim is forgotten", async () => {
    const external = storageClass("external", "vendor.com/my-volume", "Immediate");
    const claim = newClaim("claim", "uid", "1Gi", "", "Pending", "external");
    const { registry, ctrl, clock, api, syncClaim, syncVolume } = newController({
      classes: [external],
      claims: [claim, newClaim("deleted", "uid-d", "1Gi", "", "Pending", "external")],
    });
    await syncClaim("default/claim");
    await syncClaim("default/deleted");
    // The claim goes before its provisioning ends: nothing is observed for it, even under its name.
    ctrl.deleteClaim(ctrl.cachedClaim("default/deleted")!);
    api.claims.delete("default/deleted");

    // A new claim of the deleted one's name, and the external provisioner's PVs, pre-bound by name.
    clock.advance(4_000);
    api.addClaim(newClaim("deleted", "uid-new", "1Gi", "", "Pending", "external"));
    for (const name of ["claim", "deleted"]) {
      api.addVolume(newVolume(`pv-${name}`, "1Gi", "", name, "Pending", "Delete", "external"));
      await syncVolume(`pv-${name}`);
    }
    await syncClaim("default/claim");
    await syncClaim("default/deleted");
    assert.equal(api.claims.get("default/deleted")?.spec?.volumeName, "pv-deleted");
    assert.deepEqual(await operation(registry, op("provision", "vendor.com/my-volume")), {
      count: 1,
      seconds: 4,
      errors: 0,
      errorsTotal: 0,
    });
  });

  test("deletion is timed from its first attempt until the PV is gone; failures count as errors", async () => {
    const volume = newVolume("volume", "1Gi", "uid", "claim", "Bound", "Delete", "");
    const { registry, ctrl, clock, api, syncVolume } = newController({
      plugin: { delete: [new Error("Mock delete error"), undefined] },
      volumes: [volume],
    });
    await syncVolume("volume");
    assert.deepEqual(await operation(registry, op("delete")), {
      count: 0,
      seconds: 0,
      errors: 1,
      errorsTotal: 1,
    });

    // The Failed volume is retried past the backoff; the storage and the PV go.
    clock.advance(1_000);
    await syncVolume("volume");
    assert.equal(api.volumes.has("volume"), false);
    assert.deepEqual((await operation(registry, op("delete"))).count, 0);

    // The PV's deletion event ends the operation.
    clock.advance(2_000);
    ctrl.deleteVolume(ctrl.cachedVolume("volume")!);
    assert.deepEqual(await operation(registry, op("delete")), {
      count: 1,
      seconds: 3,
      errors: 1,
      errorsTotal: 1,
    });
  });

  test("retroactive default StorageClass assignments and their failures are counted", async () => {
    const gold = storageClass("gold", "kubernetes.io/no-provisioner", "Immediate", {
      metadata: { name: "gold", annotations: { [ANN_IS_DEFAULT_STORAGE_CLASS]: "true" } },
    });
    const { registry, syncClaim } = newController({
      classes: [gold],
      claims: [
        newClaim("fails", "uid1", "1Gi", "", "Pending", undefined),
        newClaim("assigned", "uid2", "1Gi", "", "Pending", undefined),
      ],
      errors: [{ verb: "update", resource: "persistentvolumeclaims", error: new Error("Mock update error") }],
    });
    await assert.rejects(syncClaim("default/fails"), /can't update PersistentVolumeClaim/);
    await syncClaim("default/assigned");
    const value = async (metric: string) => (await samples(registry, metric)).get("") ?? 0;
    assert.equal(await value("retroactive_storageclass_total"), 2);
    assert.equal(await value("retroactive_storageclass_errors_total"), 1);
  });
});
