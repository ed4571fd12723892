import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { KubeConfig } from "@kubernetes/client-node";
import { pino } from "pino";
import { InformerFactory } from "../../src/runtime/informer/index.js";
import type { LogSink } from "../../src/runtime/logger.js";

function kubeConfig(): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: "c", server: "https://127.0.0.1:1" }],
    users: [{ name: "u" }],
    contexts: [{ name: "x", cluster: "c", user: "u" }],
    currentContext: "x",
  });
  return kc;
}

describe("informer factory", () => {
  test("hands out one informer per resource, namespace and selectors", () => {
    const logger: LogSink = pino({ level: "silent" }); // a pino logger fits the interface as is
    const f = new InformerFactory({ kubeConfig: kubeConfig(), logger });
    assert.equal(f.persistentVolumes(), f.persistentVolumes());
    assert.equal(f.persistentVolumeClaims(), f.persistentVolumeClaims({}));
    assert.notEqual(f.persistentVolumeClaims(), f.persistentVolumeClaims({ namespace: "a" }));
    assert.equal(f.pods({ namespace: "a" }), f.pods({ namespace: "a" }));
    assert.notEqual(f.pods({ labelSelector: "app=x" }), f.pods({ labelSelector: "app=y" }));
    assert.notEqual(f.pods({ fieldSelector: "spec.nodeName=n1" }), f.pods());
    assert.notEqual(f.nodes(), f.csiNodes());
    for (const i of [f.storageClasses(), f.volumeAttachments(), f.csiDrivers(), f.csiNodes(), f.nodes()]) {
      assert.equal(i.hasSynced(), false);
    }
    assert.equal(f.pods({ namespace: "a", labelSelector: "app=x" }).name, "pods a app=x");
  });

  test("refuses a namespace for a cluster-scoped resource", () => {
    const f = new InformerFactory({ kubeConfig: kubeConfig() });
    // @ts-expect-error -- the typed getters have no namespace for cluster-scoped resources
    assert.throws(() => f.persistentVolumes({ namespace: "a" }), /cluster-scoped/);
  });
});
