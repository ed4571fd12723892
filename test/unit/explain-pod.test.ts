import assert from "node:assert/strict";
import { describe, test } from "node:test";
import type {
  V1CSIDriver,
  V1Node,
  V1PersistentVolume,
  V1PersistentVolumeClaim,
  V1Pod,
  V1Volume,
  V1VolumeAttachment,
} from "@kubernetes/client-node";
import { load } from "js-yaml";
import { CONTROLLER_MANAGED_ATTACH_ANNOTATION } from "../../src/attachdetach/util.js";
import { explainPod, type PodExplanation, type PodInputs } from "../../src/explain/pod.js";
import { noPaint, render } from "../../src/explain/render.js";
import { attachmentName } from "../../src/volume/csi/attachment-name.js";

const DRIVER = "disk.csi.example.com";
const NOW = new Date("2026-12-03T12:00:00Z");
const unique = (handle: string, driver = DRIVER) => `kubernetes.io/csi/${driver}^${handle}`;

function node(
  name: string,
  o: {
    managed?: boolean;
    ready?: boolean;
    outOfService?: boolean;
    attached?: string[];
    inUse?: string[];
  } = {},
): V1Node {
  return {
    metadata: {
      name,
      ...((o.managed ?? true) && { annotations: { [CONTROLLER_MANAGED_ATTACH_ANNOTATION]: "true" } }),
    },
    spec: o.outOfService
      ? { taints: [{ key: "node.kubernetes.io/out-of-service", value: "nodeshutdown", effect: "NoExecute" }] }
      : {},
    status: {
      conditions: [{ type: "Ready", status: (o.ready ?? true) ? "True" : "Unknown" }],
      volumesAttached: (o.attached ?? []).map((n) => ({ name: n, devicePath: "" })),
      volumesInUse: o.inUse ?? [],
    },
  };
}

function pod(
  name: string,
  nodeName: string | undefined,
  volumes: V1Volume[],
  more: Partial<V1Pod> = {},
): V1Pod {
  return {
    metadata: { name, namespace: "app", uid: `uid-${name}` },
    spec: { ...(nodeName && { nodeName }), containers: [{ name: "c" }], volumes },
    status: { phase: "Running" },
    ...more,
  };
}

const claimVolume = (claimName: string): V1Volume => ({ name: "data", persistentVolumeClaim: { claimName } });

/** A claim bound to CSI PV pv-<name> with handle h-<name>. */
function boundCSI(
  name: string,
  accessModes = ["ReadWriteOnce"],
  driver = DRIVER,
): { claim: V1PersistentVolumeClaim; pv: V1PersistentVolume } {
  const claim: V1PersistentVolumeClaim = {
    metadata: { name, namespace: "app", uid: `claim-${name}` },
    spec: { accessModes, volumeName: `pv-${name}` },
    status: { phase: "Bound" },
  };
  const pv: V1PersistentVolume = {
    metadata: { name: `pv-${name}` },
    spec: {
      accessModes,
      claimRef: { namespace: "app", name, uid: `claim-${name}` },
      csi: { driver, volumeHandle: `h-${name}` },
    },
  };
  return { claim, pv };
}

function va(
  handle: string,
  nodeName: string,
  status: V1VolumeAttachment["status"],
  driver = DRIVER,
): V1VolumeAttachment {
  return {
    metadata: { name: attachmentName(handle, driver, nodeName) },
    spec: { attacher: driver, nodeName, source: { persistentVolumeName: "x" } },
    ...(status && { status }),
  };
}

function inputs(o: Partial<PodInputs> & { pod: V1Pod }): PodInputs {
  return {
    nodes: [],
    pods: [o.pod],
    claims: [],
    volumes: [],
    csiDrivers: [],
    volumeAttachments: [],
    now: NOW,
    ...o,
  };
}

const only = (r: PodExplanation) => {
  assert.equal(r.volumes.length, 1);
  return r.volumes[0]!;
};

