/*
 * Upstream provision_test.go: TestProvisionSync (set 11), TestProvisionMultiSync (set 12) and
 * TestDisablingDynamicProvisioner. Our fake apiserver resets a created PV's status to Pending, as the
 * real one does, so a freshly provisioned PV is Pending after one sync (upstream's fake keeps Bound);
 * the next syncVolume (set 12) makes it Bound.
 */
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import type { V1PersistentVolume } from "@kubernetes/client-node";
import {
  ANN_BETA_STORAGE_PROVISIONER as BetaSP,
  ANN_BIND_COMPLETED as BC,
  ANN_BOUND_BY_CONTROLLER as BbC,
  ANN_DYNAMICALLY_PROVISIONED as PB,
  ANN_MIGRATED_TO,
  ANN_SELECTED_NODE,
  ANN_STORAGE_PROVISIONER as SP,
  FINALIZER_IN_TREE_PV_PROTECTION,
} from "../../src/persistentvolume/annotations.js";
import {
  alreadyExists,
  MOCK_PLUGIN,
  newClaim,
  newVolume,
  runMultisyncTest,
  runSyncTest,
  storageClass,
  withAnnotation,
  withDataSource,
  withFinalizers,
  type BinderTest,
  type Harness,
  type ProvisionCall,
  type ReactorError,
} from "./pv-binder-framework.js";

const class1Parameters = { param1: "value1" };
const class2Parameters = { param2: "value2" };
const immediate = "Immediate";
const waitMode = "WaitForFirstConsumer";
const policy = { reclaimPolicy: "Delete" };
const classes = [
  storageClass("gold", MOCK_PLUGIN, immediate, { parameters: class1Parameters, ...policy }),
  storageClass("silver", MOCK_PLUGIN, immediate, { parameters: class2Parameters, ...policy }),
  storageClass("copper", MOCK_PLUGIN, waitMode, { parameters: class1Parameters, ...policy }),
  storageClass("external", "vendor.com/my-volume", immediate, { parameters: class1Parameters, ...policy }),
  storageClass("external-wait", "vendor.com/my-volume-wait", waitMode, {
    parameters: class1Parameters,
    ...policy,
  }),
  storageClass("unknown-internal", "kubernetes.io/unknown", immediate, {
    parameters: class1Parameters,
    ...policy,
  }),
  storageClass("unsupported-mountoptions", MOCK_PLUGIN, immediate, {
    parameters: class1Parameters,
    mountOptions: ["foo"],
    ...policy,
  }),
  storageClass("csi", "mydriver.csi.k8s.io", immediate, { parameters: class1Parameters, ...policy }),
];

const provision1Error: ProvisionCall = {
  ret: new Error("Mock provisioner error"),
  expectedParameters: class1Parameters,
};
const provision1Success: ProvisionCall = { expectedParameters: class1Parameters };
const provision2Success: ProvisionCall = { expectedParameters: class2Parameters };

const createErrors = (n: number): ReactorError[] =>
  Array.from({ length: n }, (_, i) => ({
    verb: "create",
    resource: "persistentvolumes",
    error: new Error(`Mock creation error${i + 1}`),
  }));

/** The PV a successful in-process provisioning creates, as the apiserver stores it (status Pending). */
const provisioned = (n: string, cls: string, phase = "Pending") =>
  withFinalizers(newVolume(`pvc-uid${n}`, "1Gi", `uid${n}`, `claim${n}`, phase, "Delete", cls, BbC, PB), [
    FINALIZER_IN_TREE_PV_PROTECTION,
  ]);
const withProvisioner = <T extends Parameters<typeof withAnnotation>[0]>(obj: T, provisioner: string) =>
  withAnnotation(withAnnotation(obj, SP, provisioner), BetaSP, provisioner);

