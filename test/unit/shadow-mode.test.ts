import assert from "node:assert/strict";
import { test } from "node:test";
import type { KubernetesObject, V1Node } from "@kubernetes/client-node";
import { Registry } from "prom-client";
import { FakeClock } from "../../src/runtime/clock.js";
import type { InformerFactory } from "../../src/runtime/informer/index.js";
import { silentLogger } from "../../src/runtime/logger.js";
import { formatReport } from "../../src/shadow/report.js";
import { ShadowMode } from "../../src/shadow/shadow-mode.js";

interface Handler {
  onAdd?(obj: KubernetesObject): void;
  onUpdate?(old: KubernetesObject, obj: KubernetesObject): void;
}

/** An informer as ShadowMode uses one: handlers and a store, changed by the test. */
function informer() {
  const handlers: Handler[] = [];
  const objects = new Map<string, KubernetesObject>();
  return {
    addEventHandler: (h: Handler) => handlers.push(h),
    store: { get: (key: string) => objects.get(key), list: () => [...objects.values()] },
    set: (obj: KubernetesObject) => {
      const key = obj.metadata?.name ?? "";
      const old = objects.get(key);
      objects.set(key, obj);
      for (const h of handlers) {
        if (old) h.onUpdate?.(old, obj);
        else h.onAdd?.(obj);
      }
    },
  };
}

const node = (...volumes: string[]): V1Node => ({
  metadata: { name: "n1", creationTimestamp: new Date(0) },
  status: { volumesAttached: volumes.map((name) => ({ name, devicePath: "" })) },
});

/** A shadow of the attach/detach controller watching node n1 (listed as `listed`) and its report. */
function attachDetachShadow(listed: V1Node) {
  const clock = new FakeClock();
  const shadow = new ShadowMode({
    clock,
    graceMs: 1000,
    registry: new Registry(),
    logger: silentLogger,
    controllers: new Set(["persistentvolume-attach-detach-controller"]),
  });
  const nodes = informer();
  const factory = {
    persistentVolumes: informer,
    persistentVolumeClaims: informer,
    nodes: () => nodes,
    volumeAttachments: informer,
    pods: informer,
    informerFor: informer,
  } as unknown as InformerFactory;
  shadow.observe(factory);
  nodes.set(listed);
  const report = (...volumes: string[]) =>
    shadow.recordWrite({
      method: "PATCH",
      path: "/api/v1/nodes/n1/status",
      body: JSON.stringify({ status: { volumesAttached: node(...volumes).status?.volumesAttached } }),
    });
  /** The outcomes once the grace window has passed; the shadow stopped. */
  const totalsAfterGrace = () => {
    clock.advance(1000);
    const { totals } = shadow.summary();
    shadow.stop();
    return totals;
  };
  return { nodes, report, totalsAfterGrace };
}

const NONE = { agree: 0, differ: 0, "kvc-only": 0, "upstream-only": 0, tie: 0 };

test("kvc's node report is compared with its own last report, not with KCM's", () => {
  const { nodes, report, totalsAfterGrace } = attachDetachShadow(node());
  // Both report v attached.
  report("v");
  nodes.set(node("v"));
  // KCM detaches first; kvc's attacher still holds v, its report unchanged: no decision.
  nodes.set(node());
  report("v");
  // kvc detaches: its own report loses v.
  report();
  assert.deepEqual(totalsAfterGrace(), { ...NONE, agree: 2 });
});

test("kvc's first report is compared with the node as listed, not with KCM's report since", () => {
  const { nodes, report, totalsAfterGrace } = attachDetachShadow(node("old"));
  // KCM attaches a and b and reports both before kvc's attach of b completes.
  nodes.set(node("old", "a", "b"));
  report("old", "a"); // not a detach of b: kvc never reported b
  report("old", "a", "b");
  assert.deepEqual(totalsAfterGrace(), { ...NONE, agree: 2 });
});

test("a write the shadow cannot understand is refused, counted and reported", async () => {
  const registry = new Registry();
  const shadow = new ShadowMode({
    clock: new FakeClock(),
    graceMs: 1000,
    registry,
    logger: silentLogger,
    controllers: new Set(["persistentvolume-binder-controller"]),
  });
  const answer = shadow.recordWrite({ method: "PUT", path: "/api/v1/persistentvolumes/pv-1", body: "{" });
  assert.equal(answer.status, 400);
  const { unparsed } = shadow.summary();
  assert.equal(unparsed.count, 1);
  assert.deepEqual(
    unparsed.recent.map((u) => [u.method, u.path]),
    [["PUT", "/api/v1/persistentvolumes/pv-1"]],
  );
  assert.match(await registry.metrics(), /^kvc_shadow_unparsed_writes_total 1$/m);
  assert.match(formatReport(shadow.summary()), /not understood \(refused, compared with nothing\): 1\n/);
  assert.match(formatReport(shadow.summary()), /PUT\s+\/api\/v1\/persistentvolumes\/pv-1\s+PUT /);
  shadow.stop();
});