describe("explainPod: one conclusion per case, from the controller's own code", () => {
  const { claim, pv } = boundCSI("data");
  const name = unique("h-data");
  const p = pod("web", "n1", [claimVolume("data")]);
  const base = { pod: p, claims: [claim], volumes: [pv] };

  test("Attached: reported in node status, with the VolumeAttachment the controller names", () => {
    const r = explainPod(
      inputs({
        ...base,
        nodes: [node("n1", { attached: [name], inUse: [name] })],
        volumeAttachments: [va("h-data", "n1", { attached: true })],
      }),
    );
    const v = only(r);
    assert.equal(v.conclusion.kind, "Attached");
    assert.equal(r.conclusion.kind, "Attached");
    assert.equal(v.plugin, "kubernetes.io/csi");
    assert.equal(v.driver, DRIVER);
    assert.equal(v.uniqueName, name);
    assert.equal(v.attachRequired, null);
    assert.equal(v.multiAttachAllowed, false);
    assert.deepEqual(v.attachment, {
      name: attachmentName("h-data", DRIVER, "n1"),
      exists: true,
      attached: true,
      attachError: null,
      detachError: null,
      deleting: false,
    });
    assert.deepEqual(v.nodeStatus, { volumesAttached: true, volumesInUse: true });
  });

  test("WaitingForAttacher: the VolumeAttachment exists, not attached, with the attacher's error", () => {
    const r = explainPod(
      inputs({
        ...base,
        nodes: [node("n1")],
        volumeAttachments: [
          va("h-data", "n1", { attached: false, attachError: { message: "quota exceeded", time: NOW } }),
        ],
      }),
    );
    assert.equal(only(r).conclusion.kind, "WaitingForAttacher");
    assert.match(r.conclusion.message, /quota exceeded/);
    assert.equal(only(r).attachment?.attachError?.time, NOW.toISOString());
  });

  test("WaitingForController: no VolumeAttachment yet, or attached but not yet in node status", () => {
    const none = explainPod(inputs({ ...base, nodes: [node("n1")] }));
    assert.equal(only(none).conclusion.kind, "WaitingForController");
    assert.equal(only(none).attachment?.exists, false);
    const unreported = explainPod(
      inputs({ ...base, nodes: [node("n1")], volumeAttachments: [va("h-data", "n1", { attached: true })] }),
    );
    assert.equal(only(unreported).conclusion.kind, "WaitingForController");
    assert.match(only(unreported).conclusion.message, /lists it in node n1's status/);
  });

  test("NotAttachable: attachRequired false, inline CSI, volumes no attach plugin handles", () => {
    const noAttach: V1CSIDriver = { metadata: { name: DRIVER }, spec: { attachRequired: false } };
    const r = explainPod(inputs({ ...base, nodes: [node("n1")], csiDrivers: [noAttach] }));
    assert.equal(only(r).conclusion.kind, "NotAttachable");
    assert.equal(only(r).attachRequired, false);
    assert.match(only(r).conclusion.message, /attachRequired: false/);

    const inline = pod("i", "n1", [
      { name: "e", csi: { driver: DRIVER } },
      { name: "cm", configMap: { name: "x" } },
      { name: "scratch", emptyDir: {} },
    ]);
    const ri = explainPod(inputs({ pod: inline, nodes: [node("n1")] }));
    assert.deepEqual(
      ri.volumes.map((v) => [v.source, v.conclusion.kind, v.plugin]),
      [
        ["csi", "NotAttachable", "kubernetes.io/csi"],
        ["configMap", "NotAttachable", null],
        ["emptyDir", "NotAttachable", null],
      ],
    );
    assert.equal(ri.conclusion.kind, "NotAttachable");
    assert.match(ri.conclusion.message, /no volume needs attaching/);
  });

  test("NodeNotManaged, NotScheduled", () => {
    const r = explainPod(inputs({ ...base, nodes: [node("n1", { managed: false })] }));
    assert.equal(only(r).conclusion.kind, "NodeNotManaged");
    assert.equal(r.node?.managed, false);
    const unscheduled = explainPod(inputs({ ...base, pod: pod("web", undefined, [claimVolume("data")]) }));
    assert.equal(only(unscheduled).conclusion.kind, "NotScheduled");
    assert.equal(unscheduled.node, null);
  });

  test("ClaimNotBound points to kvc explain pvc; a missing claim cannot be resolved", () => {
    const pending: V1PersistentVolumeClaim = { metadata: { name: "data", namespace: "app" }, spec: {} };
    const r = explainPod(inputs({ pod: p, claims: [pending], nodes: [node("n1")] }));
    assert.equal(only(r).conclusion.kind, "ClaimNotBound");
    assert.deepEqual(r.suggestions, ["kvc explain pvc data -n app"]);
    const missing = explainPod(inputs({ pod: p, nodes: [node("n1")] }));
    assert.equal(only(missing).conclusion.kind, "CannotResolve");
    assert.match(only(missing).conclusion.message, /failed to find PVC app\/data/);
  });

  test("a migrated in-tree volume is explained as its CSI driver", () => {
    const ebs = pod("ebs", "n1", [{ name: "d", awsElasticBlockStore: { volumeID: "vol-1" } }]);
    const r = explainPod(inputs({ pod: ebs, nodes: [node("n1")] }));
    const v = only(r);
    assert.equal(v.migratedFrom, "kubernetes.io/aws-ebs");
    assert.equal(v.driver, "ebs.csi.aws.com");
    assert.equal(v.uniqueName, "kubernetes.io/csi/ebs.csi.aws.com^vol-1");
    assert.equal(v.attachment?.name, attachmentName("vol-1", "ebs.csi.aws.com", "n1"));
  });

  test("PendingDetach: the pod is terminated and the volume is still attached to its node", () => {
    const done = pod("web", "n1", [claimVolume("data")], { status: { phase: "Succeeded" } });
    const r = explainPod(
      inputs({ ...base, pod: done, pods: [done], nodes: [node("n1", { attached: [name], inUse: [name] })] }),
    );
    assert.equal(only(r).conclusion.kind, "PendingDetach");
    assert.equal(only(r).detach?.forceDetach, "never");
    const gone = explainPod(inputs({ ...base, pod: done, pods: [done], nodes: [node("n1")] }));
    assert.equal(only(gone).conclusion.kind, "Detached");
  });
});

describe("explainPod: multi-attach", () => {
  const { claim, pv } = boundCSI("data");
  const name = unique("h-data");
  const p = pod("web", "n1", [claimVolume("data")]);
  const finishedAt = new Date("2026-12-03T11:58:00Z");
  const old = (terminated: boolean) =>
    pod(
      "old",
      "n2",
      [claimVolume("data")],
      terminated
        ? {
            status: {
              phase: "Failed",
              containerStatuses: [
                {
                  name: "c",
                  image: "i",
                  imageID: "",
                  ready: false,
                  restartCount: 0,
                  state: { terminated: { exitCode: 1, finishedAt } },
                },
              ],
            },
          }
        : {},
    );
  const world = (holder: V1Pod, n2: Parameters<typeof node>[1]) =>
    inputs({
      pod: p,
      pods: [p, holder],
      claims: [claim],
      volumes: [pv],
      nodes: [node("n1"), node("n2", { attached: [name], ...n2 })],
      volumeAttachments: [va("h-data", "n2", { attached: true })],
    });

  test("a RWO volume attached to another node with a running pod: which node, which pod", () => {
    const r = explainPod(world(old(false), { inUse: [name] }));
    const v = only(r);
    assert.equal(v.conclusion.kind, "MultiAttachConflict");
    assert.equal(r.conclusion.kind, "MultiAttachConflict");
    assert.equal(v.otherNodes.length, 1);
    const [o] = v.otherNodes;
    assert.equal(o?.node, "n2");
    assert.equal(o?.attached, true);
    assert.equal(o?.attachment?.name, attachmentName("h-data", DRIVER, "n2"));
    assert.deepEqual(o?.detach.pods, [{ name: "app/old", active: true }]);
    assert.equal(o?.detach.pending, false);
    assert.match(v.conclusion.message, /attached to node n2; pod\(s\) app\/old on node n2 still use it/);
    assert.match(r.suggestions.join("\n"), /out-of-service/);
  });

  test("the holder's pod ended: when the force-detach rule fires", () => {
    const forced = (n2: Parameters<typeof node>[1]) =>
      only(explainPod(world(old(true), n2))).otherNodes[0]?.detach;
    // Not Ready and still mounted: 6 minutes after the pod ended.
    const timeout = forced({ ready: false, inUse: [name] });
    assert.equal(timeout?.forceDetach, "timeout");
    assert.equal(timeout?.forceDetachAfter, new Date(finishedAt.getTime() + 6 * 60_000).toISOString());
    assert.match(timeout?.message ?? "", /in 4 min/);
    assert.equal(forced({ ready: false, outOfService: true, inUse: [name] })?.forceDetach, "now");
    assert.equal(forced({ ready: true, inUse: [name] })?.forceDetach, "never");
    assert.equal(forced({ ready: true })?.forceDetach, "not-needed");
    assert.equal(
      only(explainPod(world(old(true), { ready: false, inUse: [name] }))).conclusion.kind,
      "MultiAttachConflict",
    );
  });

  test("a RWX volume attached elsewhere is no conflict; wanted elsewhere is named", () => {
    const rwx = boundCSI("data", ["ReadWriteMany"]);
    const r = explainPod(inputs({ ...world(old(false), {}), claims: [rwx.claim], volumes: [rwx.pv] }));
    assert.equal(only(r).multiAttachAllowed, true);
    assert.equal(only(r).conclusion.kind, "WaitingForController");

    // RWO, attached nowhere, an active pod on n2 wants it too.
    const both = explainPod(
      inputs({
        pod: p,
        pods: [p, old(false)],
        claims: [claim],
        volumes: [pv],
        nodes: [node("n1"), node("n2")],
      }),
    );
    assert.equal(only(both).conclusion.kind, "WaitingForController");
    assert.match(only(both).conclusion.message, /also wanted on node n2: only one node can attach it/);
    // A pod on a node the controller does not manage wants nothing from it (processPodVolumes).
    const unmanaged = explainPod(
      inputs({
        pod: p,
        pods: [p, old(false)],
        claims: [claim],
        volumes: [pv],
        nodes: [node("n1"), node("n2", { managed: false })],
      }),
    );
    assert.deepEqual(only(unmanaged).otherNodes, []);
    assert.doesNotMatch(only(unmanaged).conclusion.message, /also wanted/);
  });
});

test("render: human output names the conclusion; json and yaml carry the same object", () => {
  const { claim, pv } = boundCSI("data");
  const p = pod("web", "n1", [claimVolume("data")]);
  const r = explainPod(inputs({ pod: p, claims: [claim], volumes: [pv], nodes: [node("n1")] }));
  const human = render(r, "human", noPaint);
  assert.match(human, /^Pod app\/web: Running/);
  assert.match(human, /Conclusion: WaitingForController: volume data: /);
  assert.deepEqual(JSON.parse(render(r, "json", noPaint)), load(render(r, "yaml", noPaint)));
});

test("hostile objects give a conclusion, never a throw", () => {
  const { claim, pv } = boundCSI("data");
  const stolen: V1PersistentVolume = {
    ...pv,
    spec: { ...pv.spec, claimRef: { name: "data", namespace: "app", uid: "other" } },
  };
  const p = pod("web", "n1", [claimVolume("data"), { name: "bare" }, { name: "eph", ephemeral: {} }]);
  const r = explainPod(
    inputs({
      pod: p,
      claims: [claim],
      volumes: [stolen],
      nodes: [{ metadata: { name: "n1", annotations: { [CONTROLLER_MANAGED_ATTACH_ANNOTATION]: "" } } }],
      volumeAttachments: [{ metadata: {}, spec: {} } as V1VolumeAttachment],
    }),
  );
  assert.deepEqual(
    r.volumes.map((v) => v.conclusion.kind),
    ["CannotResolve", "NotAttachable", "CannotResolve"],
  );
  assert.match(r.volumes[0]?.conclusion.message ?? "", /does not point to claim.UID/);
  assert.equal(r.conclusion.kind, "CannotResolve");
  assert.equal(r.node?.ready, false);
});
