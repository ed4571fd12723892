import assert from "node:assert/strict";
import { test } from "node:test";
import type { KubernetesObject, V1Node } from "@kubernetes/client-node";
import { Registry } from "prom-client";
import { FakeClock } from "../../src/runtime/clock.js";
import type { InformerFactory } from "../../src/runtime/informer/index.js";
import { silentLogger } from "../../src/runtime/logger.js";
import { ShadowMode } from "../../src/shadow/shadow-mode.js";

interface Handler {
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
      if (old) for (const h of handlers) h.onUpdate?.(old, obj);
    },
  };
}

const node = (...volumes: string[]): V1Node => ({
  metadata: { name: "n1", creationTimestamp: new Date(0) },
  status: { volumesAttached: volumes.map((name) => ({ name, devicePath: "" })) },
});

test("kvc's node report is compared with its own last report, not with KCM's", () => {
  const clock = new FakeClock();
  const shadow = new ShadowMode({
    clock,
    graceMs: 1000,
    registry: new Registry(),
    logger: silentLogger,
    controllers: new Set(["persistentvolume-attach-detach-controller"]),
  });
  const nodes = informer();
  nodes.set(node());
  const factory = {
    persistentVolumes: informer,
    persistentVolumeClaims: informer,
    nodes: () => nodes,
    volumeAttachments: informer,
    pods: informer,
    informerFor: informer,
  } as unknown as InformerFactory;
  shadow.observe(factory);
  const report = (...volumes: string[]) =>
    shadow.recordWrite({
      method: "PATCH",
      path: "/api/v1/nodes/n1/status",
      body: JSON.stringify({ status: { volumesAttached: node(...volumes).status?.volumesAttached } }),
    });
  // Both report v attached.
  report("v");
  nodes.set(node("v"));
  // KCM detaches first; kvc's attacher still holds v, its report unchanged: no decision.
  nodes.set(node());
  report("v");
  // kvc detaches: its own report loses v.
  report();
  clock.advance(1000);
  assert.deepEqual(shadow.summary().totals, {
    agree: 2,
    differ: 0,
    "kvc-only": 0,
    "upstream-only": 0,
    tie: 0,
  });
  shadow.stop();
});
