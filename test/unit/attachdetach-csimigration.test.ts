import assert from "node:assert/strict";
import { describe, test } from "node:test";
import type { V1Node, V1PersistentVolume, V1PersistentVolumeClaim, V1Pod } from "@kubernetes/client-node";
import { ActualStateOfWorld } from "../../src/attachdetach/cache/actual-state-of-world.js";
import { DesiredStateOfWorld } from "../../src/attachdetach/cache/desired-state-of-world.js";
import { OperationExecutor } from "../../src/attachdetach/operation-executor.js";
import { nodeHealthFrom, Reconciler } from "../../src/attachdetach/reconciler.js";
import {
  populateActualStateOfWorld,
  populateDesiredStateOfWorld,
} from "../../src/attachdetach/state-recovery.js";
import {
  CONTROLLER_MANAGED_ATTACH_ANNOTATION,
  createVolumeSpec,
  type VolumeLookups,
} from "../../src/attachdetach/util.js";
import { FakeClock } from "../../src/runtime/clock.js";
import { silentLogger } from "../../src/runtime/logger.js";
import type { AttachableVolumePlugin } from "../../src/volume/plugin.js";
import { VolumePluginManager } from "../../src/volume/plugin-manager.js";
import { fakeCsiPlugin } from "./attachdetach-fixtures.js";

/*
 * In-tree volumes migrated to CSI in the attach/detach controller (upstream CreateVolumeSpec with
 * translateInTreeSpecToCSIIfNeeded, processVolumeAttachments): they enter the desired state under
 * their CSI name, so an attachment KCM made before a switch to kvc is recognised and kept.
 */

const EBS_NAME = "kubernetes.io/csi/ebs.csi.aws.com^vol-1";

function cluster() {
  const claim: V1PersistentVolumeClaim = {
    metadata: { name: "claim", namespace: "ns", uid: "uid-claim" },
    spec: { volumeName: "pv-ebs" },
    status: { phase: "Bound" },
  };
  const pv: V1PersistentVolume = {
    metadata: { name: "pv-ebs" },
    spec: {
      accessModes: ["ReadWriteOnce"],
      claimRef: { namespace: "ns", name: "claim", uid: "uid-claim" },
      awsElasticBlockStore: { volumeID: "aws://us-east-1a/vol-1", fsType: "ext4" },
    },
  };
  const lookups: VolumeLookups = {
    getClaim: (ns, name) => (`${ns}/${name}` === "ns/claim" ? claim : undefined),
    getVolume: (name) => (name === "pv-ebs" ? pv : undefined),
  };
  const calls = { attach: [] as string[], detach: [] as string[] };
  const base = fakeCsiPlugin();
  const plugin: AttachableVolumePlugin = {
    ...base,
    newAttacher: () => ({
      attach(spec, node) {
        calls.attach.push(`${base.getVolumeName(spec)}@${node}`);
        return Promise.resolve("");
      },
      volumesAreAttached: (specs) => Promise.resolve(new Map(specs.map((s) => [s, true]))),
    }),
    newDetacher: () => ({
      detach(name, node) {
        calls.detach.push(`${name}@${node}`);
        return Promise.resolve();
      },
    }),
  };
  const plugins = new VolumePluginManager(silentLogger);
  plugins.register([plugin]);
  const clock = new FakeClock();
  const dsw = new DesiredStateOfWorld(plugins);
  const asw = new ActualStateOfWorld(plugins, clock);
  const pod = (name: string, node: string): V1Pod => ({
    metadata: { name, namespace: "ns", uid: `uid-${name}` },
    spec: {
      nodeName: node,
      containers: [],
      volumes: [{ name: "data", persistentVolumeClaim: { claimName: "claim" } }],
    },
  });
  return {
    pv,
    lookups,
    calls,
    plugins,
    clock,
    dsw,
    asw,
    pod,
    world: { dsw, asw, plugins, lookups, log: silentLogger },
  };
}

/** A managed node as KCM leaves it: the EBS volume attached and mounted. */
const node = (name: string, ready: boolean, attached: boolean): V1Node => ({
  metadata: { name, annotations: { [CONTROLLER_MANAGED_ATTACH_ANNOTATION]: "true" } },
  status: {
    conditions: [{ type: "Ready", status: ready ? "True" : "Unknown" }],
    ...(attached && { volumesAttached: [{ name: EBS_NAME, devicePath: "" }], volumesInUse: [EBS_NAME] }),
  },
});

