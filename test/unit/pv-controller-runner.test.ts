/*
 * The binder's runner: --concurrent-pvclaimbinder-syncs claim syncs at once, but one in shadow mode,
 * which compares kvc's decisions with KCM's one worker's (concurrent claims may choose among equal
 * volumes in another order). Observed at the API: how many binds' first writes (the PV's claimRef)
 * are in flight at once, each answered a macrotask later.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import type { KubernetesObject, V1Node, V1Pod, V1StorageClass } from "@kubernetes/client-node";
import { pino } from "pino";
import { PersistentVolumeControllerRunner } from "../../src/persistentvolume/pv-controller-base.js";
import type { JsonRequest } from "../../src/runtime/client.js";
import { VolumePluginManager } from "../../src/volume/plugin-manager.js";
import { newClaim, newVolume } from "./pv-binder-framework.js";
import { informer, ScriptedResource, until } from "./informer-fakes.js";

const PAIRS = 4;

/** Binds PAIRS equal claims to PAIRS equal volumes; answers the most bind writes in flight at once. */
async function bindWritesInFlight(opts: { concurrentSyncs: number; shadow: boolean }): Promise<number> {
  const volumes = Array.from({ length: PAIRS }, (_, i) =>
    newVolume(`volume-${i}`, "1Gi", "", "", "Available", "Retain", ""),
  );
  const claims = Array.from({ length: PAIRS }, (_, i) =>
    newClaim(`claim-${i}`, `uid-${i}`, "1Gi", "", "Pending", undefined),
  );
  let inFlight = 0;
  let most = 0;
  let claimsBound = 0;
  let rv = 100;
  // The API echoes what is written, with a new resourceVersion, after a macrotask.
  const requestJson: JsonRequest = async (method, path, req) => {
    const bindWrite = method === "PUT" && /^\/api\/v1\/persistentvolumes\/[^/]+$/.test(path);
    if (bindWrite) most = Math.max(most, ++inFlight);
    await new Promise((resolve) => setImmediate(resolve));
    if (bindWrite) inFlight--;
    if (method !== "PUT") throw new Error(`unexpected ${method} ${path}`);
    if (/persistentvolumeclaims\/[^/]+\/status$/.test(path)) claimsBound++;
    const body = structuredClone(req?.body) as KubernetesObject;
    body.metadata = { ...body.metadata, resourceVersion: String(++rv) };
    return body;
  };
  const volumeInformer = informer(new ScriptedResource(volumes));
  const claimInformer = informer(new ScriptedResource(claims));
  const classInformer = informer(new ScriptedResource<V1StorageClass>([]));
  const podInformer = informer(new ScriptedResource<V1Pod>([]));
  const nodeInformer = informer(new ScriptedResource<V1Node>([]));
  const factory = {
    persistentVolumes: () => volumeInformer,
    persistentVolumeClaims: () => claimInformer,
    storageClasses: () => classInformer,
    pods: () => podInformer,
    nodes: () => nodeInformer,
  };
  const logger = pino({ level: "silent" });
  const runner = new PersistentVolumeControllerRunner({
    clients: { requestJson },
    informers: factory,
    plugins: new VolumePluginManager(logger),
    events: { event() {} },
    logger,
    resyncPeriodMs: 600_000,
    enableDynamicProvisioning: false,
    ...opts,
  });
  const stop = new AbortController();
  const informers = [volumeInformer, claimInformer, classInformer, podInformer, nodeInformer];
  const running = [...informers.map((i) => i.run(stop.signal)), runner.run(stop.signal)];
  try {
    await until(() => claimsBound === PAIRS, `${PAIRS} claims bound (so far ${claimsBound})`);
  } finally {
    stop.abort();
    await Promise.all(running);
  }
  return most;
}

test("claim syncs run --concurrent-pvclaimbinder-syncs at once", async () => {
  assert.equal(await bindWritesInFlight({ concurrentSyncs: PAIRS, shadow: false }), PAIRS);
});

test("shadow mode syncs one claim at a time, whatever --concurrent-pvclaimbinder-syncs says", async () => {
  assert.equal(await bindWritesInFlight({ concurrentSyncs: PAIRS, shadow: true }), 1);
});
