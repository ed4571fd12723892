import assert from "node:assert/strict";
import { describe, test } from "node:test";
import fc from "fast-check";
import {
  ActualStateOfWorld,
  type AttachState,
  type AttachedVolume,
} from "../../src/attachdetach/cache/actual-state-of-world.js";
import { FakeClock } from "../../src/runtime/clock.js";
import type { LogSink } from "../../src/runtime/logger.js";
import {
  NON_ATTACHING_DRIVER,
  testPluginManager,
  testUniqueName,
  testVolumeSpec,
} from "./attachdetach-fixtures.js";

const N = "node-name";
const N1 = "node1-name";
const N2 = "node2-name";
const DEV = "fake/device/path";
const V = testUniqueName("vol");
const V1 = testUniqueName("vol1");
const V2 = testUniqueName("vol2");
const spec = (handle = "vol") => testVolumeSpec(`pv-${handle}`, handle);

interface World {
  asw: ActualStateOfWorld;
  clock: FakeClock;
}

/** Expected getAttachedVolumes() entry; spec is "pv-<handle>" unless `spec: undefined`. */
interface Pair {
  volume: string;
  node: string;
  state: Exclude<AttachState, "Detached">;
  devicePath?: string;
  mounted?: boolean;
  /** Expected detachRequestedTime; undefined = not requested. */
  detachAt?: number;
  specName?: string | undefined;
}

interface Phase {
  act: (w: World) => void;
  /** getAttachedVolumes exactly (any order). */
  pairs?: readonly Pair[];
  /** Extra getAttachState checks, e.g. Detached ones. */
  states?: readonly (readonly [string, string, AttachState])[];
  /** getVolumesToReportAttached (consumes the flags): node → volume names. */
  report?: Readonly<Record<string, readonly string[]>>;
  /** getAttachedVolumesPerNode: node → volume names. */
  perNode?: Readonly<Record<string, readonly string[]>>;
}

interface AswCase {
  /** Upstream actual_state_of_world_test.go name, or "derived: …". */
  name: string;
  phases: readonly Phase[];
}

const attach = (asw: ActualStateOfWorld, volume: string, node: string, devicePath = DEV, s = spec()) =>
  asw.addVolumeNode(volume, s, node, devicePath, true);

