import type { Scenario, Step } from "./runner.js";
import { csiDriver, node, pod, pv, pvc } from "./scenarios.js";

/*
 * CSI migration (issue 11): in-tree volumes of every plugin upstream migrates, as PVs and as inline pod
 * volumes, on a managed node. At v1.37 every migration is complete, so neither a CSIDriver object nor
 * the CSINode migrated-plugins annotation is needed for attaching; some scenarios create the CSIDriver
 * anyway, as a cluster running the driver has it. Compared: the VolumeAttachments (their names hash
 * the translated handle, driver and node; PV name or inline spec) and the nodes' volumesAttached.
 */

/** Each migrated plugin: its volume source as a PV and as a pod volume, and its CSI driver. */
const PLUGINS: { plugin: string; driver: string; pvSource: object; inlineSource: object }[] = [
  {
    plugin: "awsElasticBlockStore",
    driver: "ebs.csi.aws.com",
    pvSource: { awsElasticBlockStore: { volumeID: "aws://us-east-1a/vol-0a1b2c3d", fsType: "ext4" } },
    inlineSource: { awsElasticBlockStore: { volumeID: "vol-inline1", partition: 1, readOnly: true } },
  },
  {
    plugin: "gcePersistentDisk",
    driver: "pd.csi.storage.gke.io",
    pvSource: { gcePersistentDisk: { pdName: "disk-pv", fsType: "ext4" } },
    inlineSource: { gcePersistentDisk: { pdName: "disk-inline" } },
  },
  {
    plugin: "azureDisk",
    driver: "disk.csi.azure.com",
    pvSource: {
      azureDisk: {
        kind: "Managed",
        diskName: "disk-pv",
        diskURI: "/subscriptions/s/resourceGroups/g/providers/Microsoft.Compute/disks/disk-pv",
      },
    },
    inlineSource: {
      azureDisk: {
        kind: "Managed",
        diskName: "disk-inline",
        diskURI: "/subscriptions/s/resourceGroups/g/providers/Microsoft.Compute/disks/disk-inline",
      },
    },
  },
  {
    plugin: "azureFile",
    driver: "file.csi.azure.com",
    pvSource: { azureFile: { secretName: "azure-storage-account-acct-secret", shareName: "share-pv" } },
    inlineSource: {
      azureFile: { secretName: "azure-storage-account-acct-secret", shareName: "share-inline" },
    },
  },
  {
    plugin: "cinder",
    driver: "cinder.csi.openstack.org",
    pvSource: { cinder: { volumeID: "cinder-pv", fsType: "ext4" } },
    inlineSource: { cinder: { volumeID: "cinder-inline" } },
  },
  {
    plugin: "vsphereVolume",
    driver: "csi.vsphere.vmware.com",
    pvSource: { vsphereVolume: { volumePath: "[ds] pv.vmdk", storagePolicyName: "gold" } },
    inlineSource: { vsphereVolume: { volumePath: "[ds] inline.vmdk", fsType: "ext4" } },
  },
  {
    plugin: "portworxVolume",
    driver: "pxd.portworx.com",
    pvSource: { portworxVolume: { volumeID: "px-pv" } },
    inlineSource: { portworxVolume: { volumeID: "px-inline", readOnly: true } },
  },
];

/** An in-tree PV pre-bound to claim "claim", zoned by label as in-tree provisioners left them. */
function inTreePair(source: object) {
  const volume = pv("pv-intree", { claim: "claim", labels: { "topology.kubernetes.io/zone": "us-east-1a" } });
  const spec = { ...(volume.spec as Record<string, unknown>), ...source };
  delete spec.hostPath; // pv() gives hostPath to every non-CSI PV
  return [{ ...volume, spec }, pvc("claim", { volume: "pv-intree" })];
}

/** A pod with the inline volume `source` (and `claims`). */
function inlinePod(name: string, nodeName: string, source: object, claims: string[] = []) {
  const p = pod(name, nodeName, claims);
  const spec = p.spec as { volumes: object[] };
  return { ...p, spec: { ...spec, volumes: [...spec.volumes, { name: "inline", ...source }] } };
}

