import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { ApiException, type CoreV1Api, type CoreV1Event } from "@kubernetes/client-node";
import type { LogSink } from "../../src/runtime/logger.js";
import { FakeClock } from "../../src/runtime/clock.js";
import {
  EventCorrelator,
  combinedMessagePrefix,
  type RecordedEvent,
} from "../../src/runtime/events/correlator.js";
import { EventRecorder } from "../../src/runtime/events/recorder.js";
import { objectReference } from "../../src/runtime/events/reference.js";
import { waitFor } from "../../src/util/wait.js";

const pvRef = { kind: "PersistentVolume", apiVersion: "v1", name: "pv-1", uid: "uid-pv-1" };

let seq = 0;
function newEvent(message: string, reason = "VolumeFailedRecycle", involvedObject = pvRef): RecordedEvent {
  const at = new Date(1_700_000_000_000 + ++seq * 1000);
  return {
    metadata: { name: `${involvedObject.name}.${seq}`, namespace: "default" },
    involvedObject,
    type: "Warning",
    reason,
    message,
    firstTimestamp: at,
    lastTimestamp: at,
    count: 1,
    source: { component: "persistentvolume-controller" },
    reportingComponent: "persistentvolume-controller",
  };
}

describe("EventCorrelator", () => {
  test("repeats of an identical event patch the first one's count, lastTimestamp and message", () => {
    const c = new EventCorrelator(new FakeClock());
    const first = newEvent("disk is gone");
    const r1 = c.correlate(first)!;
    assert.equal(r1.patch, undefined);
    assert.equal(r1.event.count, 1);

    const second = newEvent("disk is gone");
    const r2 = c.correlate(second)!;
    assert.equal(r2.event.metadata.name, first.metadata.name, "the repeat names the Event already written");
    assert.equal(r2.event.count, 2);
    assert.equal(r2.event.firstTimestamp, first.firstTimestamp);
    assert.deepEqual(r2.patch, { count: 2, lastTimestamp: second.lastTimestamp, message: "disk is gone" });
    assert.equal(second.count, 1, "the caller's event is not modified");
  });

  test("different messages, types or objects are separate events", () => {
    const c = new EventCorrelator(new FakeClock());
    assert.equal(c.correlate(newEvent("a"))!.patch, undefined);
    assert.equal(c.correlate(newEvent("b"))!.patch, undefined);
    const warning = newEvent("a");
    warning.type = "Normal";
    assert.equal(c.correlate(warning)!.patch, undefined);
    assert.equal(c.correlate(newEvent("a", undefined, { ...pvRef, name: "pv-2" }))!.patch, undefined);
    assert.equal(c.correlate(newEvent("a"))!.patch?.count, 2);
  });

  test("updateState adopts the name and count the server returned", () => {
    const c = new EventCorrelator(new FakeClock());
    const written = structuredClone(c.correlate(newEvent("x"))!.event);
    written.metadata.name = "server-name";
    written.count = 7;
    c.updateState(written);
    const next = c.correlate(newEvent("x"))!;
    assert.equal(next.event.metadata.name, "server-name");
    assert.equal(next.patch?.count, 8);
  });

  test("the 10th distinct message for one object and reason within 10 minutes starts a combined event", () => {
    const clock = new FakeClock();
    const c = new EventCorrelator(clock);
    for (let i = 1; i <= 9; i++) {
      const r = c.correlate(newEvent(`attempt ${i} failed`))!;
      assert.equal(r.event.message, `attempt ${i} failed`);
      clock.advance(60_000);
    }
    const tenth = newEvent("attempt 10 failed");
    const combined = c.correlate(tenth)!;
    assert.equal(combined.event.message, `${combinedMessagePrefix}attempt 10 failed`);
    assert.equal(combined.event.count, 1);
    assert.equal(combined.patch, undefined);
    assert.equal(combined.event.metadata.name, tenth.metadata.name);
    assert.equal(combined.event.reason, "VolumeFailedRecycle");
    assert.deepEqual(combined.event.involvedObject, pvRef);

    // Later members update the combined Event, whatever their message (even an old one).
    const eleventh = c.correlate(newEvent("attempt 1 failed"))!;
    assert.equal(eleventh.event.metadata.name, tenth.metadata.name);
    assert.deepEqual(eleventh.patch, {
      count: 2,
      lastTimestamp: eleventh.event.lastTimestamp,
      message: `${combinedMessagePrefix}attempt 1 failed`,
    });

    // Another reason is another group.
    assert.equal(
      c.correlate(newEvent("attempt 12 failed", "OtherReason"))!.event.message,
      "attempt 12 failed",
    );
  });

  test("a group quiet for more than 10 minutes starts counting afresh", () => {
    const clock = new FakeClock();
    const c = new EventCorrelator(clock);
    for (let i = 1; i <= 9; i++) c.correlate(newEvent(`m${i}`));
    clock.advance(10 * 60_000 + 1);
    for (let i = 10; i <= 18; i++) assert.equal(c.correlate(newEvent(`m${i}`))!.event.message, `m${i}`);
    assert.equal(c.correlate(newEvent("m19"))!.event.message, `${combinedMessagePrefix}m19`);
  });

  test("the spam filter lets 25 events about an object through, then one every 5 minutes", () => {
    const clock = new FakeClock();
    const c = new EventCorrelator(clock);
    for (let i = 1; i <= 25; i++) assert.equal(c.correlate(newEvent("same"))?.event.count, i);
    assert.equal(c.correlate(newEvent("same")), undefined);
    // The budget is per object, across reasons and messages.
    assert.equal(c.correlate(newEvent("other", "OtherReason")), undefined);
    assert.equal(c.correlate(newEvent("same", undefined, { ...pvRef, name: "pv-2" }))?.event.count, 1);

    clock.advance(299_000);
    assert.equal(c.correlate(newEvent("same")), undefined);
    clock.advance(1_000);
    // The 26th and 27th were dropped but counted, as upstream: the count is the number of occurrences.
    assert.equal(c.correlate(newEvent("same"))?.patch?.count, 28);
    assert.equal(c.correlate(newEvent("same")), undefined);
  });

  test("wider spam limits are configurable", () => {
    const c = new EventCorrelator(new FakeClock(), { spamBurst: 100 });
    for (let i = 1; i <= 100; i++) assert.equal(c.correlate(newEvent("same"))?.event.count, i);
    assert.equal(c.correlate(newEvent("same")), undefined);
  });
});