const cases: AswCase[] = [
  {
    name: "Test_AddVolumeNode_Positive_NewVolumeNewNode",
    phases: [
      {
        act: ({ asw }) => attach(asw, V, N),
        pairs: [{ volume: V, node: N, state: "Attached" }],
        report: { [N]: [V] },
      },
    ],
  },
  {
    name: "Test_AddVolumeNode_Positive_NewVolumeNewNodeWithFalseAttached",
    phases: [
      {
        act: ({ asw }) => asw.addVolumeNode(V, spec(), N, DEV, false),
        pairs: [{ volume: V, node: N, state: "Uncertain" }],
        report: {},
        perNode: {},
      },
      {
        act: ({ asw }) => {
          assert.deepEqual(asw.getAttachedVolumesForNode(N).length, 1);
          assert.deepEqual(asw.getNodesForAttachedVolume(V, N), []);
          // Stricter than upstream (which has []): the Uncertain attachment holds it for other nodes.
          assert.deepEqual(asw.getNodesForAttachedVolume(V, N2), [N]);
          assert.equal(attach(asw, V, N), V);
          assert.deepEqual(asw.getNodesForAttachedVolume(V, N2), [N]);
          assert.deepEqual(asw.getNodesForAttachedVolume(V, N), []);
        },
        pairs: [{ volume: V, node: N, state: "Attached" }],
        perNode: { [N]: [V] },
      },
    ],
  },
  {
    name: "Test_AddVolumeNode_Positive_NewVolumeTwoNodesWithFalseAttached",
    phases: [
      {
        act: ({ asw }) => {
          asw.addVolumeNode(V, spec(), N1, DEV, false);
          attach(asw, V, N2);
          // Upstream counts N2 only; an Uncertain N1 holds it too, except for N1's own retry.
          assert.deepEqual(asw.getNodesForAttachedVolume(V, N), [N1, N2]);
          assert.deepEqual(asw.getNodesForAttachedVolume(V, N1), [N2]);
          assert.equal(asw.getAttachedVolumesForNode(N2).length, 1);
        },
        pairs: [
          { volume: V, node: N1, state: "Uncertain" },
          { volume: V, node: N2, state: "Attached" },
        ],
        perNode: { [N2]: [V] },
        report: { [N2]: [V] },
      },
    ],
  },
  {
    name: "Test_AddVolumeNode_Positive_ExistingVolumeNewNode",
    phases: [
      {
        act: ({ asw }) => {
          assert.equal(attach(asw, V, N1), attach(asw, V, N2));
        },
        pairs: [
          { volume: V, node: N1, state: "Attached" },
          { volume: V, node: N2, state: "Attached" },
        ],
      },
    ],
  },
  {
    name: "Test_AddVolumeNode_Positive_ExistingVolumeExistingNode",
    phases: [
      {
        act: ({ asw }) => {
          assert.equal(attach(asw, V, N), attach(asw, V, N));
        },
        pairs: [{ volume: V, node: N, state: "Attached" }],
      },
    ],
  },
  {
    name: "Test_DeleteVolumeNode_Positive_VolumeExistsNodeExists",
    phases: [
      {
        act: ({ asw }) => {
          attach(asw, V, N);
          asw.deleteVolumeNode(V, N);
        },
        pairs: [],
        states: [[V, N, "Detached"]],
        report: { [N]: [] },
      },
    ],
  },
  {
    name: "Test_DeleteVolumeNode_Positive_VolumeDoesntExistNodeDoesntExist",
    phases: [
      {
        act: ({ asw }) => {
          asw.deleteVolumeNode(V, N);
        },
        pairs: [],
        states: [[V, N, "Detached"]],
      },
    ],
  },
  {
    name: "Test_DeleteVolumeNode_Positive_TwoNodesOneDeleted",
    phases: [
      {
        act: ({ asw }) => {
          attach(asw, V, N1);
          attach(asw, V, N2);
          asw.deleteVolumeNode(V, N1);
        },
        pairs: [{ volume: V, node: N2, state: "Attached" }],
        states: [[V, N1, "Detached"]],
      },
    ],
  },
  {
    name: "Test_VolumeNodeExists_Positive_VolumeExistsNodeExists",
    phases: [{ act: ({ asw }) => attach(asw, V, N), pairs: [{ volume: V, node: N, state: "Attached" }] }],
  },
  {
    name: "Test_VolumeNodeExists_Positive_VolumeExistsNodeDoesntExist",
    phases: [
      {
        act: ({ asw }) => attach(asw, V, N1),
        pairs: [{ volume: V, node: N1, state: "Attached" }],
        states: [[V, N2, "Detached"]],
      },
    ],
  },
  {
    name: "Test_VolumeNodeExists_Positive_VolumeAndNodeDontExist",
    phases: [{ act: () => undefined, pairs: [], states: [[V, N, "Detached"]] }],
  },
  {
    name: "Test_GetAttachedVolumes_Positive_NoVolumesOrNodes",
    phases: [{ act: () => undefined, pairs: [] }],
  },
  {
    name: "Test_GetAttachedVolumes_Positive_OneVolumeOneNode",
    phases: [{ act: ({ asw }) => attach(asw, V, N), pairs: [{ volume: V, node: N, state: "Attached" }] }],
  },
  {
    name: "Test_GetAttachedVolumes_Positive_TwoVolumeTwoNodes",
    phases: [
      {
        act: ({ asw }) => {
          attach(asw, V1, N1, DEV, spec("vol1"));
          attach(asw, V2, N2, DEV, spec("vol2"));
        },
        pairs: [
          { volume: V1, node: N1, state: "Attached", specName: "pv-vol1" },
          { volume: V2, node: N2, state: "Attached", specName: "pv-vol2" },
        ],
      },
    ],
  },
  {
    name: "Test_GetAttachedVolumes_Positive_OneVolumeTwoNodes (second add resolves the name from the spec)",
    phases: [
      {
        act: ({ asw }) => {
          attach(asw, V, N1);
          assert.equal(asw.addVolumeNode(undefined, spec(), N2, DEV, true), V);
        },
        pairs: [
          { volume: V, node: N1, state: "Attached" },
          { volume: V, node: N2, state: "Attached" },
        ],
      },
    ],
  },
  {
    name: "Test_SetVolumesMountedByNode_Positive_Set (mounted by default)",
    phases: [
      {
        act: ({ asw }) => attach(asw, V, N),
        pairs: [{ volume: V, node: N, state: "Attached", mounted: true }],
      },
    ],
  },
  {
    name: "Test_SetVolumesMountedByNode_Positive_UnsetWithInitialSet",
    phases: [
      {
        act: ({ asw }) => {
          attach(asw, V, N);
          asw.setVolumesMountedByNode([V], N);
          asw.setVolumesMountedByNode(undefined, N);
        },
        pairs: [{ volume: V, node: N, state: "Attached", mounted: false }],
      },
    ],
  },
  {
    name: "Test_SetVolumesMountedByNode_Positive_UnsetWithoutInitialSet",
    phases: [
      {
        act: ({ asw }) => attach(asw, V, N),
        pairs: [{ volume: V, node: N, state: "Attached", mounted: true }],
      },
      {
        act: ({ asw }) => {
          asw.setVolumesMountedByNode([], N);
        },
        pairs: [{ volume: V, node: N, state: "Attached", mounted: false }],
      },
    ],
  },
  {
    name: "Test_SetVolumesMountedByNode_Positive_UnsetWithInitialSetAddVolumeNodeNotReset",
    phases: [
      {
        act: ({ asw }) => {
          attach(asw, V, N);
          asw.setVolumesMountedByNode([V], N);
          asw.setVolumesMountedByNode(undefined, N);
          attach(asw, V, N);
        },
        pairs: [{ volume: V, node: N, state: "Attached", mounted: false }],
      },
    ],
  },
  {
    name: "Test_SetVolumesMountedByNode_Positive_UnsetWithInitialSetVerifyDetachRequestedTimePerserved",
    phases: [
      {
        act: ({ asw, clock }) => {
          attach(asw, V, N);
          clock.advance(5);
          asw.setDetachRequestTime(V, N);
          asw.removeVolumeFromReportAsAttached(V, N);
          clock.advance(7);
          asw.setVolumesMountedByNode([V], N);
          asw.setVolumesMountedByNode(undefined, N);
        },
        pairs: [{ volume: V, node: N, state: "Attached", mounted: false, detachAt: 5 }],
      },
    ],
  },
  {
    name: "Test_RemoveVolumeFromReportAsAttached_Positive_Set",
    phases: [
      {
        act: ({ asw }) => attach(asw, V, N),
        pairs: [{ volume: V, node: N, state: "Attached", mounted: true }],
      },
    ],
  },
  {
    name: "Test_RemoveVolumeFromReportAsAttached_Positive_Marked",
    phases: [
      {
        act: ({ asw, clock }) => {
          attach(asw, V, N);
          clock.advance(1);
          asw.setDetachRequestTime(V, N);
          asw.removeVolumeFromReportAsAttached(V, N);
        },
        pairs: [{ volume: V, node: N, state: "Attached", mounted: true, detachAt: 1 }],
      },
    ],
  },
  {
    name: "Test_MarkDesireToDetach_Positive_MarkedAddVolumeNodeReset",
    phases: [
      {
        act: ({ asw, clock }) => {
          attach(asw, V, N);
          clock.advance(1);
          asw.setDetachRequestTime(V, N);
          asw.removeVolumeFromReportAsAttached(V, N);
          asw.resetDetachRequestTime(V, N);
        },
        pairs: [{ volume: V, node: N, state: "Attached", mounted: true }],
      },
    ],
  },
  {
    name: "Test_RemoveVolumeFromReportAsAttached_Positive_UnsetWithInitialSetVolumesMountedByNodePreserved",
    phases: [
      {
        act: ({ asw, clock }) => {
          attach(asw, V, N);
          asw.setVolumesMountedByNode([V], N);
          asw.setVolumesMountedByNode(undefined, N);
          clock.advance(3);
          asw.setDetachRequestTime(V, N);
          asw.removeVolumeFromReportAsAttached(V, N);
        },
        pairs: [{ volume: V, node: N, state: "Attached", mounted: false, detachAt: 3 }],
      },
    ],
  },
  {
    name: "Test_RemoveVolumeFromReportAsAttached (node listed with no volumes)",
    phases: [
      {
        act: ({ asw }) => {
          attach(asw, V, N);
          asw.removeVolumeFromReportAsAttached(V, N);
        },
        report: { [N]: [] },
      },
    ],
  },
  {
    name: "Test_RemoveVolumeFromReportAsAttached_AddVolumeToReportAsAttached_Positive",
    phases: [
      {
        act: ({ asw }) => {
          attach(asw, V, N);
          asw.removeVolumeFromReportAsAttached(V, N);
        },
        report: { [N]: [] },
      },
      {
        act: ({ asw }) => {
          asw.addVolumeToReportAsAttached(V, N);
        },
        report: { [N]: [V] },
      },
    ],
  },
  {
    name: "Test_RemoveVolumeFromReportAsAttached_Delete_AddVolumeNode",
    phases: [
      {
        act: ({ asw }) => {
          attach(asw, V, N);
          asw.removeVolumeFromReportAsAttached(V, N);
        },
        report: { [N]: [] },
      },
      {
        act: ({ asw }) => {
          asw.deleteVolumeNode(V, N);
          attach(asw, V, N, "");
        },
        report: { [N]: [V] },
        pairs: [{ volume: V, node: N, state: "Attached", devicePath: "" }],
      },
    ],
  },
  {
    name: "Test_GetAttachedVolumesForNode_* (NoVolumesOrNodes, OneVolumeOneNode, TwoVolumeTwoNodes, OneVolumeTwoNodes)",
    phases: [
      {
        act: ({ asw }) => {
          assert.deepEqual(asw.getAttachedVolumesForNode("random"), []);
          attach(asw, V1, N1, DEV, spec("vol1"));
          attach(asw, V2, N2, DEV, spec("vol2"));
          asw.addVolumeNode(undefined, spec("vol1"), N2, DEV, true);
          const forNode = (n: string) =>
            asw.getAttachedVolumesForNode(n).map((v) => [v.volumeName, v.nodeName]);
          assert.deepEqual(forNode(N1), [[V1, N1]]);
          assert.deepEqual(forNode(N2).sort(), [
            [V1, N2],
            [V2, N2],
          ]);
        },
        perNode: { [N1]: [V1], [N2]: [V1, V2] },
      },
    ],
  },
  {
    name: "Test_OneVolumeTwoNodes_TwoDevicePaths (device path is per volume: the last one wins)",
    phases: [
      {
        act: ({ asw }) => {
          attach(asw, V, N1, "fake/device/path1");
          asw.addVolumeNode(undefined, spec(), N2, "fake/device/path2", true);
        },
        pairs: [
          { volume: V, node: N1, state: "Attached", devicePath: "fake/device/path2" },
          { volume: V, node: N2, state: "Attached", devicePath: "fake/device/path2" },
        ],
      },
    ],
  },
  {
    name: "Test_SetNodeStatusUpdateNeededError (unknown node stays unknown)",
    phases: [
      {
        act: ({ asw }) => {
          asw.setNodeStatusUpdateNeeded("node-1");
          assert.equal(asw.getNodesToUpdateStatusFor().size, 0);
        },
        report: {},
      },
    ],
  },
  {
    name: "Test_updateNodeStatusUpdateNeeded (flag cleared by reading, set again on request)",
    phases: [
      { act: ({ asw }) => attach(asw, V, N), report: { [N]: [V] } },
      { act: () => undefined, report: {} },
      {
        act: ({ asw }) => {
          asw.setNodeStatusUpdateNeeded(N);
          const node = asw.getNodesToUpdateStatusFor().get(N);
          assert.equal(node?.statusUpdateNeeded, true);
          assert.deepEqual([...(node?.volumesToReportAsAttached ?? [])], [V]);
        },
        report: { [N]: [V] },
      },
    ],
  },
  {
    name: "Test_MarkVolumeAsAttached",
    phases: [
      {
        act: ({ asw }) => asw.markVolumeAsAttached(V, spec(), N, DEV),
        pairs: [{ volume: V, node: N, state: "Attached" }],
        report: { [N]: [V] },
      },
    ],
  },
  {
    name: "Test_MarkVolumeAsUncertain (not reported, no device path)",
    phases: [
      {
        act: ({ asw }) => asw.markVolumeAsUncertain(V, spec(), N),
        pairs: [{ volume: V, node: N, state: "Uncertain", devicePath: "" }],
        report: {},
        perNode: {},
      },
    ],
  },
  {
    name: "derived: detach failure — unreported, then Uncertain; a later attach reports it again",
    phases: [
      {
        act: ({ asw, clock }) => {
          attach(asw, V, N);
          asw.getVolumesToReportAttached();
          clock.advance(10);
          asw.setDetachRequestTime(V, N);
          asw.removeVolumeFromReportAsAttached(V, N);
          asw.markVolumeAsUncertain(V, spec(), N);
        },
        pairs: [{ volume: V, node: N, state: "Uncertain", devicePath: "", detachAt: 10 }],
        report: { [N]: [] },
        perNode: {},
      },
      {
        act: ({ asw }) => asw.markVolumeAsAttached(V, spec(), N, DEV),
        pairs: [{ volume: V, node: N, state: "Attached", detachAt: 10 }],
        report: { [N]: [V] },
      },
    ],
  },
  {
    name: "derived: startup from node status — no spec, mounted per volumesInUse; the pod's spec fills it in",
    phases: [
      {
        act: ({ asw }) => {
          asw.markVolumeAsAttached(V1, undefined, N, DEV);
          asw.markVolumeAsAttached(V2, undefined, N, DEV);
          asw.setVolumesMountedByNode([V2], N);
        },
        pairs: [
          { volume: V1, node: N, state: "Attached", mounted: false, specName: undefined },
          { volume: V2, node: N, state: "Attached", mounted: true, specName: undefined },
        ],
        report: { [N]: [V1, V2] },
      },
      {
        act: ({ asw }) => asw.markVolumeAsAttached(V2, spec("vol2"), N, DEV),
        pairs: [
          { volume: V1, node: N, state: "Attached", mounted: false, specName: undefined },
          { volume: V2, node: N, state: "Attached", mounted: true, specName: "pv-vol2" },
        ],
        report: {},
      },
    ],
  },
  {
    name: "derived: a volume the node reports in use before it is attached counts as mounted",
    phases: [
      {
        act: ({ asw }) => {
          asw.setVolumesMountedByNode([V], N);
          attach(asw, V, N);
        },
        pairs: [{ volume: V, node: N, state: "Attached", mounted: true }],
      },
    ],
  },
  {
    name: "derived: re-attaching after a detach assumes mounted again",
    phases: [
      {
        act: ({ asw }) => {
          attach(asw, V, N);
          asw.setVolumesMountedByNode([], N);
          asw.markVolumeAsDetached(V, N);
          attach(asw, V, N);
        },
        pairs: [{ volume: V, node: N, state: "Attached", mounted: true }],
      },
    ],
  },
  {
    name: "derived: addVolumeToReportAsAttached after the detach finished is ignored",
    phases: [
      {
        act: ({ asw }) => {
          attach(asw, V, N);
          asw.removeVolumeFromReportAsAttached(V, N);
          asw.markVolumeAsDetached(V, N);
          asw.addVolumeToReportAsAttached(V, N);
        },
        pairs: [],
        report: { [N]: [] },
      },
    ],
  },
  {
    name: "derived: the detach clock starts once and is measured on the Clock",
    phases: [
      {
        act: ({ asw, clock }) => {
          attach(asw, V, N);
          clock.advance(100);
          assert.equal(asw.setDetachRequestTime(V, N), 0);
          clock.advance(6 * 60_000);
          assert.equal(asw.setDetachRequestTime(V, N), 6 * 60_000);
        },
        pairs: [{ volume: V, node: N, state: "Attached", detachAt: 100 }],
      },
    ],
  },
];

