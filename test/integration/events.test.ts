import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { CoreV1Api, type CoreV1Event, type V1PersistentVolume } from "@kubernetes/client-node";
import { LocalControlPlane } from "../../src/controlplane/local-control-plane.js";
import { FakeClock, realClock, type Clock } from "../../src/runtime/clock.js";
import { combinedMessagePrefix, type CorrelatorOptions } from "../../src/runtime/events/correlator.js";
import { silentLogger } from "../../src/runtime/logger.js";
import { EventRecorder } from "../../src/runtime/events/recorder.js";
import { objectReference } from "../../src/runtime/events/reference.js";

const component = "persistentvolume-controller";

/** client-node's models are classes; compare their fields only. */
function plain(value: unknown): unknown {
  return JSON.parse(JSON.stringify(value));
}

describe("event recorder on a real apiserver", () => {
  let cp: LocalControlPlane;
  let core: CoreV1Api;
  const errors: string[] = [];

  before(async () => {
    cp = await LocalControlPlane.start();
    core = cp.kubeConfig().makeApiClient(CoreV1Api);
  });
  after(() => cp.stop());

  /** A recorder whose failures fail the test: every write must be accepted by the apiserver. */
  function recorder(clock: Clock = realClock, correlator: Partial<CorrelatorOptions> = {}): EventRecorder {
    return new EventRecorder({
      component,
      host: "kvc-test",
      core,
      clock,
      correlator,
      logger: {
        ...silentLogger,
        error: (fields, msg) => errors.push(`${msg} ${JSON.stringify(fields)}`),
      },
    });
  }

  async function createPv(name: string): Promise<V1PersistentVolume> {
    return core.createPersistentVolume({
      body: {
        metadata: { name },
        spec: {
          capacity: { storage: "1Gi" },
          accessModes: ["ReadWriteOnce"],
          storageClassName: "manual",
          hostPath: { path: `/tmp/${name}` },
        },
      },
    });
  }

  async function eventsAbout(namespace: string, uid: string): Promise<CoreV1Event[]> {
    const list = await core.listNamespacedEvent({ namespace, fieldSelector: `involvedObject.uid=${uid}` });
    return list.items;
  }

  test("100 identical events about a PV become one Event with count 100 when the spam filter allows them", async () => {
    const pv = await createPv("events-identical");
    const r = recorder(realClock, { spamBurst: 1000 });
    for (let i = 0; i < 100; i++) r.event(pv, "Warning", "VolumeFailedRecycle", "recycler pod failed");
    await r.close();

    const events = await eventsAbout("default", pv.metadata!.uid!);
    assert.equal(events.length, 1);
    const [e] = events;
    assert.equal(e!.count, 100);
    assert.equal(e!.type, "Warning");
    assert.equal(e!.reason, "VolumeFailedRecycle");
    assert.equal(e!.message, "recycler pod failed");
    assert.deepEqual(plain(e!.involvedObject), {
      kind: "PersistentVolume",
      apiVersion: "v1",
      name: "events-identical",
      uid: pv.metadata!.uid,
      resourceVersion: pv.metadata!.resourceVersion,
    });
    assert.deepEqual(plain(e!.source), { component, host: "kvc-test" });
    assert.equal(e!.reportingComponent, component);
    assert.equal(e!.reportingInstance, "kvc-test");
    assert.ok(e!.firstTimestamp instanceof Date && e!.lastTimestamp instanceof Date);
    assert.ok(e!.firstTimestamp <= e!.lastTimestamp);
    assert.equal(e!.eventTime ?? null, null, "core/v1 events from this recorder have no eventTime");
    assert.deepEqual(errors, []);
  });

  test("with upstream's spam limits 100 identical events give count 25; the next, 5 minutes on, the total", async () => {
    const pv = await createPv("events-spam");
    const clock = new FakeClock();
    const r = recorder(clock);
    for (let i = 0; i < 100; i++) r.event(pv, "Warning", "VolumeFailedDelete", "no deleter");
    await r.flush();
    const [burst, ...rest] = await eventsAbout("default", pv.metadata!.uid!);
    assert.equal(rest.length, 0);
    assert.equal(burst!.count, 25, "the per-object budget of 25 let the first 25 through");

    // One token a 5 minutes: the next repeat is written, counting the 75 dropped ones as upstream.
    clock.advance(300_000);
    r.event(pv, "Warning", "VolumeFailedDelete", "no deleter");
    await r.close();
    const [after] = await eventsAbout("default", pv.metadata!.uid!);
    assert.equal(after!.metadata.name, burst!.metadata.name);
    assert.equal(after!.count, 101);
    assert.equal(after!.lastTimestamp!.getTime() - after!.firstTimestamp!.getTime(), 300_000);
    assert.deepEqual(errors, []);
  });

  test("events about a namespaced PVC land in its namespace with its reference", async () => {
    await core.createNamespace({ body: { metadata: { name: "events-ns" } } });
    await core.createNamespacedPersistentVolumeClaim({
      namespace: "events-ns",
      body: {
        metadata: { name: "claim" },
        spec: { accessModes: ["ReadWriteOnce"], resources: { requests: { storage: "1Gi" } } },
      },
    });
    // Objects from a list carry no kind, as informer caches' do not.
    const [pvc] = (await core.listNamespacedPersistentVolumeClaim({ namespace: "events-ns" })).items;
    assert.equal(pvc!.kind, undefined);
    const r = recorder();
    r.event(
      objectReference(pvc!, "PersistentVolumeClaim"),
      "Normal",
      "ExternalProvisioning",
      "waiting for a volume",
    );
    await r.close();

    const [e, ...rest] = await eventsAbout("events-ns", pvc!.metadata!.uid!);
    assert.equal(rest.length, 0);
    assert.equal(e!.metadata.namespace, "events-ns");
    assert.deepEqual(plain(e!.involvedObject), {
      kind: "PersistentVolumeClaim",
      apiVersion: "v1",
      name: "claim",
      namespace: "events-ns",
      uid: pvc!.metadata!.uid,
      resourceVersion: pvc!.metadata!.resourceVersion,
    });
    assert.equal(e!.source?.component, component);
    assert.equal(e!.type, "Normal");
    assert.equal(e!.reason, "ExternalProvisioning");
    assert.equal(e!.message, "waiting for a volume");
    assert.equal(e!.count, 1);
    assert.deepEqual(await eventsAbout("default", pvc!.metadata!.uid!), []);
    assert.deepEqual(errors, []);
  });

  test("the 10th different message for one reason starts a combined Event that later ones update", async () => {
    const pv = await createPv("events-similar");
    const r = recorder();
    for (let i = 1; i <= 12; i++) r.event(pv, "Warning", "VolumeFailedMount", `attempt ${i} failed`);
    await r.close();

    const events = await eventsAbout("default", pv.metadata!.uid!);
    const messages = events.map((e) => e.message).sort();
    assert.equal(events.length, 10);
    const combined = events.find((e) => e.message?.startsWith(combinedMessagePrefix));
    assert.equal(combined?.message, `${combinedMessagePrefix}attempt 12 failed`);
    assert.equal(combined.count, 3);
    for (let i = 1; i <= 9; i++) assert.ok(messages.includes(`attempt ${i} failed`));
    assert.deepEqual(errors, []);
  });

  test("a repeat of an Event that was deleted creates it again, count and all", async () => {
    const pv = await createPv("events-deleted");
    const r = recorder();
    r.event(pv, "Normal", "VolumeRecycled", "recycled");
    r.event(pv, "Normal", "VolumeRecycled", "recycled");
    await r.flush();
    const [first] = await eventsAbout("default", pv.metadata!.uid!);
    assert.equal(first!.count, 2);
    await core.deleteNamespacedEvent({ namespace: "default", name: first!.metadata.name! });

    r.event(pv, "Normal", "VolumeRecycled", "recycled");
    await r.close();
    const [again, ...rest] = await eventsAbout("default", pv.metadata!.uid!);
    assert.equal(rest.length, 0);
    assert.equal(again!.metadata.name, first!.metadata.name);
    assert.notEqual(again!.metadata.uid, first!.metadata.uid);
    assert.equal(again!.count, 3);
    assert.deepEqual(errors, []);
  });
});