describe("CSI migration in the attach/detach controller", () => {
  test("a pod's in-tree EBS claim and inline GCE PD become CSI specs under their drivers' names", () => {
    const c = cluster();
    const spec = createVolumeSpec(
      c.pod("p", "n1"),
      { name: "data", persistentVolumeClaim: { claimName: "claim" } },
      c.lookups,
    );
    assert.equal(spec.persistentVolume?.metadata?.name, "pv-ebs");
    assert.deepEqual(spec.persistentVolume?.spec?.csi?.volumeHandle, "vol-1");
    assert.equal(spec.migrated, true);
    const inline = createVolumeSpec(
      c.pod("p", "n1"),
      { name: "pd", gcePersistentDisk: { pdName: "disk" } },
      c.lookups,
    );
    assert.equal(inline.inlineVolumeSpecForCSIMigration, true);
    assert.equal(
      inline.persistentVolume?.spec?.csi?.volumeHandle,
      "projects/UNSPECIFIED/zones/UNSPECIFIED/disks/disk",
    );
    assert.throws(
      () =>
        createVolumeSpec(
          c.pod("p", "n1"),
          { name: "bad", awsElasticBlockStore: { volumeID: "aws://z/x" } },
          c.lookups,
        ),
      /^Error: error performing CSI migration checks and translation for PVC "ns"\/"": failed to translate in-tree pv to CSI/,
    );
  });

  test("handover: an EBS attachment KCM left is kept through a NotReady node past the 6-minute wait", async () => {
    const c = cluster();
    const nodes = new Map([["n1", node("n1", true, true)]]);
    populateActualStateOfWorld([...nodes.values()], [], c.world);
    populateDesiredStateOfWorld([c.pod("p", "n1")], nodes, c.world);
    assert.deepEqual(
      c.dsw.getVolumesToAttach().map((v) => `${v.volumeName}@${v.nodeName}`),
      [`${EBS_NAME}@n1`],
      "the pod's volume is desired under the name KCM reported",
    );
    const executor = new OperationExecutor({
      plugins: c.plugins,
      asw: c.asw,
      nodes: { getNode: (n) => Promise.resolve(nodes.get(n)) },
      events: { event: () => {} },
      clock: c.clock,
      log: silentLogger,
    });
    const reconciler = new Reconciler({
      dsw: c.dsw,
      asw: c.asw,
      executor,
      nodeStatusUpdater: {
        updateNodeStatusForNode: () => Promise.resolve(),
        updateNodeStatuses: () => Promise.resolve(),
      },
      nodes: nodeHealthFrom((n) => nodes.get(n)),
      events: { event: () => {} },
      clock: c.clock,
      log: silentLogger,
    });
    await reconciler.reconcile();
    await executor.waitForCompletion();
    // A kubelet restart: the node goes NotReady after the unmount wait has long passed.
    c.clock.advance(7 * 60_000);
    nodes.set("n1", node("n1", false, true));
    await reconciler.reconcile();
    await executor.waitForCompletion();
    assert.deepEqual(c.calls.detach, [], "nothing is detached");
    assert.deepEqual(c.calls.attach, [], "nothing is re-attached");
    assert.equal(c.asw.getAttachState(EBS_NAME, "n1"), "Attached");
  });

  test("a VolumeAttachment of an in-tree PV found at start-up is the CSI volume: detached when its pod moved", async () => {
    const c = cluster();
    const nodes = new Map([
      ["n1", node("n1", true, false)],
      ["n2", node("n2", true, false)],
    ]);
    const va = {
      metadata: { name: "csi-x" },
      spec: { attacher: "ebs.csi.aws.com", nodeName: "n1", source: { persistentVolumeName: "pv-ebs" } },
      status: { attached: true },
    };
    populateActualStateOfWorld([...nodes.values()], [va], c.world);
    assert.equal(c.asw.getAttachState(EBS_NAME, "n1"), "Uncertain");
    populateDesiredStateOfWorld([c.pod("p", "n2")], nodes, c.world);
    const completed: string[] = [];
    const executor = new OperationExecutor({
      plugins: c.plugins,
      asw: c.asw,
      nodes: { getNode: (n) => Promise.resolve(nodes.get(n)) },
      events: { event: () => {} },
      clock: c.clock,
      log: silentLogger,
      metrics: {
        operationCompleted: (plugin, operation, _seconds, success, migrated) =>
          completed.push(`${operation} ${plugin} success=${success} migrated=${migrated}`),
      },
    });
    const reconciler = new Reconciler({
      dsw: c.dsw,
      asw: c.asw,
      executor,
      nodeStatusUpdater: {
        updateNodeStatusForNode: () => Promise.resolve(),
        updateNodeStatuses: () => Promise.resolve(),
      },
      nodes: nodeHealthFrom((n) => nodes.get(n)),
      events: { event: () => {} },
      clock: c.clock,
      log: silentLogger,
    });
    await reconciler.reconcile();
    await executor.waitForCompletion();
    assert.deepEqual(c.calls.detach, ["ebs.csi.aws.com^vol-1@n1"]);
    // ReadWriteOnce: the attach to n2 waits for the detach from n1 (multi-attach check).
    await reconciler.reconcile();
    await executor.waitForCompletion();
    assert.deepEqual(c.calls.attach, ["ebs.csi.aws.com^vol-1@n2"]);
    // storage_operation_duration_seconds{migrated="true"}, as upstream's getMigratedStatusBySpec.
    assert.deepEqual(completed, [
      "volume_detach kubernetes.io/csi:ebs.csi.aws.com success=true migrated=true",
      "volume_attach kubernetes.io/csi:ebs.csi.aws.com success=true migrated=true",
    ]);
  });
});