describe("objectReference", () => {
  test("fills kind and apiVersion in for objects from lists and informers", () => {
    const claim = { metadata: { name: "c", namespace: "ns", uid: "u", resourceVersion: "5" } };
    assert.deepEqual(objectReference(claim, "PersistentVolumeClaim"), {
      kind: "PersistentVolumeClaim",
      apiVersion: "v1",
      name: "c",
      namespace: "ns",
      uid: "u",
      resourceVersion: "5",
    });
    assert.deepEqual(objectReference({ metadata: { name: "va" } }, "VolumeAttachment"), {
      kind: "VolumeAttachment",
      apiVersion: "storage.k8s.io/v1",
      name: "va",
    });
  });
});

type CreateParam = Parameters<CoreV1Api["createNamespacedEvent"]>[0];
type PatchParam = Parameters<CoreV1Api["patchNamespacedEvent"]>[0];

/** An in-memory Events endpoint; `fail` can make the next calls throw. */
class FakeEvents {
  readonly stored = new Map<string, CoreV1Event>();
  readonly calls: string[] = [];
  fail: (() => Error | undefined) | undefined;
  hold: Promise<void> | undefined;

  readonly api = {
    createNamespacedEvent: async ({ namespace, body }: CreateParam): Promise<CoreV1Event> => {
      await this.#enter(`create ${body.metadata.name ?? ""}`);
      const key = `${namespace}/${body.metadata.name ?? ""}`;
      if (this.stored.has(key)) throw new ApiException(409, "exists", { reason: "AlreadyExists" }, {});
      this.stored.set(key, structuredClone(body));
      return structuredClone(body);
    },
    patchNamespacedEvent: async ({ namespace, name, body }: PatchParam): Promise<CoreV1Event> => {
      await this.#enter(`patch ${name}`);
      const existing = this.stored.get(`${namespace}/${name}`);
      if (!existing) throw new ApiException(404, "not found", { reason: "NotFound" }, {});
      Object.assign(existing, body);
      return structuredClone(existing);
    },
  };

