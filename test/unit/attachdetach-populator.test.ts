import assert from "node:assert/strict";
import { describe, test } from "node:test";
import type {
  V1Node,
  V1PersistentVolume,
  V1PersistentVolumeClaim,
  V1Pod,
  V1VolumeAttachment,
} from "@kubernetes/client-node";
import { ActualStateOfWorld } from "../../src/attachdetach/cache/actual-state-of-world.js";
import { DesiredStateOfWorld } from "../../src/attachdetach/cache/desired-state-of-world.js";
import { OperationExecutor } from "../../src/attachdetach/operation-executor.js";
import { DesiredStateOfWorldPopulator } from "../../src/attachdetach/populator/desired-state-of-world-populator.js";
import { nodeHealthFrom, Reconciler } from "../../src/attachdetach/reconciler.js";
import {
  populateActualStateOfWorld,
  populateDesiredStateOfWorld,
} from "../../src/attachdetach/state-recovery.js";
import {
  CONTROLLER_MANAGED_ATTACH_ANNOTATION,
  createVolumeSpec,
  processPodVolumes,
  type VolumeLookups,
} from "../../src/attachdetach/util.js";
import { FakeClock } from "../../src/runtime/clock.js";
import { silentLogger } from "../../src/runtime/logger.js";
import type { AttachableVolumePlugin } from "../../src/volume/plugin.js";
import { VolumePluginManager } from "../../src/volume/plugin-manager.js";
import { fakeCsiPlugin, TEST_DRIVER, testUniqueName } from "./attachdetach-fixtures.js";

/*
 * The desired-state populator, pod-volume processing and start-up recovery, on in-memory caches.
 * Titles name the upstream case of ../shared/reference/attach-detach-cases.md they port.
 */