function checkPairs(got: AttachedVolume[], want: readonly Pair[], asw: ActualStateOfWorld): void {
  const norm = (p: Pair) => ({
    volume: p.volume,
    node: p.node,
    state: p.state,
    devicePath: p.devicePath ?? DEV,
    mounted: p.mounted ?? true,
    detachAt: p.detachAt,
    specName: "specName" in p ? p.specName : `pv-${p.volume.split("^")[1] ?? ""}`,
  });
  const key = (p: { volume: string; node: string }) => `${p.volume} ${p.node}`;
  const actual = got
    .map((v) => ({
      volume: v.volumeName,
      node: v.nodeName,
      state: asw.getAttachState(v.volumeName, v.nodeName),
      devicePath: v.devicePath,
      mounted: v.mountedByNode,
      detachAt: v.detachRequestedTime,
      specName: v.volumeSpec?.persistentVolume?.metadata?.name,
    }))
    .sort((a, b) => key(a).localeCompare(key(b)));
  assert.deepEqual(
    actual,
    want.map(norm).sort((a, b) => key(a).localeCompare(key(b))),
  );
}

const names = (m: Map<string, readonly { name?: string; volumeName?: string }[]>) =>
  Object.fromEntries([...m].map(([node, vs]) => [node, vs.map((v) => v.name ?? v.volumeName).sort()]));