const syncTests: BinderTest[] = [
  {
    name: "11-1 - successful provision with storage class 1",
    initialVolumes: [],
    expectedVolumes: [provisioned("11-1", "gold")],
    initialClaims: [newClaim("claim11-1", "uid11-1", "1Gi", "", "Pending", "gold")],
    // Binding is completed in the next syncClaim.
    expectedClaims: [newClaim("claim11-1", "uid11-1", "1Gi", "", "Pending", "gold", SP, BetaSP)],
    expectedEvents: [
      "Normal ProvisioningSucceeded Successfully provisioned volume pvc-uid11-1 using kubernetes.io/mock-volume",
    ],
    plugin: { provision: [provision1Success] },
    test: "syncClaim",
  },
  {
    name: "11-2 - plugin not found",
    initialVolumes: [],
    expectedVolumes: [],
    initialClaims: [newClaim("claim11-2", "uid11-2", "1Gi", "", "Pending", "gold")],
    expectedClaims: [newClaim("claim11-2", "uid11-2", "1Gi", "", "Pending", "gold")],
    expectedEvents: ["Warning ProvisioningFailed no volume plugin matched name: kubernetes.io/mock-volume"],
    test: "syncClaim",
  },
  {
    name: "11-3 - newProvisioner failure",
    initialVolumes: [],
    expectedVolumes: [],
    initialClaims: [newClaim("claim11-3", "uid11-3", "1Gi", "", "Pending", "gold")],
    expectedClaims: [newClaim("claim11-3", "uid11-3", "1Gi", "", "Pending", "gold", SP, BetaSP)],
    expectedEvents: [
      "Warning ProvisioningFailed Failed to create provisioner: Mock plugin error: no provisionCalls configured",
    ],
    plugin: { provision: [] },
    test: "syncClaim",
  },
  {
    name: "11-4 - provision failure",
    initialVolumes: [],
    expectedVolumes: [],
    initialClaims: [newClaim("claim11-4", "uid11-4", "1Gi", "", "Pending", "gold")],
    expectedClaims: [newClaim("claim11-4", "uid11-4", "1Gi", "", "Pending", "gold", SP, BetaSP)],
    expectedEvents: [
      'Warning ProvisioningFailed Failed to provision volume with StorageClass "gold": Mock provisioner error',
    ],
    plugin: { provision: [provision1Error] },
    test: "syncClaim",
  },
  {
    name: "11-6 - provisioning when there is a volume available",
    initialVolumes: [newVolume("volume11-6", "1Gi", "", "", "Available", "Retain", "gold")],
    expectedVolumes: [newVolume("volume11-6", "1Gi", "uid11-6", "claim11-6", "Bound", "Retain", "gold", BbC)],
    initialClaims: [newClaim("claim11-6", "uid11-6", "1Gi", "", "Pending", "gold")],
    expectedClaims: [newClaim("claim11-6", "uid11-6", "1Gi", "volume11-6", "Bound", "gold", BbC, BC)],
    expectedEvents: [],
    plugin: { provision: [provision1Success] },
    test: "syncClaim",
  },
  {
    // A parallel controller provisioned the volume before the operation started.
    name: "11-7 - claim is bound before provisioning",
    initialVolumes: [],
    expectedVolumes: [
      newVolume("pvc-uid11-7", "1Gi", "uid11-7", "claim11-7", "Bound", "Delete", "gold", BbC, PB),
    ],
    initialClaims: [newClaim("claim11-7", "uid11-7", "1Gi", "", "Pending", "gold")],
    expectedClaims: [newClaim("claim11-7", "uid11-7", "1Gi", "", "Pending", "gold", SP, BetaSP)],
    expectedEvents: [],
    plugin: { provision: [] },
    beforeOperation: (h) => {
      h.api.addVolume(
        newVolume("pvc-uid11-7", "1Gi", "uid11-7", "claim11-7", "Bound", "Delete", "gold", BbC, PB),
      );
    },
    test: "syncClaim",
  },
  {
    name: "11-8 - cannot save provisioned volume",
    initialVolumes: [],
    expectedVolumes: [provisioned("11-8", "gold")],
    initialClaims: [newClaim("claim11-8", "uid11-8", "1Gi", "", "Pending", "gold")],
    expectedClaims: [newClaim("claim11-8", "uid11-8", "1Gi", "", "Pending", "gold", SP, BetaSP)],
    expectedEvents: ["Normal ProvisioningSucceeded"],
    errors: createErrors(1),
    plugin: { provision: [provision1Success] },
    test: "syncClaim",
  },
  {
    name: "11-9 - cannot save provisioned volume, delete succeeds",
    initialVolumes: [],
    expectedVolumes: [],
    initialClaims: [newClaim("claim11-9", "uid11-9", "1Gi", "", "Pending", "gold")],
    expectedClaims: [newClaim("claim11-9", "uid11-9", "1Gi", "", "Pending", "gold", SP, BetaSP)],
    expectedEvents: [
      "Warning ProvisioningFailed Error creating provisioned PV object for claim default/claim11-9: Mock creation error5. Deleting the volume.",
    ],
    errors: createErrors(5),
    plugin: { delete: [undefined], provision: [provision1Success] },
    test: "syncClaim",
  },
  {
    name: "11-10 - cannot save provisioned volume, no delete plugin found",
    initialVolumes: [],
    expectedVolumes: [],
    initialClaims: [newClaim("claim11-10", "uid11-10", "1Gi", "", "Pending", "gold")],
    expectedClaims: [newClaim("claim11-10", "uid11-10", "1Gi", "", "Pending", "gold", SP, BetaSP)],
    expectedEvents: [
      "Warning ProvisioningFailed",
      'Warning ProvisioningCleanupFailed Error cleaning provisioned volume for claim default/claim11-10: failed to create deleter for volume "pvc-uid11-10": Mock plugin error: no deleteCalls configured. Please delete manually.',
    ],
    errors: createErrors(5),
    plugin: { provision: [provision1Success] },
    test: "syncClaim",
  },
  {
    name: "11-11 - cannot save provisioned volume, deleter fails",
    initialVolumes: [],
    expectedVolumes: [],
    initialClaims: [newClaim("claim11-11", "uid11-11", "1Gi", "", "Pending", "gold")],
    expectedClaims: [newClaim("claim11-11", "uid11-11", "1Gi", "", "Pending", "gold", SP, BetaSP)],
    expectedEvents: [
      "Warning ProvisioningFailed",
      "Warning ProvisioningCleanupFailed Error cleaning provisioned volume for claim default/claim11-11: Mock deletion error5. Please delete manually.",
    ],
    errors: createErrors(5),
    plugin: {
      delete: [1, 2, 3, 4, 5].map((i) => new Error(`Mock deletion error${i}`)),
      provision: [provision1Success],
    },
    test: "syncClaim",
  },
  {
    name: "11-12 - cannot save provisioned volume, delete succeeds 2nd time",
    initialVolumes: [],
    expectedVolumes: [],
    initialClaims: [newClaim("claim11-12", "uid11-12", "1Gi", "", "Pending", "gold")],
    expectedClaims: [newClaim("claim11-12", "uid11-12", "1Gi", "", "Pending", "gold", SP, BetaSP)],
    expectedEvents: ["Warning ProvisioningFailed"],
    errors: createErrors(5),
    plugin: { delete: [new Error("Mock deletion error1"), undefined], provision: [provision1Success] },
    test: "syncClaim",
  },
  {
    name: "11-13 - successful provision with storage class 2",
    initialVolumes: [],
    expectedVolumes: [provisioned("11-13", "silver")],
    initialClaims: [newClaim("claim11-13", "uid11-13", "1Gi", "", "Pending", "silver")],
    expectedClaims: [newClaim("claim11-13", "uid11-13", "1Gi", "", "Pending", "silver", SP, BetaSP)],
    expectedEvents: ["Normal ProvisioningSucceeded"],
    plugin: { provision: [provision2Success] },
    test: "syncClaim",
  },
  {
    name: "11-14 - fail due to non-existing class",
    initialVolumes: [],
    expectedVolumes: [],
    initialClaims: [newClaim("claim11-14", "uid11-14", "1Gi", "", "Pending", "non-existing")],
    expectedClaims: [newClaim("claim11-14", "uid11-14", "1Gi", "", "Pending", "non-existing")],
    expectedEvents: ['Warning ProvisioningFailed storageclass.storage.k8s.io "non-existing" not found'],
    plugin: { provision: [] },
    test: "syncClaim",
  },
  {
    name: "11-15 - no provisioning with class=''",
    initialVolumes: [],
    expectedVolumes: [],
    initialClaims: [newClaim("claim11-15", "uid11-15", "1Gi", "", "Pending", "")],
    expectedClaims: [newClaim("claim11-15", "uid11-15", "1Gi", "", "Pending", "")],
    expectedEvents: ["Normal FailedBinding"],
    plugin: { provision: [] },
    test: "syncClaim",
  },
  {
    name: "11-16 - no provisioning with class=nil",
    initialVolumes: [],
    expectedVolumes: [],
    initialClaims: [newClaim("claim11-15", "uid11-15", "1Gi", "", "Pending", undefined)],
    expectedClaims: [newClaim("claim11-15", "uid11-15", "1Gi", "", "Pending", undefined)],
    expectedEvents: ["Normal FailedBinding"],
    plugin: { provision: [] },
    test: "syncClaim",
  },
  {
    name: "11-17 - external provisioner",
    initialVolumes: [],
    expectedVolumes: [],
    initialClaims: [newClaim("claim11-17", "uid11-17", "1Gi", "", "Pending", "external")],
    expectedClaims: [
      withProvisioner(
        newClaim("claim11-17", "uid11-17", "1Gi", "", "Pending", "external"),
        "vendor.com/my-volume",
      ),
    ],
    expectedEvents: [
      "Normal ExternalProvisioning Waiting for a volume to be created either by the external provisioner 'vendor.com/my-volume' or manually by the system administrator. If volume creation is delayed, please verify that the provisioner is running and correctly registered.",
    ],
    plugin: { provision: [] },
    test: "syncClaim",
  },
  {
    name: "11-18 - unknown internal provisioner",
    initialVolumes: [],
    expectedVolumes: [],
    initialClaims: [newClaim("claim11-18", "uid11-18", "1Gi", "", "Pending", "unknown-internal")],
    expectedClaims: [newClaim("claim11-18", "uid11-18", "1Gi", "", "Pending", "unknown-internal")],
    expectedEvents: ["Warning ProvisioningFailed no volume plugin matched name: kubernetes.io/unknown"],
    plugin: { provision: [] },
    test: "syncClaim",
  },
  {
    // The first create was saved but its answer lost; the retry's AlreadyExists is success. The mock
    // has no deleter: a cleanup attempt would show as ProvisioningCleanupFailed.
    name: "11-19 - provisioned volume saved but API server crashed",
    initialVolumes: [],
    // The fake does not save on its injected errors, so no PV results here.
    expectedVolumes: [],
    initialClaims: [newClaim("claim11-19", "uid11-19", "1Gi", "", "Pending", "gold")],
    expectedClaims: [newClaim("claim11-19", "uid11-19", "1Gi", "", "Pending", "gold", SP, BetaSP)],
    expectedEvents: ["Normal ProvisioningSucceeded"],
    errors: [
      { verb: "create", resource: "persistentvolumes", error: new Error("Mock creation error1") },
      { verb: "create", resource: "persistentvolumes", error: alreadyExists("") },
    ],
    plugin: { provision: [provision1Success] },
    test: "syncClaim",
  },
  {
    name: "11-20 - unsupported storageClass.mountOptions",
    initialVolumes: [],
    expectedVolumes: [],
    initialClaims: [newClaim("claim11-20", "uid11-20", "1Gi", "", "Pending", "unsupported-mountoptions")],
    expectedClaims: [
      newClaim("claim11-20", "uid11-20", "1Gi", "", "Pending", "unsupported-mountoptions", SP, BetaSP),
    ],
    expectedEvents: [
      'Warning ProvisioningFailed Mount options are not supported by the provisioner but StorageClass "unsupported-mountoptions" has mount options [foo]',
    ],
    plugin: { provision: [] },
    test: "syncClaim",
  },
  {
    name: "11-21 - external provisioner for CSI migration",
    initialVolumes: [],
    expectedVolumes: [],
    initialClaims: [newClaim("claim11-21", "uid11-21", "1Gi", "", "Pending", "gold")],
    expectedClaims: [
      withAnnotation(
        withProvisioner(
          newClaim("claim11-21", "uid11-21", "1Gi", "", "Pending", "gold"),
          "vendor.com/MockCSIDriver",
        ),
        ANN_MIGRATED_TO,
        "vendor.com/MockCSIDriver",
      ),
    ],
    expectedEvents: [
      "Normal ExternalProvisioning Waiting for a volume to be created either by the external provisioner 'vendor.com/MockCSIDriver'",
    ],
    plugin: {},
    migration: { migratedDriver: () => "vendor.com/MockCSIDriver" },
    test: "syncClaim",
  },
  {
    // A volume is available: no ExternalProvisioning event.
    name: "11-22 - external provisioner with volume available",
    initialVolumes: [newVolume("volume11-22", "1Gi", "", "", "Available", "Retain", "external")],
    expectedVolumes: [
      newVolume("volume11-22", "1Gi", "uid11-22", "claim11-22", "Bound", "Retain", "external", BbC),
    ],
    initialClaims: [newClaim("claim11-22", "uid11-22", "1Gi", "", "Pending", "external")],
    expectedClaims: [newClaim("claim11-22", "uid11-22", "1Gi", "volume11-22", "Bound", "external", BbC, BC)],
    expectedEvents: [],
    plugin: { provision: [] },
    test: "syncClaim",
  },
  {
    name: "11-23 - skip finding PV and provision for PVC annotated with AnnSelectedNode",
    initialVolumes: [newVolume("volume11-23", "1Gi", "", "", "Available", "Delete", "copper")],
    expectedVolumes: [
      // No finalizer is added to it: only syncVolume would.
      newVolume("volume11-23", "1Gi", "", "", "Available", "Delete", "copper"),
      provisioned("11-23", "copper"),
    ],
    initialClaims: [
      withAnnotation(
        newClaim("claim11-23", "uid11-23", "1Gi", "", "Pending", "copper"),
        ANN_SELECTED_NODE,
        "node1",
      ),
    ],
    expectedClaims: [
      withAnnotation(
        newClaim("claim11-23", "uid11-23", "1Gi", "", "Pending", "copper", SP, BetaSP),
        ANN_SELECTED_NODE,
        "node1",
      ),
    ],
    expectedEvents: ["Normal ProvisioningSucceeded"],
    plugin: { provision: [provision1Success] },
    beforeOperation: (h) => {
      h.nodes.push({ metadata: { name: "node1" } });
    },
    test: "syncClaim",
  },
  {
    name: "11-24 - skip finding PV and wait external provisioner for PVC annotated with AnnSelectedNode",
    initialVolumes: [newVolume("volume11-24", "1Gi", "", "", "Available", "Delete", "external-wait")],
    expectedVolumes: [newVolume("volume11-24", "1Gi", "", "", "Available", "Delete", "external-wait")],
    initialClaims: [
      withAnnotation(
        newClaim("claim11-24", "uid11-24", "1Gi", "", "Pending", "external-wait"),
        ANN_SELECTED_NODE,
        "node1",
      ),
    ],
    expectedClaims: [
      withProvisioner(
        withAnnotation(
          newClaim("claim11-24", "uid11-24", "1Gi", "", "Pending", "external-wait"),
          ANN_SELECTED_NODE,
          "node1",
        ),
        "vendor.com/my-volume-wait",
      ),
    ],
    expectedEvents: ["Normal ExternalProvisioning"],
    test: "syncClaim",
  },
  {
    // Upstream registers no plugin here, so its event is "plugin not found"; with the plugin, the
    // dataSource check is what fails, before the claim is annotated.
    name: "11-25 - failed in-tree provision with data source",
    initialVolumes: [],
    expectedVolumes: [],
    initialClaims: [withDataSource(newClaim("claim11-25", "uid11-25", "1Gi", "", "Pending", "gold"))],
    expectedClaims: [withDataSource(newClaim("claim11-25", "uid11-25", "1Gi", "", "Pending", "gold"))],
    expectedEvents: [
      'Warning ProvisioningFailed plugin "kubernetes.io/mock-volume" is not a CSI plugin. Only CSI plugin can provision a claim with a datasource',
    ],
    plugin: { provision: [provision1Success] },
    test: "syncClaim",
  },
  {
    name: "11-26 - csi with data source",
    initialVolumes: [],
    expectedVolumes: [],
    initialClaims: [
      withAnnotation(
        withDataSource(newClaim("claim11-26", "uid11-26", "1Gi", "", "Pending", "csi")),
        SP,
        "mydriver.csi.k8s.io",
      ),
    ],
    expectedClaims: [
      withAnnotation(
        withDataSource(newClaim("claim11-26", "uid11-26", "1Gi", "", "Pending", "csi")),
        SP,
        "mydriver.csi.k8s.io",
      ),
    ],
    expectedEvents: ["Normal ExternalProvisioning"],
    plugin: { provision: [] },
    test: "syncClaim",
  },
];

