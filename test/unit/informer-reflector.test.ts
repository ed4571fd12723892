import assert from "node:assert/strict";
import { afterEach, describe, test } from "node:test";
import type { KubernetesObject } from "@kubernetes/client-node";
import { FakeClock } from "../../src/runtime/clock.js";
import { Reflector, type ReflectorOptions } from "../../src/runtime/informer/index.js";
import { FakeListWatch, httpError, obj, recordingLogger, settle, until } from "./informer-fakes.js";

const show = (o: KubernetesObject) => `${o.metadata?.name ?? ""}@${o.metadata?.resourceVersion ?? ""}`;

let stop: (() => Promise<void>) | undefined;
afterEach(async () => {
  await stop?.();
  stop = undefined;
});

/** A running reflector over a scripted apiserver; random 0.5 makes every backoff exactly 1.5 × base. */
function start(opts: Partial<ReflectorOptions<KubernetesObject>> = {}) {
  const clock = new FakeClock();
  const lw = new FakeListWatch<KubernetesObject>();
  const sunk: string[] = [];
  const logger = recordingLogger();
  const reflector = new Reflector<KubernetesObject>({
    name: "things",
    listerWatcher: lw,
    sink: {
      replace: (items) => sunk.push(`replace ${items.map(show).join(",")}`),
      apply: (type, o) => sunk.push(`${type} ${show(o)}`),
    },
    clock,
    logger,
    random: () => 0.5,
    stallTimeoutMs: 60_000,
    ...opts,
  });
  const ac = new AbortController();
  const done = reflector.run(ac.signal);
  stop = async () => {
    ac.abort();
    await done;
  };
  return { clock, lw, sunk, logger, reflector, ac, done };
}