/** A cluster in memory: the informer caches the controller reads. */
function cluster() {
  const claims = new Map<string, V1PersistentVolumeClaim>();
  const volumes = new Map<string, V1PersistentVolume>();
  const pods = new Map<string, V1Pod>();
  const lookups: VolumeLookups = {
    getClaim: (ns, name) => claims.get(`${ns}/${name}`),
    getVolume: (name) => volumes.get(name),
  };
  /** Drivers whose CSIDriver says attachRequired=false; changeable at run time. */
  const nonAttaching = new Set<string>();
  const calls = { attach: [] as string[], detach: [] as string[] };
  const base = fakeCsiPlugin();
  const plugin: AttachableVolumePlugin = {
    ...base,
    canAttach: (spec) => !nonAttaching.has(spec.persistentVolume?.spec?.csi?.driver ?? ""),
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

  /** A CSI PV bound to a Bound claim in namespace "ns". */
  const boundClaim = (handle: string, opts: { claimRefUID?: string; phase?: string } = {}) => {
    const uid = `uid-claim-${handle}`;
    claims.set(`ns/claim-${handle}`, {
      metadata: { name: `claim-${handle}`, namespace: "ns", uid },
      spec: { volumeName: `pv-${handle}` },
      status: { phase: opts.phase ?? "Bound" },
    });
    volumes.set(`pv-${handle}`, {
      metadata: { name: `pv-${handle}` },
      spec: {
        accessModes: ["ReadWriteOnce"],
        claimRef: { namespace: "ns", name: `claim-${handle}`, uid: opts.claimRefUID ?? uid },
        csi: { driver: TEST_DRIVER, volumeHandle: handle },
      },
    });
    return `claim-${handle}`;
  };
  const pod = (name: string, node: string, claimNames: string[], extra: Partial<V1Pod> = {}): V1Pod => {
    const p: V1Pod = {
      metadata: { name, namespace: "ns", uid: `uid-${name}` },
      spec: {
        nodeName: node,
        containers: [],
        volumes: claimNames.map((c) => ({ name: c, persistentVolumeClaim: { claimName: c } })),
      },
      ...extra,
    };
    pods.set(`ns/${name}`, p);
    return p;
  };
  const process = (p: V1Pod, add = true) => {
    processPodVolumes(p, add, { dsw, plugins, lookups, log: silentLogger });
  };
  const populator = () =>
    new DesiredStateOfWorldPopulator({
      pods: { get: (k) => pods.get(k), list: () => [...pods.values()] },
      lookups,
      dsw,
      plugins,
      clock,
      log: silentLogger,
      loopPeriodMs: 60_000,
      listPodsRetryDurationMs: 180_000,
    });
  const podsOn = (node: string) =>
    dsw
      .getVolumesToAttach()
      .filter((v) => v.nodeName === node)
      .flatMap((v) => v.scheduledPods.map((p) => `${p.metadata?.name}:${v.volumeName}`))
      .sort();
  return {
    claims,
    volumes,
    pods,
    lookups,
    plugins,
    nonAttaching,
    calls,
    clock,
    dsw,
    asw,
    boundClaim,
    pod,
    process,
    populator,
    podsOn,
    world: { dsw, asw, plugins, lookups, log: silentLogger },
  };
}

describe("createVolumeSpec", () => {
  test("an inline volume is used as it is", () => {
    const c = cluster();
    const spec = createVolumeSpec(
      { metadata: { name: "p", namespace: "ns" } },
      { name: "scratch", emptyDir: {} },
      c.lookups,
    );
    assert.equal(spec.volume?.name, "scratch");
  });

  test("a bound claim gives its PV, read-only as the pod says", () => {
    const c = cluster();
    c.boundClaim("a");
    const spec = createVolumeSpec(
      { metadata: { name: "p", namespace: "ns" } },
      { name: "v", persistentVolumeClaim: { claimName: "claim-a", readOnly: true } },
      c.lookups,
    );
    assert.equal(spec.persistentVolume?.metadata?.name, "pv-a");
    assert.equal(spec.readOnly, true);
  });

  test("a claim that is missing, unbound, or whose PV points at another claim UID is refused", () => {
    const c = cluster();
    const pod = { metadata: { name: "p", namespace: "ns" } };
    const use = (claimName: string) => ({ name: "v", persistentVolumeClaim: { claimName } });
    assert.throws(() => createVolumeSpec(pod, use("nope"), c.lookups), /failed to find PVC ns\/nope/);
    c.boundClaim("pending", { phase: "Pending" });
    assert.throws(
      () => createVolumeSpec(pod, use("claim-pending"), c.lookups),
      /has non-bound phase \("Pending"\)/,
    );
    c.boundClaim("stolen", { claimRefUID: "someone-else" });
    assert.throws(
      () => createVolumeSpec(pod, use("claim-stolen"), c.lookups),
      /found PV object "pv-stolen" but its pv.Spec.ClaimRef.UID \("someone-else"\) does not point to claim.UID \("uid-claim-stolen"\)/,
    );
  });

  test("a generic ephemeral volume resolves <pod>-<volume> and must be owned by the pod", () => {
    const c = cluster();
    c.boundClaim("x");
    const claim = c.claims.get("ns/claim-x")!;
    c.claims.set("ns/web-cache", { ...claim, metadata: { ...claim.metadata, name: "web-cache" } });
    const volume = { name: "cache", ephemeral: { volumeClaimTemplate: { spec: {} } } };
    const pod = { metadata: { name: "web", namespace: "ns", uid: "uid-web" } };
    assert.throws(
      () => createVolumeSpec(pod, volume, c.lookups),
      /was not created for pod ns\/web \(pod is not owner\)/,
    );
    c.claims.set("ns/web-cache", {
      ...claim,
      metadata: {
        ...claim.metadata,
        name: "web-cache",
        ownerReferences: [{ apiVersion: "v1", kind: "Pod", name: "web", uid: "uid-web", controller: true }],
      },
    });
    assert.equal(createVolumeSpec(pod, volume, c.lookups).persistentVolume?.metadata?.name, "pv-x");
  });
});

describe("processPodVolumes", () => {
  test("D37: pods on a node that is not managed are ignored", () => {
    const c = cluster();
    c.process(c.pod("p1", "unmanaged", [c.boundClaim("a")]));
    assert.deepEqual(c.dsw.getVolumesToAttach(), []);
  });

  test("D39/D40: two pods share one volume; it leaves with its last pod", () => {
    const c = cluster();
    c.dsw.addNode("n1");
    const claim = c.boundClaim("a");
    const p1 = c.pod("p1", "n1", [claim]);
    const p2 = c.pod("p2", "n1", [claim]);
    c.process(p1);
    c.process(p2);
    assert.equal(c.dsw.getVolumesToAttach().length, 1);
    assert.deepEqual(c.podsOn("n1"), [`p1:${testUniqueName("a")}`, `p2:${testUniqueName("a")}`]);
    c.process(p1, false);
    assert.deepEqual(c.podsOn("n1"), [`p2:${testUniqueName("a")}`]);
    c.process(p2, false);
    assert.deepEqual(c.dsw.getVolumesToAttach(), []);
  });

  test("47: volumes that need no attaching (attachRequired=false) and unbound claims are skipped", () => {
    const c = cluster();
    c.dsw.addNode("n1");
    c.nonAttaching.add(TEST_DRIVER);
    c.process(c.pod("p1", "n1", [c.boundClaim("a")]));
    c.process(c.pod("p2", "n1", [c.boundClaim("b", { phase: "Pending" })]));
    assert.deepEqual(c.dsw.getVolumesToAttach(), []);
  });
});

describe("DesiredStateOfWorldPopulator", () => {
  test("P41/I25: a pod gone from the informer is removed, from every one of its volumes", () => {
    const c = cluster();
    c.dsw.addNode("n1");
    const p = c.pod("p1", "n1", [c.boundClaim("a"), c.boundClaim("b")]);
    c.process(p);
    assert.equal(c.podsOn("n1").length, 2);
    c.pods.delete("ns/p1");
    c.populator().findAndRemoveDeletedPods();
    assert.deepEqual(c.podsOn("n1"), []);
  });

  test("a pod replaced under the same name (new UID) is removed; the new one is added by the re-list", () => {
    const c = cluster();
    c.dsw.addNode("n1");
    const claim = c.boundClaim("a");
    c.process(c.pod("p1", "n1", [claim]));
    const replaced = c.pod("p1", "n1", [claim]);
    replaced.metadata!.uid = "uid-p1-second";
    const populator = c.populator();
    populator.findAndRemoveDeletedPods();
    assert.deepEqual(c.podsOn("n1"), []);
    populator.findAndAddActivePods();
    const [entry] = c.dsw.getVolumesToAttach();
    assert.equal(entry?.scheduledPods[0]?.metadata?.uid, "uid-p1-second");
  });

  test("I26: a pod that Succeeded is removed", () => {
    const c = cluster();
    c.dsw.addNode("n1");
    const p = c.pod("p1", "n1", [c.boundClaim("a")]);
    c.process(p);
    c.pods.set("ns/p1", { ...p, status: { phase: "Succeeded" } });
    c.populator().findAndRemoveDeletedPods();
    assert.deepEqual(c.podsOn("n1"), []);
  });

  test("I28/I29: the re-list adds pods no event brought, at most every listPodsRetryDuration", () => {
    const c = cluster();
    c.dsw.addNode("n1");
    const populator = c.populator();
    populator.populate(); // first pass lists at once
    c.pod("p1", "n1", [c.boundClaim("a")]); // appeared without an event
    populator.populate();
    assert.deepEqual(c.podsOn("n1"), [], "not before the retry duration");
    c.clock.advance(180_000);
    populator.populate();
    assert.deepEqual(c.podsOn("n1"), [`p1:${testUniqueName("a")}`]);
    c.pod("p2", "n1", [c.boundClaim("b")]);
    c.pods.set("ns/p2", { ...c.pods.get("ns/p2")!, status: { phase: "Failed" } });
    c.clock.advance(180_000);
    populator.populate();
    assert.deepEqual(c.podsOn("n1"), [`p1:${testUniqueName("a")}`], "terminated pods are not added");
  });

  test("47: a volume that stops needing attachment (CSIDriver attachRequired=false) leaves the DSW", () => {
    const c = cluster();
    c.dsw.addNode("n1");
    c.process(c.pod("p1", "n1", [c.boundClaim("a")]));
    c.nonAttaching.add(TEST_DRIVER);
    c.populator().findAndRemoveDeletedPods();
    assert.deepEqual(c.dsw.getVolumesToAttach(), []);
  });
});

const managed = (name: string, status: V1Node["status"] = {}): V1Node => ({
  metadata: { name, annotations: { [CONTROLLER_MANAGED_ATTACH_ANNOTATION]: "true" } },
  status,
});

function va(pv: string | undefined, node: string, attached: boolean): V1VolumeAttachment {
  return {
    metadata: { name: `va-${pv ?? "inline"}-${node}` },
    spec: {
      attacher: TEST_DRIVER,
      nodeName: node,
      source: pv === undefined ? {} : { persistentVolumeName: pv },
    },
    status: { attached },
  };
}

describe("start-up recovery", () => {
  test("C17: node status becomes Attached, mounted as volumesInUse says; managed nodes join the DSW; pods fill it", () => {
    const c = cluster();
    const nodes = [
      managed("n1", {
        volumesAttached: [
          { name: testUniqueName("a"), devicePath: "/dev/a" },
          { name: testUniqueName("b"), devicePath: "/dev/b" },
        ],
        volumesInUse: [testUniqueName("a")],
      }),
      { metadata: { name: "unmanaged" } },
    ];
    populateActualStateOfWorld(nodes, [], c.world);
    assert.equal(c.asw.getAttachState(testUniqueName("a"), "n1"), "Attached");
    assert.equal(c.asw.getAttachState(testUniqueName("b"), "n1"), "Attached");
    const mounted = Object.fromEntries(
      c.asw.getAttachedVolumesForNode("n1").map((v) => [v.volumeName, v.mountedByNode]),
    );
    assert.deepEqual(mounted, { [testUniqueName("a")]: true, [testUniqueName("b")]: false });
    assert.equal(c.dsw.nodeExists("n1"), true);
    assert.equal(c.dsw.nodeExists("unmanaged"), false);

    c.pod("p1", "n1", [c.boundClaim("a")]);
    const byName = new Map(nodes.map((n) => [n.metadata?.name ?? "", n]));
    populateDesiredStateOfWorld([...c.pods.values()], byName, c.world);
    assert.deepEqual(c.podsOn("n1"), [`p1:${testUniqueName("a")}`]);
    const [a] = c.asw.getAttachedVolumesForNode("n1").filter((v) => v.volumeName === testUniqueName("a"));
    assert.equal(a?.volumeSpec?.persistentVolume?.metadata?.name, "pv-a", "the spec is filled in");
    assert.equal(a?.devicePath, "/dev/a", "with the device path the node reported");
  });

  test("C19-C21: VolumeAttachments the nodes do not list become Uncertain; others are skipped", () => {
    const c = cluster();
    c.boundClaim("listed");
    c.boundClaim("unlisted");
    c.boundClaim("noattach");
    c.volumes.get("pv-noattach")!.spec!.csi!.driver = "nonattaching.example.com";
    c.nonAttaching.add("nonattaching.example.com");
    const nodes = [managed("n1", { volumesAttached: [{ name: testUniqueName("listed"), devicePath: "" }] })];
    populateActualStateOfWorld(
      nodes,
      [
        va("pv-listed", "n1", true),
        va("pv-unlisted", "n1", false),
        va("pv-noattach", "n1", true),
        va(undefined, "n1", true),
        va("pv-gone", "n1", true),
      ],
      c.world,
    );
    assert.equal(c.asw.getAttachState(testUniqueName("listed"), "n1"), "Attached");
    assert.equal(c.asw.getAttachState(testUniqueName("unlisted"), "n1"), "Uncertain");
    assert.equal(
      c.asw.getAttachedVolumes().length,
      2,
      "no entry for attachRequired=false, inline or unknown PVs",
    );
    // The node reports nothing in use: the dangling attachment is not assumed mounted (derived: upstream
    // waits for the node's next status update).
    assert.equal(
      c.asw.getAttachedVolumesForNode("n1").find((v) => v.volumeName === testUniqueName("unlisted"))
        ?.mountedByNode,
      false,
    );
  });

  test("C18-C21: after recovery the reconciler attaches what pods want and detaches what none wants", async () => {
    const c = cluster();
    c.boundClaim("wanted-va");
    c.boundClaim("dangling-va");
    c.boundClaim("status-only");
    const nodes = [
      managed("n1", { volumesAttached: [{ name: testUniqueName("status-only"), devicePath: "" }] }),
    ];
    populateActualStateOfWorld(
      nodes,
      [va("pv-wanted-va", "n1", false), va("pv-dangling-va", "n1", true)],
      c.world,
    );
    c.pod("p1", "n1", ["claim-wanted-va"]);
    const byName = new Map(nodes.map((n) => [n.metadata?.name ?? "", n]));
    populateDesiredStateOfWorld([...c.pods.values()], byName, c.world);

    const executor = new OperationExecutor({
      plugins: c.plugins,
      asw: c.asw,
      nodes: { getNode: () => Promise.resolve(byName.get("n1")) },
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
      nodes: nodeHealthFrom((n) =>
        n === "n1" ? { ...nodes[0], status: { conditions: [{ type: "Ready", status: "True" }] } } : undefined,
      ),
      events: { event: () => {} },
      clock: c.clock,
      log: silentLogger,
    });
    await reconciler.reconcile();
    await executor.waitForCompletion();
    assert.deepEqual(c.calls.attach, [`${TEST_DRIVER}^wanted-va@n1`]);
    assert.deepEqual(c.calls.detach.sort(), [
      `${TEST_DRIVER}^dangling-va@n1`,
      `${TEST_DRIVER}^status-only@n1`,
    ]);
    assert.equal(c.asw.getAttachState(testUniqueName("wanted-va"), "n1"), "Attached");
  });
});