/** Injects `volume` into the cache and the API the second time the claim's provisioning is scheduled. */
function onSecondProvisioning(volume: () => V1PersistentVolume): (h: Harness) => void {
  let calls = 0;
  return (h) => {
    // Upstream waits for the first operation's start timestamp; the second scheduling is the first
    // point after it.
    if (++calls !== 2) return;
    const pv = volume();
    h.ctrl.initializeCaches([pv], []);
    h.api.addVolume(pv);
  };
}

const multisyncTests: BinderTest[] = [
  {
    name: "12-1 - successful provision",
    initialVolumes: [],
    expectedVolumes: [provisioned("12-1", "gold", "Bound")],
    initialClaims: [newClaim("claim12-1", "uid12-1", "1Gi", "", "Pending", "gold")],
    expectedClaims: [
      newClaim("claim12-1", "uid12-1", "1Gi", "pvc-uid12-1", "Bound", "gold", BbC, BC, SP, BetaSP),
    ],
    expectedEvents: ["Normal ProvisioningSucceeded"],
    plugin: { provision: [provision1Success] },
    test: "syncClaim",
  },
  {
    // The external provisioner creates an unbound volume while the controller waits.
    name: "12-2 - external provisioner with volume provisioned success",
    initialVolumes: [],
    expectedVolumes: [
      newVolume("pvc-uid12-2", "1Gi", "uid12-2", "claim12-2", "Bound", "Retain", "external", BbC),
    ],
    initialClaims: [newClaim("claim12-2", "uid12-2", "1Gi", "", "Pending", "external")],
    expectedClaims: [
      withProvisioner(
        newClaim("claim12-2", "uid12-2", "1Gi", "pvc-uid12-2", "Bound", "external", BbC, BC),
        "vendor.com/my-volume",
      ),
    ],
    // One per scheduled operation: the first sync's and the one that sees the volume appear.
    expectedEvents: ["Normal ExternalProvisioning", "Normal ExternalProvisioning"],
    plugin: { provision: [] },
    beforeOperation: onSecondProvisioning(() =>
      newVolume("pvc-uid12-2", "1Gi", "", "", "Available", "Retain", "external"),
    ),
    test: "syncClaim",
  },
  {
    name: "12-3 - external provisioner with volume to be provisioned",
    initialVolumes: [],
    expectedVolumes: [],
    initialClaims: [newClaim("claim12-3", "uid12-3", "1Gi", "", "Pending", "external")],
    expectedClaims: [
      withProvisioner(
        newClaim("claim12-3", "uid12-3", "1Gi", "", "Pending", "external"),
        "vendor.com/my-volume",
      ),
    ],
    // Every sync of the waiting claim repeats it (the event correlator aggregates them in a cluster).
    expectedEvents: [
      "Normal ExternalProvisioning",
      "Normal ExternalProvisioning",
      "Normal ExternalProvisioning",
    ],
    plugin: { provision: [provision1Success] },
    test: "syncClaim",
  },
  {
    // The external provisioner creates a volume pre-bound to the claim.
    name: "12-4 - external provisioner with volume provisioned/bound success",
    initialVolumes: [],
    expectedVolumes: [
      newVolume("pvc-uid12-4", "1Gi", "uid12-4", "claim12-4", "Bound", "Retain", "external", BbC),
    ],
    initialClaims: [newClaim("claim12-4", "uid12-4", "1Gi", "", "Pending", "external")],
    expectedClaims: [
      withProvisioner(
        newClaim("claim12-4", "uid12-4", "1Gi", "pvc-uid12-4", "Bound", "external", BbC, BC),
        "vendor.com/my-volume",
      ),
    ],
    expectedEvents: ["Normal ExternalProvisioning", "Normal ExternalProvisioning"],
    plugin: { provision: [] },
    beforeOperation: onSecondProvisioning(() =>
      newVolume("pvc-uid12-4", "1Gi", "uid12-4", "claim12-4", "Bound", "Retain", "external", BbC),
    ),
    test: "syncClaim",
  },
];