describe("ActualStateOfWorld (upstream actual_state_of_world_test.go)", () => {
  for (const c of cases) {
    test(c.name, () => {
      const clock = new FakeClock();
      const world: World = { asw: new ActualStateOfWorld(testPluginManager(), clock), clock };
      c.phases.forEach((phase, i) => {
        phase.act(world);
        const { asw } = world;
        if (phase.pairs) checkPairs(asw.getAttachedVolumes(), phase.pairs, asw);
        for (const [volume, node, state] of phase.states ?? [])
          assert.equal(asw.getAttachState(volume, node), state);
        if (phase.perNode)
          assert.deepEqual(names(asw.getAttachedVolumesPerNode()), phase.perNode, `phase ${i}`);
        if (phase.report) {
          const report = asw.getVolumesToReportAttached();
          for (const vs of report.values())
            for (const v of vs)
              assert.equal(
                v.devicePath,
                asw.getAttachedVolumes().find((a) => a.volumeName === v.name)?.devicePath,
              );
          assert.deepEqual(names(report), phase.report, `phase ${i} report`);
        }
      });
    });
  }

  test("Test_GetVolumesToReportAttachedForNode_Positive", () => {
    const asw = new ActualStateOfWorld(testPluginManager(), new FakeClock());
    attach(asw, V, N);
    assert.deepEqual(asw.getVolumesToReportAttachedForNode(N), [{ name: V, devicePath: DEV }]);
    assert.equal(asw.getVolumesToReportAttachedForNode(N), undefined);
    asw.removeVolumeFromReportAsAttached(V, N);
    assert.deepEqual(asw.getVolumesToReportAttachedForNode(N), []);
  });

  test("Test_GetVolumesToReportAttachedForNode_UnknownNode", () => {
    const asw = new ActualStateOfWorld(testPluginManager(), new FakeClock());
    assert.equal(asw.getVolumesToReportAttachedForNode(N), undefined);
  });

  test("derived: errors — unresolvable names, unknown pairs, unreported volumes", () => {
    const logged: string[] = [];
    const log: LogSink = {
      debug() {},
      info() {},
      warn() {},
      error: (_obj, msg) => logged.push(msg),
    };
    const asw = new ActualStateOfWorld(testPluginManager(), new FakeClock(), log);
    assert.throws(
      () => asw.addVolumeNode("", undefined, N, "", true),
      /volumeSpec cannot be nil if volumeName is empty/,
    );
    assert.throws(
      () => asw.markVolumeAsAttached(undefined, testVolumeSpec("pv-x", "x", NON_ATTACHING_DRIVER), N, ""),
      /failed to get AttachablePlugin from volumeSpec for volume "pv-x" err=plugin do not support attachment/,
    );
    assert.throws(
      () => asw.setDetachRequestTime(V, N),
      new RegExp(
        `failed to set detach request time with error: volume ${V.replace(/[.^]/g, "\\$&")} is no longer attached`,
      ),
    );
    asw.resetDetachRequestTime(V, N);
    assert.deepEqual(logged, ["Failed to ResetDetachRequestTime with error"]);
    attach(asw, V, N);
    asw.removeVolumeFromReportAsAttached(V, N);
    assert.throws(() => {
      asw.removeVolumeFromReportAsAttached(V, N);
    }, /does not exist in volumesToReportAsAttached list/);
    assert.equal(asw.getAttachedVolumes().length, 1);
  });

  test("derived: getNodesToUpdateStatusFor is a snapshot", () => {
    const asw = new ActualStateOfWorld(testPluginManager(), new FakeClock());
    attach(asw, V, N);
    const before = asw.getNodesToUpdateStatusFor();
    asw.removeVolumeFromReportAsAttached(V, N);
    assert.deepEqual([...(before.get(N)?.volumesToReportAsAttached ?? [])], [V]);
    assert.deepEqual([...(asw.getNodesToUpdateStatusFor().get(N)?.volumesToReportAsAttached ?? [])], []);
  });

  test("derived (property): states follow a model; reported pairs are always in the ASW", () => {
    const vols = [V1, V2];
    const nodes = [N1, N2];
    const op = fc.record({
      kind: fc.constantFrom("attach", "uncertain", "detach", "unreport", "report"),
      volume: fc.constantFrom(...vols),
      node: fc.constantFrom(...nodes),
    });
    fc.assert(
      fc.property(fc.array(op, { maxLength: 40 }), (ops) => {
        const asw = new ActualStateOfWorld(testPluginManager(), new FakeClock());
        const model = new Map<string, boolean>(); // "volume node" → confirmed
        for (const { kind, volume, node } of ops) {
          const key = `${volume} ${node}`;
          if (kind === "attach") {
            asw.markVolumeAsAttached(volume, undefined, node, "");
            model.set(key, true);
          } else if (kind === "uncertain") {
            asw.markVolumeAsUncertain(volume, undefined, node);
            model.set(key, false);
          } else if (kind === "detach") {
            asw.markVolumeAsDetached(volume, node);
            model.delete(key);
          } else if (kind === "unreport") {
            try {
              asw.removeVolumeFromReportAsAttached(volume, node);
            } catch {
              // not reported: fine
            }
          } else {
            asw.addVolumeToReportAsAttached(volume, node);
          }
        }
        for (const volume of vols) {
          for (const forNode of nodes) {
            const uncertainHere = model.get(`${volume} ${forNode}`) === false;
            const holders = nodes.filter((n) => {
              const m = model.get(`${volume} ${n}`);
              return n !== forNode && m !== undefined && (m || !uncertainHere);
            });
            assert.deepEqual(asw.getNodesForAttachedVolume(volume, forNode).sort(), holders);
          }
          for (const node of nodes) {
            const m = model.get(`${volume} ${node}`);
            assert.equal(
              asw.getAttachState(volume, node),
              m === undefined ? "Detached" : m ? "Attached" : "Uncertain",
            );
          }
        }
        for (const [node, status] of asw.getNodesToUpdateStatusFor()) {
          for (const volume of status.volumesToReportAsAttached) assert.ok(model.has(`${volume} ${node}`));
        }
        assert.equal(asw.getAttachedVolumes().length, model.size);
      }),
    );
  });
});
