import assert from "node:assert/strict";
import { describe, test } from "node:test";
import type { V1Node, V1Pod } from "@kubernetes/client-node";
import { nodeForVolumes, podForVolumes } from "../../src/runtime/informer/transform.js";
import { podUsesPVCForDeletion, podUsesPVCForUnusedSince } from "../../src/protection/pod-usage.js";
import { podPVCKeys } from "../../src/volume/common/common.js";
import { isPodTerminated } from "../../src/volume/util/pod.js";

const started = new Date("2026-12-01T08:00:00Z");

function kubeletPod(phase: string, state: "running" | "terminated" | "waiting", deleting = false): V1Pod {
  return {
    kind: "Pod",
    apiVersion: "v1",
    metadata: {
      name: "web-0",
      namespace: "ns",
      uid: "uid-web-0",
      resourceVersion: "7",
      labels: { app: "web" },
      ownerReferences: [
        { apiVersion: "apps/v1", kind: "StatefulSet", name: "web", uid: "u", controller: true },
      ],
      ...(deleting && { deletionTimestamp: started, deletionGracePeriodSeconds: 30 }),
    },
    spec: {
      nodeName: "n1",
      containers: [
        {
          name: "app",
          image: "registry.example.com/web:v1",
          env: [{ name: "LOG_LEVEL", value: "info" }],
          volumeMounts: [{ name: "data", mountPath: "/data" }],
        },
      ],
      initContainers: [{ name: "init", image: "busybox" }],
      volumes: [
        { name: "data", persistentVolumeClaim: { claimName: "data-web-0" } },
        { name: "scratch", ephemeral: { volumeClaimTemplate: { spec: { accessModes: ["ReadWriteOnce"] } } } },
      ],
      tolerations: [{ key: "node.kubernetes.io/not-ready", operator: "Exists", effect: "NoExecute" }],
    },
    status: {
      phase,
      conditions: [{ type: "Ready", status: "True" }],
      podIP: "10.1.2.3",
      hostIP: "10.0.0.1",
      qosClass: "Burstable",
      containerStatuses: [
        {
          name: "app",
          image: "registry.example.com/web:v1",
          imageID: "registry.example.com/web@sha256:00",
          containerID: "containerd://abc",
          ready: state === "running",
          restartCount: 0,
          state:
            state === "running"
              ? { running: { startedAt: started } }
              : state === "terminated"
                ? { terminated: { exitCode: 0, startedAt: started, finishedAt: started } }
                : { waiting: { reason: "CrashLoopBackOff" } },
        },
      ],
    },
  };
}

describe("informer transforms of pods and nodes", () => {
  test("a pod keeps metadata, node, volumes, phase and container states; containers and the rest go", () => {
    const full = kubeletPod("Running", "running");
    const kept = podForVolumes(structuredClone(full));
    assert.deepEqual(kept, {
      kind: "Pod",
      apiVersion: "v1",
      metadata: full.metadata,
      spec: { containers: [], nodeName: "n1", volumes: full.spec!.volumes },
      status: {
        phase: "Running",
        containerStatuses: [{ name: "app", state: { running: { startedAt: started } } }],
      },
    });
  });

  test("the loops decide the same on a kept pod as on the whole pod", () => {
    const claim = { metadata: { name: "data-web-0", namespace: "ns" } };
    const ephemeral = {
      metadata: {
        name: "web-0-scratch",
        namespace: "ns",
        ownerReferences: [
          { apiVersion: "v1", kind: "Pod", name: "web-0", uid: "uid-web-0", controller: true },
        ],
      },
    };
    for (const phase of ["Pending", "Running", "Succeeded", "Failed"]) {
      for (const state of ["running", "terminated", "waiting"] as const) {
        for (const deleting of [false, true]) {
          const full = kubeletPod(phase, state, deleting);
          const kept = podForVolumes(structuredClone(full));
          const what = `${phase} ${state} deleting=${deleting}`;
          assert.equal(isPodTerminated(kept), isPodTerminated(full), what);
          assert.deepEqual(podPVCKeys(kept), podPVCKeys(full), what);
          for (const pvc of [claim, ephemeral]) {
            assert.equal(podUsesPVCForDeletion(kept, pvc), podUsesPVCForDeletion(full, pvc), what);
            assert.equal(podUsesPVCForUnusedSince(kept, pvc), podUsesPVCForUnusedSince(full, pvc), what);
          }
        }
      }
    }
  });

  test("a pod without spec or status stays without", () => {
    assert.deepEqual(podForVolumes({ metadata: { name: "p" } }), { metadata: { name: "p" } });
  });

  test("a node keeps metadata, spec, conditions and its attached and in-use volumes; images and the rest go", () => {
    const node: V1Node = {
      metadata: {
        name: "n1",
        labels: { "topology.kubernetes.io/zone": "a" },
        annotations: { "volumes.kubernetes.io/controller-managed-attach-detach": "true" },
      },
      spec: {
        taints: [{ key: "node.kubernetes.io/out-of-service", effect: "NoExecute" }],
        podCIDR: "10.1.0.0/24",
      },
      status: {
        conditions: [{ type: "Ready", status: "True" }],
        volumesAttached: [{ name: "kubernetes.io/csi/d^h", devicePath: "" }],
        volumesInUse: ["kubernetes.io/csi/d^h"],
        images: [{ names: ["registry.example.com/web:v1"], sizeBytes: 1 }],
        addresses: [{ type: "InternalIP", address: "10.0.0.1" }],
        capacity: { cpu: "8" },
        allocatable: { cpu: "7" },
      },
    };
    assert.deepEqual(nodeForVolumes(structuredClone(node)), {
      metadata: node.metadata,
      spec: node.spec,
      status: {
        conditions: node.status!.conditions,
        volumesAttached: node.status!.volumesAttached,
        volumesInUse: node.status!.volumesInUse,
      },
    });
    assert.deepEqual(nodeForVolumes({ metadata: { name: "n2" } }), { metadata: { name: "n2" } });
  });
});
