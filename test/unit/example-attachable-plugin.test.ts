import assert from "node:assert/strict";
import { test } from "node:test";
import { ActualStateOfWorld } from "../../src/attachdetach/cache/actual-state-of-world.js";
import { DesiredStateOfWorld } from "../../src/attachdetach/cache/desired-state-of-world.js";
import { OperationExecutor } from "../../src/attachdetach/operation-executor.js";
import { nodeHealthFrom, Reconciler } from "../../src/attachdetach/reconciler.js";
import { FakeClock } from "../../src/runtime/clock.js";
import { silentLogger } from "../../src/runtime/logger.js";
import {
  ExampleDiskPlugin,
  type BlockStorageApi,
} from "../../src/volume/example/example-attachable-plugin.js";
import { specFromPersistentVolume } from "../../src/volume/plugin.js";
import { VolumePluginManager } from "../../src/volume/plugin-manager.js";

/* The "your own plugin" example of docs/volume-plugins.md, registered and driven by the real reconciler. */

test("a user's attachable plugin is attached and detached by the attach/detach controller's reconciler", async () => {
  const attached = new Set<string>();
  const api: BlockStorageApi = {
    attach: (disk, node) => {
      attached.add(`${disk}@${node}`);
      return Promise.resolve(`/dev/disk/by-id/${disk}`);
    },
    detach: (disk, node) => {
      attached.delete(`${disk}@${node}`);
      return Promise.resolve();
    },
    isAttached: (disk, node) => Promise.resolve(attached.has(`${disk}@${node}`)),
  };
  const plugins = new VolumePluginManager(silentLogger);
  plugins.register([new ExampleDiskPlugin(api)]);
  const clock = new FakeClock();
  const dsw = new DesiredStateOfWorld(plugins);
  const asw = new ActualStateOfWorld(plugins, clock);
  const executor = new OperationExecutor({
    plugins,
    asw,
    nodes: { getNode: () => Promise.resolve(undefined) },
    events: { event: () => {} },
    clock,
    log: silentLogger,
  });
  const reconciler = new Reconciler({
    dsw,
    asw,
    executor,
    nodeStatusUpdater: {
      updateNodeStatusForNode: () => Promise.resolve(),
      updateNodeStatuses: () => Promise.resolve(),
    },
    nodes: nodeHealthFrom(() => ({ status: { conditions: [{ type: "Ready", status: "True" }] } })),
    events: { event: () => {} },
    clock,
    log: silentLogger,
  });
  const pass = async () => {
    await reconciler.reconcile();
    await executor.waitForCompletion();
  };

  const spec = specFromPersistentVolume({
    metadata: { name: "pv-db" },
    spec: { accessModes: ["ReadWriteOnce"], csi: { driver: "disks.example.com", volumeHandle: "disk-7" } },
  });
  dsw.addNode("node-1");
  assert.equal(
    dsw.addPod("uid-db", { metadata: { name: "db", uid: "uid-db" } }, spec, "node-1"),
    "example.com/disk/disk-7",
  );
  await pass();
  assert.deepEqual([...attached], ["disk-7@node-1"]);
  assert.equal(asw.getAttachedVolumesForNode("node-1")[0]?.devicePath, "/dev/disk/by-id/disk-7");

  dsw.deletePod("uid-db", "example.com/disk/disk-7", "node-1");
  asw.setVolumesMountedByNode([], "node-1"); // the kubelet unmounted it
  await pass();
  assert.deepEqual([...attached], []);
  assert.equal(asw.getAttachState("example.com/disk/disk-7", "node-1"), "Detached");
});