describe("PV binder: TestProvisionSync (set 11)", () => {
  for (const t of syncTests) test(t.name, () => runSyncTest(t, { classes }).then(() => undefined));
});

describe("PV binder: TestProvisionMultiSync (set 12)", () => {
  for (const t of multisyncTests) test(t.name, () => runMultisyncTest(t, { classes }).then(() => undefined));
});

test("PV binder: TestDisablingDynamicProvisioner - nothing is provisioned", async () => {
  await runSyncTest(
    {
      name: "disabled",
      initialVolumes: [],
      expectedVolumes: [],
      initialClaims: [newClaim("claim-d", "uid-d", "1Gi", "", "Pending", "gold")],
      expectedClaims: [newClaim("claim-d", "uid-d", "1Gi", "", "Pending", "gold")],
      expectedEvents: [],
      plugin: { provision: [provision1Success] },
      test: "syncClaim",
    },
    { classes, enableDynamicProvisioning: false },
  );
});

test("PV binder: a shutdown while the PV create is retried ends the operation without a cleanup", async () => {
  let creates = 0;
  await runSyncTest(
    {
      name: "shutdown during create retries",
      initialVolumes: [],
      expectedVolumes: [],
      initialClaims: [newClaim("claim-s", "uid-s", "1Gi", "", "Pending", "gold")],
      expectedClaims: [newClaim("claim-s", "uid-s", "1Gi", "", "Pending", "gold", SP, BetaSP)],
      // No "Deleting the volume" or cleanup events (a deleter call would add ProvisioningCleanupFailed).
      expectedEvents: [],
      errors: createErrors(5),
      plugin: { provision: [provision1Success] },
      test: async (h) => {
        const create = h.api.createVolume.bind(h.api);
        h.api.createVolume = (volume) => {
          creates++;
          return create(volume);
        };
        await h.ctrl.syncClaim(structuredClone(h.test.initialClaims[0]!));
        await h.ctrl.shutdown();
      },
    },
    { classes },
  );
  assert.equal(creates, 1, "the wait after the first failed create ends at the shutdown");
});

