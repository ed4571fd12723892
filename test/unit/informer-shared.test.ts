import assert from "node:assert/strict";
import { afterEach, describe, test } from "node:test";
import type { KubernetesObject } from "@kubernetes/client-node";
import { FakeClock } from "../../src/runtime/clock.js";
import {
  SharedInformer,
  type EventHandler,
  type SharedInformerOptions,
} from "../../src/runtime/informer/index.js";
import { FakeListWatch, obj, recordingLogger, settle, until } from "./informer-fakes.js";

const show = (o: KubernetesObject) => `${o.metadata?.name ?? ""}@${o.metadata?.resourceVersion ?? ""}`;

/** A handler writing what it sees as lines: "add a@1", "update a@1->a@2", "delete a@2 (tombstone)". */
function recorder(): { seen: string[]; handler: EventHandler<KubernetesObject> } {
  const seen: string[] = [];
  return {
    seen,
    handler: {
      onAdd: (o) => seen.push(`add ${show(o)}`),
      onUpdate: (old, o) => seen.push(`update ${show(old)}->${show(o)}`),
      onDelete: (o, { finalStateUnknown }) =>
        seen.push(`delete ${show(o)}${finalStateUnknown ? " (tombstone)" : ""}`),
    },
  };
}

let stop: (() => Promise<void>) | undefined;
afterEach(async () => {
  await stop?.();
  stop = undefined;
});

function setup(opts: Partial<SharedInformerOptions<KubernetesObject>> = {}) {
  const clock = new FakeClock();
  const lw = new FakeListWatch<KubernetesObject>();
  const logger = recordingLogger();
  const informer = new SharedInformer<KubernetesObject>({
    name: "things",
    listerWatcher: lw,
    clock,
    logger,
    reflector: { random: () => 0.5 },
    ...opts,
  });
  const ac = new AbortController();
  const run = () => {
    const done = informer.run(ac.signal);
    stop = async () => {
      ac.abort();
      await done;
    };
  };
  return { clock, lw, logger, informer, run, ac };
}

