import assert from "node:assert/strict";
import { describe, test } from "node:test";
import fc from "fast-check";
import { DesiredStateOfWorld } from "../../src/attachdetach/cache/desired-state-of-world.js";
import { specFromVolume } from "../../src/volume/plugin.js";
import {
  NON_ATTACHING_DRIVER,
  newPod,
  testPluginManager,
  testUniqueName,
  testVolumeSpec,
} from "./attachdetach-fixtures.js";

/** [pod uid, volume handle (PV "pv-<handle>"), node]. */
type PodOnNode = readonly [string, string, string];

interface DswCase {
  /** Upstream desired_state_of_world_test.go name, or "derived: …". */
  name: string;
  nodes?: readonly string[];
  /** addPod calls that must succeed, in order. */
  pods?: readonly PodOnNode[];
  act?: (dsw: DesiredStateOfWorld) => void;
  /** act must throw this. */
  error?: RegExp;
  /** getVolumesToAttach exactly, as [node, handle, pod uids]. */
  toAttach: readonly (readonly [string, string, readonly string[]])[];
  nodeExists?: Readonly<Record<string, boolean>>;
  /** volumeExists(testUniqueName(handle), node) — or a raw name when it contains "/". */
  volumeExists?: readonly (readonly [string, string, boolean])[];
  /** getPodToAdd, as pod uid → [handle, node]. */
  podsToAdd?: Readonly<Record<string, readonly [string, string]>>;
}

const N = "node-name";
const N1 = "node1-name";
const N2 = "node2-name";

function addPod(dsw: DesiredStateOfWorld, [uid, handle, node]: PodOnNode): string {
  return dsw.addPod(uid, newPod(uid), testVolumeSpec(`pv-${handle}`, handle), node);
}

const volumeKey = (name: string) => (name.includes("/") ? name : testUniqueName(name));

