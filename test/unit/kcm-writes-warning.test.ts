import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { Registry } from "prom-client";
import { KCM_FIELD_MANAGER } from "../../src/app/kcm-writes.js";
import {
  competingWriteInspector,
  CompetingWriteWarning,
  type CompetingWriteReport,
} from "../../src/app/kcm-writes-warning.js";
import { FakeClock } from "../../src/runtime/clock.js";

const SINCE = "2026-12-06T02:00:00Z";
const BEFORE = "2026-12-06T01:59:59Z";
const AFTER = "2026-12-06T02:00:05Z";

const kcmClaimRef = (time: string) => ({
  manager: KCM_FIELD_MANAGER,
  operation: "Update",
  apiVersion: "v1",
  time,
  fieldsType: "FieldsV1",
  fieldsV1: { "f:spec": { "f:claimRef": { ".": {}, "f:name": {} } } },
});

describe("competingWriteInspector: the informers' hook", () => {
  const start = Date.parse(SINCE);
  const pv = (time: string) => ({ metadata: { name: "pv-1", managedFields: [kcmClaimRef(time)] } });

  test("reports a write after kvc's start on a watched kind, nothing on others", () => {
    const reports: CompetingWriteReport[] = [];
    const inspect = competingWriteInspector({
      startedAtMs: start,
      now: () => start + 10_000,
      report: (r) => reports.push(r),
    });
    assert.equal(inspect("V1Pod"), undefined);
    const check = inspect("V1PersistentVolume");
    assert.ok(check);
    check(pv(BEFORE));
    assert.equal(reports.length, 0);
    const object = pv(AFTER);
    check(object);
    assert.equal(reports.length, 1);
    assert.equal(reports[0]?.object, object);
    assert.equal(reports[0]?.field, "spec.claimRef");
  });

  test("only writes of the last window count, so the count stops once KCM's loops are off", () => {
    let now = start + 10_000;
    const reports: CompetingWriteReport[] = [];
    const check = competingWriteInspector({
      startedAtMs: start,
      now: () => now,
      windowMs: 60_000,
      report: (r) => reports.push(r),
    })("V1PersistentVolume");
    check?.(pv(AFTER));
    now = Date.parse(AFTER) + 60_000;
    check?.(pv(AFTER));
    now += 1000;
    check?.(pv(AFTER));
    assert.equal(reports.length, 2);
  });
});

describe("CompetingWriteWarning: metric, log line and Event", () => {
  const report = (kind: CompetingWriteReport["kind"], name: string, manager = KCM_FIELD_MANAGER) =>
    ({
      manager,
      kind,
      field: kind === "Node" ? "status.volumesAttached" : "spec.claimRef",
      loop: "persistentvolume-binder-controller",
      time: AFTER,
      object: { metadata: { name, uid: `uid-${name}` } },
    }) satisfies CompetingWriteReport;

  test("counts every write; warns once per manager and kind per period, on the object written", async () => {
    const clock = new FakeClock();
    const registry = new Registry();
    const warned: { msg: string; fields: Record<string, unknown> }[] = [];
    const events: unknown[][] = [];
    const w = new CompetingWriteWarning({
      logger: {
        debug() {},
        info() {},
        warn: (fields, msg) => warned.push({ fields: fields as Record<string, unknown>, msg }),
        error() {},
      },
      events: { event: (...args) => events.push(args) },
      registry,
      clock,
      periodMs: 600_000,
    });
    w.report(report("PersistentVolume", "pv-1"));
    w.report(report("PersistentVolume", "pv-2"));
    w.report(report("Node", "node-1"));
    clock.advance(599_999);
    w.report(report("PersistentVolume", "pv-3"));
    clock.advance(1);
    w.report(report("PersistentVolume", "pv-4"));

    assert.deepEqual(
      warned.map((l) => [l.fields.kind, l.fields.object]),
      [
        ["PersistentVolume", { name: "pv-1" }],
        ["Node", { name: "node-1" }],
        ["PersistentVolume", { name: "pv-4" }],
      ],
    );
    assert.match(warned[0]?.msg ?? "", /kube-controller-manager is writing PersistentVolume spec\.claimRef/);
    assert.match(warned[0]?.msg ?? "", /--controllers .*docs\/operations\.md#installing-beside-kcm/);
    assert.equal(events.length, 3);
    assert.deepEqual(events[0]?.slice(0, 3), [
      { kind: "PersistentVolume", apiVersion: "v1", name: "pv-1", uid: "uid-pv-1" },
      "Warning",
      "CompetingWriter",
    ]);
    const metric = await registry.getSingleMetricAsString("kvc_competing_writer_writes_total");
    assert.match(
      metric,
      /kvc_competing_writer_writes_total\{manager="kube-controller-manager",kind="PersistentVolume",field="spec.claimRef"\} 4/,
    );
  });

  test("a standby (writes refused) counts and logs but sends no Event", async () => {
    const registry = new Registry();
    const warned: string[] = [];
    const events: unknown[][] = [];
    const w = new CompetingWriteWarning({
      logger: { debug() {}, info() {}, warn: (_, msg) => warned.push(msg), error() {} },
      events: { event: (...args) => events.push(args) },
      registry,
      clock: new FakeClock(),
      mayWrite: () => false,
    });
    w.report(report("PersistentVolume", "pv-1"));
    assert.equal(warned.length, 1);
    assert.deepEqual(events, []);
    assert.match(
      await registry.getSingleMetricAsString("kvc_competing_writer_writes_total"),
      /field="spec.claimRef"\} 1/,
    );
  });
});