describe("shared informer", () => {
  test("delivers the list, then every change in order; synced once the list is delivered", async () => {
    const { lw, informer, run } = setup();
    const a = recorder();
    const b = recorder();
    informer.addEventHandler(a.handler);
    informer.addEventHandler(b.handler);
    run();
    assert.equal(informer.hasSynced(), false);
    const synced = informer.waitForCacheSync();

    (await lw.listCall(1)).respond({ items: [obj("x", "1"), obj("y", "2")], resourceVersion: "2" });
    await synced;
    assert.equal(informer.hasSynced(), true);
    assert.deepEqual(a.seen, ["add x@1", "add y@2"], "all of the list is delivered before synced");

    const w = await lw.watchCall(1);
    w.emit({ type: "MODIFIED", object: obj("x", "3") });
    w.emit({ type: "ADDED", object: obj("z", "4") });
    w.emit({ type: "DELETED", object: obj("y", "5") });
    w.emit({ type: "MODIFIED", object: obj("z", "6") });
    await settle();
    const expected = ["add x@1", "add y@2", "update x@1->x@3", "add z@4", "delete y@5", "update z@4->z@6"];
    assert.deepEqual(a.seen, expected);
    assert.deepEqual(b.seen, expected);
    assert.deepEqual(informer.store.listKeys().sort(), ["x", "z"]);
    assert.throws(() => {
      informer.store.get("x")!.metadata!.name = "mutated";
    }, TypeError);
  });

  test("a relist after 410 turns into deletes (tombstones), adds and updates of what changed only", async () => {
    const { lw, informer, run } = setup();
    const r = recorder();
    informer.addEventHandler(r.handler);
    run();
    (await lw.listCall(1)).respond({
      items: [obj("keep", "1"), obj("change", "1"), obj("gone", "1")],
      resourceVersion: "1",
    });
    const w = await lw.watchCall(1);
    w.emit({ type: "BOOKMARK", object: { metadata: { resourceVersion: "2" } } });
    w.emit({ type: "ERROR", object: { code: 410, reason: "Expired" } });
    (await lw.listCall(2)).respond({
      items: [obj("keep", "1"), obj("change", "7"), obj("new", "8")],
      resourceVersion: "9",
    });
    await until(() => r.seen.length === 6, "the relist to be delivered");
    assert.deepEqual(r.seen.slice(3), [
      "delete gone@1 (tombstone)",
      "update change@1->change@7",
      "add new@8",
    ]);
    assert.deepEqual(informer.store.listKeys().sort(), ["change", "keep", "new"]);
  });

  test("a handler added late gets synthetic adds for the cache, then the changes after, without gaps", async () => {
    const { lw, informer, run } = setup();
    run();
    (await lw.listCall(1)).respond({ items: [obj("x", "1"), obj("y", "2")], resourceVersion: "2" });
    await informer.waitForCacheSync();
    const w = await lw.watchCall(1);
    w.emit({ type: "MODIFIED", object: obj("x", "3") });

    const late = recorder();
    const reg = informer.addEventHandler(late.handler); // the cache already holds x@3 and y@2
    assert.equal(reg.hasSynced(), false);
    w.emit({ type: "DELETED", object: obj("y", "4") });
    await settle();
    assert.deepEqual(late.seen, ["add x@3", "add y@2", "delete y@4"]);
    assert.equal(reg.hasSynced(), true);

    reg.remove();
    w.emit({ type: "ADDED", object: obj("z", "5") });
    await settle();
    assert.equal(late.seen.length, 3, "a removed handler hears nothing more");
  });

  test("resync re-delivers every cached object as an update, per informer default or per handler", async () => {
    const { clock, lw, informer, run } = setup({ resyncPeriodMs: 30_000 });
    const byDefault = recorder();
    const own = recorder();
    const never = recorder();
    informer.addEventHandler(byDefault.handler);
    informer.addEventHandler(own.handler, { resyncPeriodMs: 10_000 });
    informer.addEventHandler(never.handler, { resyncPeriodMs: 0 });
    run();
    (await lw.listCall(1)).respond({ items: [obj("x", "1"), obj("y", "2")], resourceVersion: "2" });
    await informer.waitForCacheSync();

    clock.advance(10_000);
    await settle();
    assert.deepEqual(own.seen.slice(2), ["update x@1->x@1", "update y@2->y@2"]);
    assert.equal(byDefault.seen.length, 2);

    clock.advance(20_000);
    await settle();
    assert.deepEqual(byDefault.seen.slice(2), ["update x@1->x@1", "update y@2->y@2"]);
    assert.equal(own.seen.length, 2 + 3 * 2, "resynced at 10, 20 and 30 s");
    assert.equal(never.seen.length, 2);
  });

  test("a throwing or rejecting handler is logged; delivery to it and to others goes on", async () => {
    const { lw, informer, run, logger } = setup();
    const seen: string[] = [];
    informer.addEventHandler({
      onAdd: (o) => {
        if (o.metadata?.name === "bad") throw new Error("handler bug");
        seen.push(`first ${show(o)}`);
      },
    });
    informer.addEventHandler({
      onAdd: async (o) => {
        await Promise.resolve();
        if (o.metadata?.name === "bad") throw new Error("async handler bug");
      },
    });
    const other = recorder();
    informer.addEventHandler(other.handler);
    run();
    (await lw.listCall(1)).respond({
      items: [obj("a", "1"), obj("bad", "2"), obj("c", "3")],
      resourceVersion: "3",
    });
    await informer.waitForCacheSync();
    (await lw.watchCall(1)).emit({ type: "ADDED", object: obj("d", "4") });
    await until(() => logger.lines.filter((l) => l.level === "error").length === 2, "both failures logged");
    assert.deepEqual(seen, ["first a@1", "first c@3", "first d@4"]);
    assert.deepEqual(other.seen, ["add a@1", "add bad@2", "add c@3", "add d@4"]);
  });

  test("waitForCacheSync rejects with the signal's reason when aborted first", async () => {
    const { informer, run } = setup();
    run();
    const ac = new AbortController();
    const waiting = informer.waitForCacheSync(ac.signal);
    ac.abort(new Error("shutting down"));
    await assert.rejects(waiting, /shutting down/);
  });

  test("a large list is delivered in order over several turns of the event loop (issue 30 goal 4)", async () => {
    const { lw, informer, run } = setup();
    const seen: string[] = [];
    /** How many adds were delivered when a timer set during the first one ran. */
    let deliveredWhenTimerRan: number | undefined;
    informer.addEventHandler({
      onAdd: (o) => {
        if (seen.push(o.metadata!.name!) === 1) {
          setImmediate(() => {
            deliveredWhenTimerRan = seen.length;
          });
        }
      },
    });
    run();
    const names = Array.from({ length: 2_500 }, (_, i) => `o${i}`);
    (await lw.listCall(1)).respond({ items: names.map((n) => obj(n, "1")), resourceVersion: "1" });
    await informer.waitForCacheSync();
    assert.deepEqual(seen, names);
    assert.ok(
      deliveredWhenTimerRan !== undefined && deliveredWhenTimerRan < names.length,
      `the event loop turned during the delivery (timer ran after ${String(deliveredWhenTimerRan)} adds)`,
    );
  });

  test("runs once", async () => {
    const { informer, run } = setup();
    run();
    await assert.rejects(informer.run(new AbortController().signal), /already started/);
  });
});