const readyNodes = (...names: string[]): Scenario["steps"] => [
  { create: names.map(node) },
  ...names.map((n) => ({ kubelet: { node: n, ready: true } })),
];

/**
 * Handover with in-tree migrated volumes attached (issue 11): KCM attached an EBS PV and an inline GCE
 * PD of one pod on n1, the kubelet has them in use, and n1 has since been shut down (out-of-service
 * taint) with the pod not yet deleted: only the pod's wish keeps the volumes attached, so a successor
 * that does not translate them to CSI (they are then not desired) detaches them at once. Whoever runs
 * next keeps both attached (the handover write log holds no VolumeAttachment or volumesAttached
 * write), then detaches them as KCM does once the pod is gone.
 */
const MIGRATED_ATTACHED: Step[] = [
  ...readyNodes("n1"),
  { create: inTreePair(PLUGINS[0]!.pvSource) },
  { settle: true },
  {
    create: [inlinePod("p1", "n1", PLUGINS[1]!.inlineSource, ["claim"])],
  },
  { attachAll: true },
  {
    kubelet: {
      node: "n1",
      volumesInUse: [
        "kubernetes.io/csi/ebs.csi.aws.com^vol-0a1b2c3d",
        "kubernetes.io/csi/pd.csi.storage.gke.io^projects/UNSPECIFIED/zones/UNSPECIFIED/disks/disk-inline",
      ],
      outOfService: true,
    },
  },
];
const MIGRATED_RELEASED: Step[] = [
  { delete: { kind: "Pod", name: "p1" } },
  { kubelet: { node: "n1", volumesInUse: [] } },
];

export const MIGRATION_SCENARIOS: Scenario[] = [
  ...PLUGINS.flatMap(({ plugin, driver, pvSource, inlineSource }, i): Scenario[] => [
    {
      name: `csi migration: an in-tree ${plugin} PV is attached by its CSI driver, by PV name`,
      steps: [
        ...readyNodes("n1"),
        // Every other plugin's cluster has the driver's CSIDriver object; it changes nothing.
        { create: [...(i % 2 === 0 ? [csiDriver(driver, true)] : []), ...inTreePair(pvSource)] },
        { settle: true },
        { create: [pod("p1", "n1", ["claim"])] },
        { attachAll: true },
      ],
    },
    {
      name: `csi migration: an inline ${plugin} pod volume is attached with its translated spec`,
      steps: [...readyNodes("n1"), { create: [inlinePod("p1", "n1", inlineSource)] }, { attachAll: true }],
    },
  ]),
  {
    name: "csi migration: an attached in-tree EBS volume in use is kept through a restart and a NotReady node",
    steps: [
      ...readyNodes("n1"),
      { create: inTreePair(PLUGINS[0]!.pvSource) },
      { settle: true },
      { create: [pod("p1", "n1", ["claim"])] },
      { attachAll: true },
      { kubelet: { node: "n1", volumesInUse: ["kubernetes.io/csi/ebs.csi.aws.com^vol-0a1b2c3d"] } },
      { restart: true },
      { kubelet: { node: "n1", ready: false } },
    ],
  },
  {
    name: "csi migration: a pod moved to another node: its in-tree EBS volume is detached and attached there",
    steps: [
      ...readyNodes("n1", "n2"),
      { create: inTreePair(PLUGINS[0]!.pvSource) },
      { settle: true },
      { create: [pod("p1", "n1", ["claim"])] },
      { attachAll: true },
      { delete: { kind: "Pod", name: "p1" } },
      { settle: true },
      { create: [pod("p2", "n2", ["claim"])] },
      { attachAll: true },
    ],
  },
  {
    name: "handover KCM→kvc: in-tree migrated volumes attached, then released",
    startOn: "kube-controller-manager",
    steps: [...MIGRATED_ATTACHED, { switchTo: "kvc" }, ...MIGRATED_RELEASED],
  },
  {
    name: "rollback KCM→kvc→KCM: in-tree migrated volumes attached, then released",
    startOn: "kube-controller-manager",
    steps: [
      ...MIGRATED_ATTACHED,
      { switchTo: "kvc" },
      { switchTo: "kube-controller-manager" },
      ...MIGRATED_RELEASED,
    ],
  },
];