describe("PV binder in shadow mode: provisioning", () => {
  // KCM provisioned the claim's volume; kvc syncs the claim's version from before (UnsyncedVersions).
  const kcms = { ...provisioned("11-s", "gold", "Bound") };
  kcms.metadata = { ...kcms.metadata, resourceVersion: "5" };
  test("a claim not yet handed to a provisioner is provisioned, not bound to KCM's volume", () =>
    runSyncTest(
      {
        name: "shadow: KCM's provisioned volume is newer than the claim",
        initialVolumes: [kcms],
        // The create meets KCM's volume (AlreadyExists): reused, as upstream does.
        expectedVolumes: [kcms],
        initialClaims: [newClaim("claim11-s", "uid11-s", "1Gi", "", "Pending", "gold")],
        expectedClaims: [newClaim("claim11-s", "uid11-s", "1Gi", "", "Pending", "gold", SP, BetaSP)],
        expectedEvents: [
          "Normal ProvisioningSucceeded Successfully provisioned volume pvc-uid11-s using kubernetes.io/mock-volume",
        ],
        plugin: { provision: [provision1Success] },
        test: "syncClaim",
      },
      { classes, shadow: true },
    ).then(() => undefined));
  test("a volume last written before the claim's version is bound as it is", () => {
    const restored = { ...kcms, metadata: { ...kcms.metadata, resourceVersion: "1" } };
    const claim = newClaim("claim11-s", "uid11-s", "1Gi", "", "Pending", "gold");
    claim.metadata = { ...claim.metadata, resourceVersion: "2" };
    return runSyncTest(
      {
        name: "shadow: a provisioned volume older than the claim's version",
        initialVolumes: [restored],
        expectedVolumes: [{ ...restored, metadata: { ...restored.metadata, resourceVersion: "1" } }],
        initialClaims: [claim],
        expectedClaims: [
          withAnnotation(
            withAnnotation(
              newClaim("claim11-s", "uid11-s", "1Gi", "pvc-uid11-s", "Bound", "gold"),
              BbC,
              "yes",
            ),
            BC,
            "yes",
          ),
        ],
        expectedEvents: [],
        test: "syncClaim",
      },
      { classes, shadow: true },
    ).then(() => undefined);
  });
});
