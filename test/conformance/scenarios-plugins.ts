import type { Scenario } from "./runner.js";
import { node, pv, pvc } from "./scenarios.js";

/*
 * The in-tree plugins kube-controller-manager registers besides CSI and hostPath (issue 11): iSCSI and
 * FC attached with no-op attachers so that the kubelet finds them in volumesAttached, and the NFS
 * recycler.
 */

const ISCSI = { targetPortal: "10.0.0.1:3260", iqn: "iqn.2001-04.com.example:storage.disk1", lun: 0 };
const FC = { targetWWNs: ["500a0981891b8dc5", "500a0981991b8dc5"], lun: 1 };

/** A PV of the given source, pre-bound to claim-<name>, and the claim. */
function pair(name: string, source: object, modes = ["ReadWriteOnce"], reclaim = "Retain") {
  const volume = pv(`pv-${name}`, { claim: `claim-${name}`, modes, reclaim });
  const spec = { ...(volume.spec as Record<string, unknown>), ...source };
  delete spec.hostPath;
  return [{ ...volume, spec }, pvc(`claim-${name}`, { modes, volume: `pv-${name}` })];
}

function podWith(name: string, nodeName: string, volumes: object[]) {
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name },
    spec: { nodeName, containers: [{ name: "c", image: "registry.k8s.io/pause:3.10" }], volumes },
  };
}

const claimVolume = (claim: string) => ({ name: claim, persistentVolumeClaim: { claimName: claim } });

const readyNodes = (...names: string[]) => [
  { create: names.map(node) },
  ...names.map((n) => ({ kubelet: { node: n, ready: true } })),
];

export const PLUGIN_SCENARIOS: Scenario[] = [
  {
    name: "flexvolume: a driver whose init fails once is loaded on a later probe and attaches",
    steps: [
      ...readyNodes("node-1"),
      { flexDriver: { directory: "kvc~flaky", mode: "initfailonce" } },
      { settle: true },
      // Any pod volume makes upstream probe its plugins: the first probe's init fails, the next succeeds.
      { create: [podWith("probe-1", "node-1", [{ name: "scratch", emptyDir: {} }])] },
      { settle: true },
      { create: [podWith("probe-2", "node-1", [{ name: "scratch", emptyDir: {} }])] },
      { settle: true },
      {
        create: [
          podWith("pod-1", "node-1", [
            { name: "flex", flexVolume: { driver: "kvc/flaky", options: { volumeID: "vol-1" } } },
          ]),
        ],
      },
    ],
  },
  {
    name: "flexvolume: a failing attach is retried past its backoff and attaches once the driver recovers",
    thirdParty:
      "the test breaks the driver and then fixes it: the shadow, which never runs a driver's attach, cannot see it fail",
    // The attach fails (only the attach: a driver failing getvolumename would leave the volume out of
    // the desired state altogether) and backs off (500 ms doubling); the driver, fixed, is found by
    // the next retry once the backoff expires: the test waits for the node to list the volume.
    steps: [
      ...readyNodes("node-1"),
      { flexDriver: { directory: "kvc~broken", mode: "attachfail" } },
      { settle: true },
      {
        create: [
          podWith("pod-1", "node-1", [
            { name: "flex", flexVolume: { driver: "kvc/broken", options: { volumeID: "vol-1" } } },
          ]),
        ],
      },
      { checkpoint: "failing" },
      { flexDriver: { directory: "kvc~broken", mode: "ok" } },
      { reported: { node: "node-1", withinMs: 150_000 } },
    ],
  },
  {
    name: "iscsi: a pod's iSCSI PV and inline iSCSI volume are reported attached",
    steps: [
      ...readyNodes("node-1"),
      { create: pair("iscsi", { iscsi: ISCSI }) },
      { settle: true },
      {
        create: [
          podWith("pod-1", "node-1", [
            claimVolume("claim-iscsi"),
            { name: "inline", iscsi: { ...ISCSI, lun: 7 } },
          ]),
        ],
      },
    ],
  },
  {
    name: "iscsi: an RWO volume wanted on a second node waits for detach (Multi-Attach)",
    steps: [
      ...readyNodes("node-1", "node-2"),
      { create: pair("iscsi", { iscsi: ISCSI }) },
      { settle: true },
      { create: [podWith("pod-1", "node-1", [claimVolume("claim-iscsi")])] },
      { settle: true },
      { create: [podWith("pod-2", "node-2", [claimVolume("claim-iscsi")])] },
    ],
  },
  {
    name: "fc: a pod's FC PV (WWNs and LUN) and inline FC volume (WWIDs) are reported attached",
    steps: [
      ...readyNodes("node-1"),
      { create: pair("fc", { fc: FC }, ["ReadOnlyMany"]) },
      { settle: true },
      {
        create: [
          podWith("pod-1", "node-1", [
            claimVolume("claim-fc"),
            { name: "inline", fc: { wwids: ["3600508b400105e21"] } },
          ]),
        ],
      },
      // Settled first: which pods an attach names in its events depends on when they arrive.
      { settle: true },
      { create: [podWith("pod-2", "node-1", [claimVolume("claim-fc")])] },
    ],
  },
  {
    name: "nfs: a Released Recycle PV is scrubbed by the recycler pod and becomes Available",
    steps: [
      {
        create: pair("nfs", { nfs: { server: "nas.example.com", path: "/exports/a" } }, undefined, "Recycle"),
      },
      { settle: true },
      { delete: { kind: "PersistentVolumeClaim", name: "claim-nfs" } },
      { podPhase: { name: "recycler-for-pv-nfs", namespace: "default", phase: "Succeeded" } },
    ],
  },
  {
    name: "nfs: a recycler pod that fails marks the PV Failed",
    steps: [
      {
        create: pair("nfs", { nfs: { server: "nas.example.com", path: "/exports/b" } }, undefined, "Recycle"),
      },
      { settle: true },
      { delete: { kind: "PersistentVolumeClaim", name: "claim-nfs" } },
      { podPhase: { name: "recycler-for-pv-nfs", namespace: "default", phase: "Failed" } },
    ],
  },
];