describe("informer reflector", () => {
  test("lists page by page with limit and continue, replaces once, then watches with bookmarks", async () => {
    const { lw, sunk } = start({ pageSize: 2 });
    const page1 = await lw.listCall(1);
    assert.deepEqual(page1.opts, { limit: 2 });
    page1.respond({ items: [obj("a", "3"), obj("b", "4")], resourceVersion: "10", continue: "t1" });
    const page2 = await lw.listCall(2);
    assert.deepEqual(page2.opts, { limit: 2, continue: "t1" });
    page2.respond({ items: [obj("c", "5")], resourceVersion: "10" });

    const watch = await lw.watchCall(1);
    assert.deepEqual(sunk, ["replace a@3,b@4,c@5"]);
    assert.deepEqual(watch.opts, { resourceVersion: "10", timeoutSeconds: 450, allowWatchBookmarks: true });
  });

  test("bookmarks only move the resourceVersion; a watch that ends cleanly resumes quietly from it", async () => {
    const { lw, sunk, reflector, logger } = start();
    (await lw.listCall(1)).respond({ items: [obj("a", "3")], resourceVersion: "10" });
    const w1 = await lw.watchCall(1);
    w1.emit({ type: "ADDED", object: obj("b", "11") });
    w1.emit({ type: "MODIFIED", object: obj("a", "12") });
    w1.emit({ type: "BOOKMARK", object: { metadata: { resourceVersion: "20" } } });
    assert.deepEqual(sunk, ["replace a@3", "ADDED b@11", "MODIFIED a@12"]);
    assert.equal(reflector.resourceVersion, "20");

    w1.end(); // the server's timeoutSeconds ran out
    const w2 = await lw.watchCall(2);
    assert.equal(w2.opts.resourceVersion, "20");
    w2.emit({ type: "DELETED", object: obj("b", "21") });
    assert.deepEqual(sunk.at(-1), "DELETED b@21");
    assert.equal(lw.lists.length, 1, "no relist");
    assert.equal(reflector.stats.failures, 0);
    assert.deepEqual(
      logger.lines.filter((l) => l.level !== "debug"),
      [],
      "a clean end is logged at debug only",
    );
  });

  test("a 410 ERROR event mid-watch relists at once, and the store is replaced", async () => {
    const { lw, sunk, reflector } = start();
    (await lw.listCall(1)).respond({ items: [obj("a", "3")], resourceVersion: "10" });
    const w1 = await lw.watchCall(1);
    w1.emit({ type: "MODIFIED", object: obj("a", "11") });
    w1.emit({ type: "ERROR", object: { code: 410, reason: "Expired", message: "too old resource version" } });
    const relist = await lw.listCall(2); // no clock advance needed
    assert.ok(w1.signal.aborted, "the broken watch is let go");
    assert.equal(reflector.stats.expired, 1);
    relist.respond({ items: [obj("b", "30")], resourceVersion: "30" });
    const w2 = await lw.watchCall(2);
    assert.equal(w2.opts.resourceVersion, "30");
    assert.deepEqual(sunk, ["replace a@3", "MODIFIED a@11", "replace b@30"]);
    assert.equal(reflector.stats.lists, 2);
  });

  test("410 on a watch straight after a list relists after a backoff, so it cannot spin", async () => {
    const { clock, lw, reflector } = start();
    (await lw.listCall(1)).respond({ items: [], resourceVersion: "10" });
    (await lw.watchCall(1)).fail(httpError(410, "Gone"));
    await until(() => reflector.stats.expired === 1, "the 410 to be seen");
    clock.advance(1199);
    await settle();
    assert.equal(lw.lists.length, 1);
    clock.advance(1);
    (await lw.listCall(2)).respond({ items: [], resourceVersion: "40" });
    assert.equal((await lw.watchCall(2)).opts.resourceVersion, "40");
  });

  test("other failures back off exponentially with jitter and never stop; a watch resumes without relisting", async () => {
    const { clock, lw, reflector, logger } = start();
    (await lw.listCall(1)).respond({ items: [], resourceVersion: "10" });
    const errors = [
      new Error("connect ECONNREFUSED 127.0.0.1:6443"),
      httpError(503),
      httpError(403, "Forbidden"),
      httpError(500),
    ];
    // base 800 ms doubling to 30 s, times 1.5 for the fixed jitter
    const delays = [1200, 2400, 4800, 9600, 19_200, 38_400, 45_000, 45_000, 45_000, 45_000, 45_000, 45_000];
    for (const [i, delay] of delays.entries()) {
      const w = await lw.watchCall(i + 1);
      assert.equal(w.opts.resourceVersion, "10");
      w.fail(errors[i % errors.length]!);
      await until(() => reflector.stats.failures === i + 1, `failure ${i + 1}`);
      clock.advance(delay - 1);
      await settle();
      assert.equal(lw.watches.length, i + 1, `still waiting out the ${delay} ms backoff`);
      clock.advance(1);
    }
    const recovered = await lw.watchCall(delays.length + 1);
    recovered.emit({ type: "ADDED", object: obj("a", "11") });
    assert.equal(lw.lists.length, 1);
    assert.deepEqual(
      logger.lines.filter((l) => l.level === "warn").map((l) => (l.obj as { delayMs: number }).delayMs),
      delays,
    );
  });

  test("an expired continue token (410 on a later page) restarts the list from the first page", async () => {
    const { clock, lw, sunk, reflector } = start({ pageSize: 1 });
    (await lw.listCall(1)).respond({ items: [obj("a", "1")], resourceVersion: "5", continue: "t1" });
    (await lw.listCall(2)).fail(httpError(410, "continue token expired"));
    await until(() => reflector.stats.expired === 1, "the 410");
    clock.advance(1200);
    const again = await lw.listCall(3);
    assert.deepEqual(again.opts, { limit: 1 });
    again.respond({ items: [obj("b", "9")], resourceVersion: "9" });
    await lw.watchCall(1);
    assert.deepEqual(sunk, ["replace b@9"], "pages of the abandoned list are never used");
  });

  test("a failed list is retried after a backoff", async () => {
    const { clock, lw, reflector } = start();
    (await lw.listCall(1)).fail(httpError(500));
    await until(() => reflector.stats.failures === 1, "the failure");
    clock.advance(1200);
    (await lw.listCall(2)).respond({ items: [], resourceVersion: "7" });
    assert.equal((await lw.watchCall(1)).opts.resourceVersion, "7");
  });

  test("a watch that closes at once without events is a failure, not a busy loop", async () => {
    const { clock, lw, reflector } = start();
    (await lw.listCall(1)).respond({ items: [], resourceVersion: "10" });
    (await lw.watchCall(1)).end();
    await until(() => reflector.stats.failures === 1, "the failure");
    await settle();
    assert.equal(lw.watches.length, 1);
    clock.advance(1200);
    await lw.watchCall(2);
  });

  test("a silent watch is abandoned after stallTimeoutMs and watched again from the last resourceVersion", async () => {
    const { clock, lw, sunk, reflector } = start({ stallTimeoutMs: 60_000 });
    (await lw.listCall(1)).respond({ items: [], resourceVersion: "10" });
    const w1 = await lw.watchCall(1); // never answers, ignores its signal: a half-open connection
    clock.advance(59_999);
    await settle();
    w1.emit({ type: "BOOKMARK", object: { metadata: { resourceVersion: "11" } } }); // restarts the timer
    clock.advance(59_999);
    await settle();
    assert.equal(lw.watches.length, 1);
    clock.advance(1);
    const w2 = await lw.watchCall(2);
    assert.equal(w2.opts.resourceVersion, "11");
    assert.ok(w1.signal.aborted);
    assert.equal(reflector.stats.stalls, 1);
    assert.equal(reflector.stats.failures, 0);
    assert.equal(lw.lists.length, 1);

    w1.emit({ type: "ADDED", object: obj("late", "12") }); // the abandoned watch speaks up again
    w2.emit({ type: "ADDED", object: obj("a", "13") });
    assert.deepEqual(sunk, ["replace ", "ADDED a@13"]);
  });

  test("a hung list is abandoned after stallTimeoutMs and retried", async () => {
    const { clock, lw, reflector } = start({ stallTimeoutMs: 60_000 });
    const hung = await lw.listCall(1);
    clock.advance(60_000);
    await until(() => reflector.stats.failures === 1, "the stalled list to fail");
    assert.ok(hung.signal.aborted);
    clock.advance(1200);
    await lw.listCall(2);
  });

  test("stops when its signal is aborted, even while a watch hangs or a backoff runs", async () => {
    const a = start();
    (await a.lw.listCall(1)).respond({ items: [], resourceVersion: "10" });
    const w = await a.lw.watchCall(1);
    a.ac.abort();
    await a.done;
    assert.ok(w.signal.aborted);

    const b = start();
    (await b.lw.listCall(1)).fail(httpError(500));
    await until(() => b.reflector.stats.failures === 1, "the failure");
    b.ac.abort();
    await b.done;
    assert.equal(b.clock.pendingTimers, 0);
  });
});