const cases: DswCase[] = [
  { name: "Test_AddNode_Positive_NewNode", nodes: [N], nodeExists: { [N]: true }, toAttach: [] },
  { name: "Test_AddNode_Positive_ExistingNode", nodes: [N, N], nodeExists: { [N]: true }, toAttach: [] },
  {
    name: "Test_AddPod_Positive_NewPodNodeExistsVolumeDoesntExist",
    nodes: [N],
    pods: [["pod-uid", "vol", N]],
    volumeExists: [["vol", N, true]],
    toAttach: [[N, "vol", ["pod-uid"]]],
  },
  {
    name: "Test_AddPod_Positive_NewPodNodeExistsVolumeExists",
    nodes: [N],
    pods: [
      ["pod1-uid", "vol", N],
      ["pod2-uid", "vol", N],
    ],
    toAttach: [[N, "vol", ["pod1-uid", "pod2-uid"]]],
    podsToAdd: { "pod1-uid": ["vol", N], "pod2-uid": ["vol", N] },
  },
  {
    name: "Test_AddPod_Positive_PodExistsNodeExistsVolumeExists",
    nodes: [N],
    pods: [
      ["pod-uid", "vol", N],
      ["pod-uid", "vol", N],
    ],
    toAttach: [[N, "vol", ["pod-uid"]]],
  },
  {
    name: "Test_AddPod_Negative_NewPodNodeDoesntExistVolumeDoesntExist",
    act: (dsw) => addPod(dsw, ["pod-uid", "vol", N]),
    error: /^Error: no node with the name "node-name" exists in the list of managed nodes$/,
    volumeExists: [["vol", N, false]],
    toAttach: [],
  },
  {
    name: "Test_DeleteNode_Positive_NodeExists",
    nodes: [N],
    act: (dsw) => {
      dsw.deleteNode(N);
    },
    nodeExists: { [N]: false },
    toAttach: [],
  },
  {
    name: "Test_DeleteNode_Positive_NodeDoesntExist",
    act: (dsw) => {
      dsw.deleteNode("node-not-added-name");
    },
    nodeExists: { "node-not-added-name": false },
    toAttach: [],
  },
  {
    name: "Test_DeleteNode_Negative_NodeExistsHasChildVolumes",
    nodes: [N],
    pods: [["pod-uid", "vol", N]],
    act: (dsw) => {
      dsw.deleteNode(N);
    },
    error: /failed to delete node "node-name" .* still contains 1 volumes in its list of volumes to attach/,
    nodeExists: { [N]: true },
    toAttach: [[N, "vol", ["pod-uid"]]],
  },
  {
    name: "Test_DeletePod_Positive_PodExistsNodeExistsVolumeExists",
    nodes: [N],
    pods: [["pod-uid", "vol", N]],
    act: (dsw) => {
      dsw.deletePod("pod-uid", testUniqueName("vol"), N);
    },
    volumeExists: [["vol", N, false]],
    toAttach: [],
  },
  {
    name: "Test_DeletePod_Positive_2PodsExistNodeExistsVolumesExist",
    nodes: [N],
    pods: [
      ["pod1-uid", "vol", N],
      ["pod2-uid", "vol", N],
    ],
    act: (dsw) => {
      dsw.deletePod("pod1-uid", testUniqueName("vol"), N);
    },
    volumeExists: [["vol", N, true]],
    toAttach: [[N, "vol", ["pod2-uid"]]],
  },
  {
    name: "Test_DeletePod_Positive_PodDoesNotExist",
    nodes: [N],
    pods: [["pod1-uid", "vol", N]],
    act: (dsw) => {
      dsw.deletePod("pod2-uid", testUniqueName("vol"), N);
    },
    volumeExists: [["vol", N, true]],
    toAttach: [[N, "vol", ["pod1-uid"]]],
  },
  {
    name: "Test_DeletePod_Positive_NodeDoesNotExist",
    nodes: [N1],
    pods: [["pod-uid", "vol", N1]],
    act: (dsw) => {
      dsw.deletePod("pod-uid", testUniqueName("vol"), N2);
    },
    volumeExists: [
      ["vol", N1, true],
      ["vol", N2, false],
    ],
    toAttach: [[N1, "vol", ["pod-uid"]]],
  },
  {
    name: "Test_DeletePod_Positive_VolumeDoesNotExist",
    nodes: [N],
    pods: [["pod-uid", "vol1", N]],
    act: (dsw) => {
      dsw.deletePod("pod-uid", testUniqueName("vol2"), N);
    },
    volumeExists: [
      ["vol1", N, true],
      ["vol2", N, false],
    ],
    toAttach: [[N, "vol1", ["pod-uid"]]],
  },
  {
    name: "Test_NodeExists_Positive_NodeExists (node never added)",
    nodeExists: { "node-not-added-name": false },
    toAttach: [],
  },
  {
    name: "Test_NodeExists_Positive_NodeDoesntExist (node added)",
    nodes: [N],
    nodeExists: { [N]: true },
    toAttach: [],
  },
  {
    name: "Test_VolumeExists_Positive_VolumeExistsNodeExists",
    nodes: [N],
    pods: [["pod-uid", "vol", N]],
    volumeExists: [["vol", N, true]],
    toAttach: [[N, "vol", ["pod-uid"]]],
  },
  {
    name: "Test_VolumeExists_Positive_VolumeDoesntExistNodeExists",
    nodes: [N],
    pods: [["pod-uid", "vol1", N]],
    volumeExists: [["vol2", N, false]],
    toAttach: [[N, "vol1", ["pod-uid"]]],
  },
  {
    name: "Test_VolumeExists_Positive_VolumeDoesntExistNodeDoesntExists",
    volumeExists: [["vol", N, false]],
    toAttach: [],
  },
  { name: "Test_GetVolumesToAttach_Positive_NoNodes", toAttach: [] },
  { name: "Test_GetVolumesToAttach_Positive_TwoNodes", nodes: [N1, N2], toAttach: [] },
  {
    name: "Test_GetVolumesToAttach_Positive_TwoNodesOneVolumeEach",
    nodes: [N1, N2],
    pods: [
      ["pod1-uid", "vol1", N1],
      ["pod2-uid", "vol2", N2],
    ],
    toAttach: [
      [N1, "vol1", ["pod1-uid"]],
      [N2, "vol2", ["pod2-uid"]],
    ],
  },
  {
    name: "Test_GetVolumesToAttach_Positive_TwoNodesOneVolumeEachExtraPod",
    nodes: [N1, N2],
    pods: [
      ["pod1-uid", "vol1", N1],
      ["pod2-uid", "vol2", N2],
      ["pod3-uid", "vol2", N2],
      ["pod3-uid", "vol2", N2],
    ],
    toAttach: [
      [N1, "vol1", ["pod1-uid"]],
      [N2, "vol2", ["pod2-uid", "pod3-uid"]],
    ],
  },
  {
    name: "Test_GetVolumesToAttach_Positive_TwoNodesThreeVolumes",
    nodes: [N1, N2],
    pods: [
      ["pod1-uid", "vol1", N1],
      ["pod2a-name", "vol2", N2],
      ["pod2b-name", "vol2", N2],
      ["pod3-uid", "vol3", N1],
    ],
    toAttach: [
      [N1, "vol1", ["pod1-uid"]],
      [N1, "vol3", ["pod3-uid"]],
      [N2, "vol2", ["pod2a-name", "pod2b-name"]],
    ],
  },
  {
    name: "derived: same volume on two nodes is two volumes to attach",
    nodes: [N1, N2],
    pods: [
      ["pod1-uid", "vol", N1],
      ["pod2-uid", "vol", N2],
    ],
    volumeExists: [
      ["vol", N1, true],
      ["vol", N2, true],
    ],
    toAttach: [
      [N1, "vol", ["pod1-uid"]],
      [N2, "vol", ["pod2-uid"]],
    ],
  },
  {
    name: "derived: a non-attachable volume (CSIDriver attachRequired=false) is refused",
    nodes: [N],
    act: (dsw) =>
      dsw.addPod("pod-uid", newPod("pod-uid"), testVolumeSpec("pv-x", "x", NON_ATTACHING_DRIVER), N),
    error:
      /^Error: failed to get AttachablePlugin from volumeSpec for volume "pv-x" err=plugin do not support attachment$/,
    toAttach: [],
  },
  {
    name: "derived: a volume no plugin supports is refused",
    nodes: [N],
    act: (dsw) =>
      dsw.addPod("pod-uid", newPod("pod-uid"), specFromVolume({ name: "scratch", emptyDir: {} }), N),
    error: /failed to get AttachablePlugin from volumeSpec for volume "scratch" err=no volume plugin matched/,
    toAttach: [],
  },
  {
    name: "derived: a spec the plugin cannot name is refused",
    nodes: [N],
    act: (dsw) => dsw.addPod("pod-uid", newPod("pod-uid"), testVolumeSpec("pv-x", ""), N),
    error:
      /failed to get UniqueVolumeName from volumeSpec for plugin="kubernetes.io\/csi" and volume="pv-x" err=volume source is not a CSI volume/,
    toAttach: [],
  },
  {
    name: "derived: a pod with two volumes is listed once by getPodToAdd (upstream map by pod UID)",
    nodes: [N],
    pods: [
      ["pod-uid", "vol1", N],
      ["pod-uid", "vol2", N],
    ],
    toAttach: [
      [N, "vol1", ["pod-uid"]],
      [N, "vol2", ["pod-uid"]],
    ],
    podsToAdd: { "pod-uid": ["vol2", N] },
  },
];