  async #enter(call: string): Promise<void> {
    this.calls.push(call);
    await this.hold;
    const err = this.fail?.();
    if (err) throw err;
  }
}

function recorder(
  fake: FakeEvents,
  clock = new FakeClock(),
  extra: Partial<ConstructorParameters<typeof EventRecorder>[0]> = {},
) {
  const logs: { level: string; msg: string }[] = [];
  const sink = (level: string) => (_fields: object, msg: string) => {
    logs.push({ level, msg });
  };
  const logger: LogSink = {
    debug: sink("debug"),
    info: sink("info"),
    warn: sink("warn"),
    error: sink("error"),
  };
  const r = new EventRecorder({
    component: "persistentvolume-controller",
    host: "node-a",
    core: fake.api,
    clock,
    logger,
    retryIntervalMs: 1_000,
    ...extra,
  });
  return { r, logs, clock };
}

const pvc = { metadata: { name: "claim", namespace: "apps", uid: "uid-claim", resourceVersion: "12" } };
const pv = { kind: "PersistentVolume", apiVersion: "v1", metadata: { name: "vol", uid: "uid-vol" } };

describe("EventRecorder", () => {
  test("writes events off the caller's path, creating once and patching repeats", async () => {
    const fake = new FakeEvents();
    const { r } = recorder(fake);
    r.event(pv, "Warning", "VolumeFailedDelete", "no plugin");
    assert.equal(fake.calls.length, 0, "event() does no I/O itself");
    r.event(pv, "Warning", "VolumeFailedDelete", "no plugin");
    r.event(pv, "Warning", "VolumeFailedDelete", "no plugin");
    await r.flush();
    assert.equal(fake.calls.length, 3);
    assert.match(fake.calls[0]!, /^create vol\.[0-9a-f]+$/);
    assert.deepEqual(
      fake.calls.slice(1),
      [1, 2].map(() => fake.calls[0]!.replace("create", "patch")),
    );
    const [stored] = [...fake.stored.values()];
    assert.equal(fake.stored.size, 1);
    assert.equal(stored!.metadata.namespace, "default", "cluster-scoped objects' events go to default");
    assert.equal(stored!.count, 3);
    assert.deepEqual(stored!.involvedObject, {
      kind: "PersistentVolume",
      apiVersion: "v1",
      name: "vol",
      uid: "uid-vol",
    });
    assert.deepEqual(stored!.source, { component: "persistentvolume-controller", host: "node-a" });
    assert.equal(stored!.reportingComponent, "persistentvolume-controller");
    assert.equal(stored!.reportingInstance, "node-a");
    assert.equal(stored!.eventTime, undefined);
  });

  test("events about namespaced objects go to their namespace; timestamps follow the clock", async () => {
    const fake = new FakeEvents();
    const { r, clock } = recorder(fake);
    r.event(objectReference(pvc, "PersistentVolumeClaim"), "Normal", "ProvisioningSucceeded", "done");
    await r.flush();
    clock.advance(5_000);
    r.event(objectReference(pvc, "PersistentVolumeClaim"), "Normal", "ProvisioningSucceeded", "done");
    await r.flush();
    const [stored] = [...fake.stored.values()];
    assert.equal(stored!.metadata.namespace, "apps");
    assert.equal(stored!.involvedObject.namespace, "apps");
    assert.equal(stored!.type, "Normal");
    assert.equal(stored!.reason, "ProvisioningSucceeded");
    assert.equal(stored!.lastTimestamp!.getTime() - stored!.firstTimestamp!.getTime(), 5_000);
  });

  test("event names are unique within a millisecond and valid object names", async () => {
    const fake = new FakeEvents();
    const { r } = recorder(fake);
    for (let i = 0; i < 3; i++) r.event(pv, "Normal", `Reason${i}`, "m");
    r.event({ ...pv, metadata: { name: "Not_A_DNS_Name" } }, "Normal", "R", "m");
    await r.flush();
    const names = [...fake.stored.values()].map((e) => e.metadata.name!);
    assert.equal(new Set(names).size, 4);
    assert.match(names[3]!, /^[0-9a-f-]{36}$/, "an invalid name falls back to a UUID");
  });

  test("refuses objects it cannot identify without throwing", async () => {
    const fake = new FakeEvents();
    const { r, logs } = recorder(fake);
    r.event(pvc, "Warning", "R", "a PVC from a list has no kind");
    r.event(null as unknown as typeof pv, "Warning", "R", "garbage");
    await r.flush();
    assert.equal(fake.calls.length, 0);
    assert.equal(logs.filter((l) => l.level === "error").length, 2);
  });

  test("a repeat whose Event was deleted is created again with its full count", async () => {
    const fake = new FakeEvents();
    const { r } = recorder(fake);
    r.event(pv, "Warning", "R", "m");
    r.event(pv, "Warning", "R", "m");
    await r.flush();
    fake.stored.clear();
    r.event(pv, "Warning", "R", "m");
    await r.flush();
    assert.deepEqual(
      fake.calls.map((c) => c.split(" ")[0]),
      ["create", "patch", "patch", "create"],
    );
    assert.equal([...fake.stored.values()][0]!.count, 3);
  });

  test("retries while the apiserver is unreachable, then gives up after maxTries", async () => {
    const fake = new FakeEvents();
    const { r, clock, logs } = recorder(fake, new FakeClock(), { maxTries: 3 });
    let failures = 2;
    fake.fail = () => (failures-- > 0 ? new Error("connect ECONNREFUSED") : undefined);
    r.event(pv, "Warning", "R", "m");
    for (let i = 0; i < 2; i++) {
      await waitFor(() => clock.pendingTimers > 0, {
        timeoutMs: 5_000,
        intervalMs: 1,
        what: "a retry timer",
      });
      clock.advance(1_000);
    }
    await r.flush();
    assert.equal(fake.calls.length, 3);
    assert.equal(fake.stored.size, 1);

    fake.fail = () => new Error("socket hang up");
    r.event(pv, "Normal", "Other", "m");
    for (let i = 0; i < 2; i++) {
      await waitFor(() => clock.pendingTimers > 0, {
        timeoutMs: 5_000,
        intervalMs: 1,
        what: "a retry timer",
      });
      clock.advance(1_000);
    }
    await r.flush();
    assert.equal(fake.calls.length, 6);
    assert.ok(logs.some((l) => l.msg.includes("retry limit exceeded")));
  });

  test("does not retry what the apiserver rejected", async () => {
    const fake = new FakeEvents();
    const { r, logs } = recorder(fake);
    fake.fail = () => new ApiException(422, "invalid", { reason: "Invalid", message: "bad" }, {});
    r.event(pv, "Warning", "R", "m");
    await r.flush();
    assert.equal(fake.calls.length, 1);
    assert.ok(logs.some((l) => l.level === "error" && l.msg.includes("will not retry")));
  });

  test("drops events beyond the queue bound while the writer is busy", async () => {
    const fake = new FakeEvents();
    const { r, logs } = recorder(fake, new FakeClock(), { queueSize: 2 });
    let release!: () => void;
    fake.hold = new Promise((resolve) => (release = resolve));
    r.event(pv, "Normal", "R0", "m");
    await waitFor(() => fake.calls.length === 1, {
      timeoutMs: 5_000,
      intervalMs: 1,
      what: "the first write",
    });
    // One event is being written; the queue takes two more and drops the rest.
    for (let i = 1; i < 5; i++) r.event(pv, "Normal", `R${i}`, "m");
    assert.equal(logs.filter((l) => l.msg.includes("too many queued events")).length, 2);
    release();
    await r.flush();
    assert.equal(fake.stored.size, 3);
  });

  test("close() writes what is queued once, abandons retries and refuses new events", async () => {
    const fake = new FakeEvents();
    const { r, clock, logs } = recorder(fake);
    fake.fail = () => new Error("connect ECONNREFUSED");
    r.event(pv, "Warning", "R", "m");
    await waitFor(() => clock.pendingTimers > 0, { timeoutMs: 5_000, intervalMs: 1, what: "a retry timer" });
    await r.close();
    assert.equal(fake.calls.length, 1);
    assert.ok(logs.some((l) => l.msg.includes("recorder is closed")));
    fake.fail = undefined;
    r.event(pv, "Warning", "R", "m");
    await r.flush();
    assert.equal(fake.calls.length, 1);
  });
});
