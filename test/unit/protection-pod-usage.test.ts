import assert from "node:assert/strict";
import { describe, test } from "node:test";
import type { V1PersistentVolumeClaim, V1Pod, V1Volume } from "@kubernetes/client-node";
import {
  podIsShutDown,
  podUsesPVCForDeletion,
  podUsesPVCForUnusedSince,
} from "../../src/protection/pod-usage.js";
import { podPVCKeys } from "../../src/volume/common/common.js";
import { ephemeralClaimName } from "../../src/volume/ephemeral.js";
import { isPodTerminated } from "../../src/volume/util/pod.js";

const ns = "default";

function pod(volumes: V1Volume[], extra: { nodeName?: string; phase?: string } = {}): V1Pod {
  return {
    metadata: { name: "pod1", namespace: ns, uid: "pod-uid" },
    spec: { containers: [], volumes, ...(extra.nodeName !== "" && { nodeName: extra.nodeName ?? "node1" }) },
    status: { phase: extra.phase ?? "Pending" },
  };
}

const claimVolume = (claimName: string): V1Volume => ({ name: "data", persistentVolumeClaim: { claimName } });
const ephemeralVolume = (name = "scratch"): V1Volume => ({
  name,
  ephemeral: { volumeClaimTemplate: { spec: { accessModes: ["ReadWriteOnce"] } } },
});

function pvc(name: string, ownerUid?: string): V1PersistentVolumeClaim {
  return {
    metadata: {
      name,
      namespace: ns,
      ...(ownerUid && {
        ownerReferences: [{ apiVersion: "v1", kind: "Pod", name: "pod1", uid: ownerUid, controller: true }],
      }),
    },
  };
}

function deleting(p: V1Pod, gracePeriodSeconds: number): V1Pod {
  const d = structuredClone(p);
  d.metadata!.deletionTimestamp = new Date();
  d.metadata!.deletionGracePeriodSeconds = gracePeriodSeconds;
  return d;
}

describe("which pods keep a claim from being deleted", () => {
  test("a scheduled pod naming the claim uses it; an unrelated claim or emptyDir does not", () => {
    assert.equal(podUsesPVCForDeletion(pod([claimVolume("pvc1")]), pvc("pvc1")), true);
    const other = pod([claimVolume("other"), { name: "tmp", emptyDir: {} }]);
    assert.equal(podUsesPVCForDeletion(other, pvc("pvc1")), false);
  });

  test("an unscheduled pod does not: kubelet never starts a pod whose claim is being deleted", () => {
    assert.equal(podUsesPVCForDeletion(pod([claimVolume("pvc1")], { nodeName: "" }), pvc("pvc1")), false);
  });

  test("a terminated pod still does, as upstream: its volume may still be mounted", () => {
    for (const phase of ["Succeeded", "Failed"]) {
      assert.equal(podUsesPVCForDeletion(pod([claimVolume("pvc1")], { phase }), pvc("pvc1")), true, phase);
    }
  });

  test("a pod being deleted still does, even force-deleted, while it exists", () => {
    assert.equal(podUsesPVCForDeletion(deleting(pod([claimVolume("pvc1")]), 30), pvc("pvc1")), true);
    assert.equal(podUsesPVCForDeletion(deleting(pod([claimVolume("pvc1")]), 0), pvc("pvc1")), true);
  });

  test("a generic ephemeral volume uses the claim named <pod>-<volume> that the pod controls", () => {
    const p = pod([ephemeralVolume("scratch")]);
    assert.equal(ephemeralClaimName(p, ephemeralVolume("scratch")), "pod1-scratch");
    assert.equal(podUsesPVCForDeletion(p, pvc("pod1-scratch", "pod-uid")), true);
    assert.equal(podUsesPVCForDeletion(p, pvc("pod1-scratch", "someone-else")), false, "owned by another");
    assert.equal(podUsesPVCForDeletion(p, pvc("pod1-scratch")), false, "not owned: a name collision");
    assert.equal(podUsesPVCForDeletion(p, pvc("pod1-other", "pod-uid")), false);
  });

  test("an ephemeral claim is released once its pod is shut down (deleted with grace period 0)", () => {
    const p = pod([ephemeralVolume("scratch")]);
    assert.equal(podIsShutDown(deleting(p, 0)), true);
    assert.equal(podIsShutDown(deleting(p, 30)), false);
    assert.equal(podUsesPVCForDeletion(deleting(p, 0), pvc("pod1-scratch", "pod-uid")), false);
    assert.equal(podUsesPVCForDeletion(deleting(p, 30), pvc("pod1-scratch", "pod-uid")), true);
  });
});

describe("which pods make a bound claim not Unused", () => {
  test("any non-terminated pod referencing it, scheduled or not", () => {
    assert.equal(podUsesPVCForUnusedSince(pod([claimVolume("pvc1")], { nodeName: "" }), pvc("pvc1")), true);
    assert.equal(
      podUsesPVCForUnusedSince(pod([claimVolume("pvc1")], { phase: "Running" }), pvc("pvc1")),
      true,
    );
    assert.equal(podUsesPVCForUnusedSince(pod([ephemeralVolume()]), pvc("pod1-scratch", "pod-uid")), true);
  });

  test("terminated pods do not", () => {
    for (const phase of ["Succeeded", "Failed"]) {
      assert.equal(
        podUsesPVCForUnusedSince(pod([claimVolume("pvc1")], { phase }), pvc("pvc1")),
        false,
        phase,
      );
    }
  });
});

describe("isPodTerminated", () => {
  test("Succeeded and Failed are terminated; Pending and Running are not", () => {
    assert.equal(isPodTerminated(pod([], { phase: "Succeeded" })), true);
    assert.equal(isPodTerminated(pod([], { phase: "Failed" })), true);
    assert.equal(isPodTerminated(pod([], { phase: "Running" })), false);
  });

  test("a pod being deleted is terminated once no container runs", () => {
    const running = deleting(pod([], { phase: "Running" }), 30);
    running.status = {
      phase: "Running",
      containerStatuses: [
        { name: "a", image: "i", imageID: "", ready: true, restartCount: 0, state: { running: {} } },
      ],
    };
    assert.equal(isPodTerminated(running), false);
    const stopped = structuredClone(running);
    stopped.status = {
      phase: "Running",
      containerStatuses: [
        {
          name: "a",
          image: "i",
          imageID: "",
          ready: false,
          restartCount: 0,
          state: { terminated: { exitCode: 0 } },
        },
      ],
      initContainerStatuses: [
        { name: "i", image: "i", imageID: "", ready: false, restartCount: 0, state: { waiting: {} } },
      ],
    };
    assert.equal(isPodTerminated(stopped), true);
    assert.equal(isPodTerminated(deleting(pod([], { phase: "Pending" }), 30)), true, "no statuses at all");
    assert.equal(isPodTerminated(pod([], { phase: "Pending" })), false, "not being deleted");
  });
});

describe("the pods-by-claim index", () => {
  test("files a pod under the namespace/name of every claim it names or its ephemeral volumes get", () => {
    const p = pod([claimVolume("pvc1"), { name: "tmp", emptyDir: {} }, ephemeralVolume("scratch")]);
    assert.deepEqual(podPVCKeys(p), ["default/pvc1", "default/pod1-scratch"]);
    assert.deepEqual(podPVCKeys(pod([claimVolume("")])), [], "an empty claim name is no claim");
  });
});