describe("DesiredStateOfWorld (upstream desired_state_of_world_test.go)", () => {
  for (const c of cases) {
    test(c.name, () => {
      const dsw = new DesiredStateOfWorld(testPluginManager());
      for (const node of c.nodes ?? []) dsw.addNode(node);
      for (const pod of c.pods ?? []) assert.equal(addPod(dsw, pod), testUniqueName(pod[1]));
      if (c.error) assert.throws(() => c.act?.(dsw), c.error);
      else c.act?.(dsw);

      const toAttach = dsw
        .getVolumesToAttach()
        .map((v) => [v.nodeName, v.volumeName, v.scheduledPods.map((p) => p.metadata?.uid).sort()] as const)
        .sort((a, b) => `${a[0]} ${a[1]}`.localeCompare(`${b[0]} ${b[1]}`));
      const want = c.toAttach.map(
        ([node, handle, pods]) => [node, testUniqueName(handle), [...pods]] as const,
      );
      assert.deepEqual(toAttach, want);
      for (const v of dsw.getVolumesToAttach()) {
        assert.equal(v.volumeSpec.persistentVolume?.metadata?.name, `pv-${v.volumeName.split("^")[1] ?? ""}`);
        assert.equal(v.multiAttachErrorReported, false);
      }
      for (const [node, exists] of Object.entries(c.nodeExists ?? {}))
        assert.equal(dsw.nodeExists(node), exists);
      for (const [volume, node, exists] of c.volumeExists ?? []) {
        assert.equal(dsw.volumeExists(volumeKey(volume), node), exists, `volumeExists(${volume}, ${node})`);
      }
      if (c.podsToAdd) {
        const got = Object.fromEntries(
          [...dsw.getPodToAdd()].map(([uid, p]) => [uid, [p.volumeName, p.nodeName, p.pod.metadata?.uid]]),
        );
        const wanted = Object.fromEntries(
          Object.entries(c.podsToAdd).map(([uid, [handle, node]]) => [
            uid,
            [testUniqueName(handle), node, uid],
          ]),
        );
        assert.deepEqual(got, wanted);
      }
    });
  }

  test("Test_GetPodsOnNodes", () => {
    const dsw = new DesiredStateOfWorld(testPluginManager());
    dsw.addNode(N1);
    dsw.addNode(N2);
    dsw.addNode("node3-name");
    const volume1 = addPod(dsw, ["pod1-uid", "vol1", N1]);
    addPod(dsw, ["pod2-uid", "vol2", N2]);
    const pods = dsw.getVolumePodsOnNodes([N1, N2, "node3-name", "non-existing-node"], volume1);
    assert.deepEqual(
      pods.map((p) => p.metadata?.name),
      ["pod1-uid"],
    );
  });

  test("derived: the unique name is kubernetes.io/csi/<driver>^<handle>, from the plugin", () => {
    const dsw = new DesiredStateOfWorld(testPluginManager());
    dsw.addNode(N);
    assert.equal(
      dsw.addPod("uid", newPod("uid"), testVolumeSpec("pv", "vol-1"), N),
      "kubernetes.io/csi/test.csi.example.com^vol-1",
    );
  });

  test("derived: re-adding a pod keeps the first pod object and the first spec", () => {
    const dsw = new DesiredStateOfWorld(testPluginManager());
    dsw.addNode(N);
    const first = newPod("uid", "first");
    dsw.addPod("uid", first, testVolumeSpec("pv-a", "vol"), N);
    dsw.addPod("uid", newPod("uid", "second"), testVolumeSpec("pv-b", "vol"), N);
    const [v] = dsw.getVolumesToAttach();
    assert.equal(v?.scheduledPods[0], first);
    assert.equal(v?.volumeSpec.persistentVolume?.metadata?.name, "pv-a");
  });

  test("derived: setMultiAttachError marks one (volume, node) until the volume leaves the DSW", () => {
    const dsw = new DesiredStateOfWorld(testPluginManager());
    dsw.addNode(N1);
    dsw.addNode(N2);
    const vol = addPod(dsw, ["pod1", "vol", N1]);
    addPod(dsw, ["pod2", "vol", N2]);
    dsw.setMultiAttachError(vol, N2);
    dsw.setMultiAttachError(vol, "unmanaged-node");
    dsw.setMultiAttachError(testUniqueName("other"), N1);
    const reported = () =>
      Object.fromEntries(dsw.getVolumesToAttach().map((v) => [v.nodeName, v.multiAttachErrorReported]));
    assert.deepEqual(reported(), { [N1]: false, [N2]: true });
    addPod(dsw, ["pod3", "vol", N2]);
    assert.deepEqual(reported(), { [N1]: false, [N2]: true }, "a new pod does not re-arm the event");
    dsw.deletePod("pod2", vol, N2);
    dsw.deletePod("pod3", vol, N2);
    addPod(dsw, ["pod4", "vol", N2]);
    assert.deepEqual(reported(), { [N1]: false, [N2]: false }, "re-added volume reports again");
  });

  test("derived (property): volumes exist exactly while a pod uses them; deleteNode only when empty", () => {
    const handles = ["a", "b", "c"];
    const nodes = [N1, N2];
    const pods = ["p1", "p2", "p3"];
    const op = fc.oneof(
      fc.record({
        kind: fc.constantFrom("add", "delete"),
        pod: fc.constantFrom(...pods),
        handle: fc.constantFrom(...handles),
        node: fc.constantFrom(...nodes),
      }),
      fc.record({ kind: fc.constant("deleteNode"), node: fc.constantFrom(...nodes) }),
      fc.record({ kind: fc.constant("addNode"), node: fc.constantFrom(...nodes) }),
    );
    fc.assert(
      fc.property(fc.array(op, { maxLength: 40 }), (ops) => {
        const dsw = new DesiredStateOfWorld(testPluginManager());
        // Model: managed node → "pod handle" pairs.
        const model = new Map<string, Set<string>>();
        for (const o of ops) {
          const managed = model.get(o.node);
          if (o.kind === "addNode") {
            dsw.addNode(o.node);
            if (!managed) model.set(o.node, new Set());
          } else if (o.kind === "deleteNode") {
            if (managed && managed.size > 0)
              assert.throws(() => {
                dsw.deleteNode(o.node);
              });
            else {
              dsw.deleteNode(o.node);
              model.delete(o.node);
            }
          } else if (o.kind === "add") {
            if (!managed)
              assert.throws(() => addPod(dsw, [o.pod, o.handle, o.node]), /no node with the name/);
            else {
              addPod(dsw, [o.pod, o.handle, o.node]);
              managed.add(`${o.pod} ${o.handle}`);
            }
          } else {
            dsw.deletePod(o.pod, testUniqueName(o.handle), o.node);
            managed?.delete(`${o.pod} ${o.handle}`);
          }
        }
        for (const node of nodes) {
          const managed = model.get(node);
          assert.equal(dsw.nodeExists(node), managed !== undefined);
          for (const handle of handles) {
            const users = [...(managed ?? [])]
              .filter((k) => k.endsWith(` ${handle}`))
              .map((k) => k.split(" ")[0]);
            assert.equal(dsw.volumeExists(testUniqueName(handle), node), users.length > 0);
            const onNode = dsw.getVolumePodsOnNodes([node], testUniqueName(handle));
            assert.deepEqual(onNode.map((p) => p.metadata?.uid).sort(), users.sort());
          }
        }
      }),
    );
  });
});
