/*
 * Upstream delete_test.go (TestDeleteSync set 8, TestDeleteMultiSync set 9) and recycle_test.go
 * (TestRecycleSync set 6, TestRecycleMultiSync set 7). Where upstream expects no events without
 * checking, the events its code emits (e.g. Normal VolumeRecycled) are listed.
 */
import { describe, test } from "node:test";
import {
  ANN_BOUND_BY_CONTROLLER as BbC,
  ANN_DYNAMICALLY_PROVISIONED as PB,
  ANN_MIGRATED_TO,
  FINALIZER_IN_TREE_PV_PROTECTION,
} from "../../src/persistentvolume/annotations.js";
import {
  newClaim,
  newExternalVolume,
  newVolume,
  pod,
  runMultisyncTest,
  runSyncTest,
  withAnnotation,
  withDeletionTimestamp,
  withFinalizers,
  withMessage,
  type BinderTest,
  type Harness,
} from "./pv-binder-framework.js";

const gceDriver = "pd.csi.storage.gke.io";

/** Changes a stored volume behind the controller's back, as another writer would. */
function tamper(
  h: Harness,
  name: string,
  change: (volume: NonNullable<ReturnType<Harness["api"]["volumes"]["get"]>>) => void,
) {
  const volume = h.api.volumes.get(name);
  if (volume) change(volume);
}

const deleteTests: BinderTest[] = [
  {
    name: "8-1 - successful delete",
    initialVolumes: [newVolume("volume8-1", "1Gi", "uid8-1", "claim8-1", "Bound", "Delete", "", BbC)],
    expectedVolumes: [],
    initialClaims: [],
    expectedClaims: [],
    expectedEvents: [],
    plugin: { delete: [undefined] },
    test: "syncVolume",
  },
  {
    name: "8-2 - successful delete with prebound volume",
    initialVolumes: [newVolume("volume8-2", "1Gi", "uid8-2", "claim8-2", "Bound", "Delete", "")],
    expectedVolumes: [],
    initialClaims: [],
    expectedClaims: [],
    expectedEvents: [],
    plugin: { delete: [undefined] },
    test: "syncVolume",
  },
  {
    name: "8-3 - plugin not found",
    initialVolumes: [newVolume("volume8-3", "1Gi", "uid8-3", "claim8-3", "Bound", "Delete", "")],
    expectedVolumes: [
      withMessage(
        newVolume("volume8-3", "1Gi", "uid8-3", "claim8-3", "Failed", "Delete", ""),
        'error getting deleter volume plugin for volume "volume8-3": no volume plugin matched',
      ),
    ],
    initialClaims: [],
    expectedClaims: [],
    expectedEvents: [
      'Warning VolumeFailedDelete error getting deleter volume plugin for volume "volume8-3": no volume plugin matched',
    ],
    test: "syncVolume",
  },
  {
    name: "8-4 - newDeleter returns error",
    initialVolumes: [newVolume("volume8-4", "1Gi", "uid8-4", "claim8-4", "Bound", "Delete", "")],
    expectedVolumes: [
      withMessage(
        newVolume("volume8-4", "1Gi", "uid8-4", "claim8-4", "Failed", "Delete", ""),
        'failed to create deleter for volume "volume8-4": Mock plugin error: no deleteCalls configured',
      ),
    ],
    initialClaims: [],
    expectedClaims: [],
    expectedEvents: ["Warning VolumeFailedDelete"],
    plugin: { delete: [] },
    test: "syncVolume",
  },
  {
    name: "8-5 - delete returns error",
    initialVolumes: [newVolume("volume8-5", "1Gi", "uid8-5", "claim8-5", "Bound", "Delete", "")],
    expectedVolumes: [
      withMessage(
        newVolume("volume8-5", "1Gi", "uid8-5", "claim8-5", "Failed", "Delete", ""),
        "Mock delete error",
      ),
    ],
    initialClaims: [],
    expectedClaims: [],
    expectedEvents: ["Warning VolumeFailedDelete Mock delete error"],
    plugin: { delete: [new Error("Mock delete error")] },
    test: "syncVolume",
  },
  {
    name: "8-6 - volume is deleted before deleting",
    initialVolumes: [newVolume("volume8-6", "1Gi", "uid8-6", "claim8-6", "Bound", "Delete", "")],
    expectedVolumes: [],
    initialClaims: [],
    expectedClaims: [],
    expectedEvents: [],
    plugin: { delete: [] },
    beforeOperation: (h) => h.api.volumes.delete("volume8-6"),
    test: "syncVolume",
  },
  {
    // The claim is resurrected and bound to the volume before the operation starts ("should never happen").
    name: "8-7 - volume is bound before deleting",
    initialVolumes: [newVolume("volume8-7", "1Gi", "uid8-7", "claim8-7", "Bound", "Delete", "", BbC)],
    expectedVolumes: [newVolume("volume8-7", "1Gi", "uid8-7", "claim8-7", "Bound", "Delete", "", BbC)],
    initialClaims: [],
    expectedClaims: [newClaim("claim8-7", "uid8-7", "10Gi", "volume8-7", "Bound", undefined)],
    expectedEvents: [],
    plugin: { delete: [] },
    beforeOperation: (h) => {
      const claim = newClaim("claim8-7", "uid8-7", "10Gi", "volume8-7", "Bound", undefined);
      h.api.addClaim(claim);
      tamper(h, "volume8-7", (v) => (v.status!.phase = "Bound"));
      h.ctrl.initializeCaches([], [claim]);
    },
    test: "syncVolume",
  },
  {
    name: "8-9 - prebound volume is deleted while the claim exists",
    initialVolumes: [newVolume("volume8-9", "1Gi", "uid8-9", "claim8-9", "Bound", "Delete", "")],
    expectedVolumes: [],
    initialClaims: [newClaim("claim8-9", "uid8-9-x", "10Gi", "", "Pending", undefined)],
    expectedClaims: [newClaim("claim8-9", "uid8-9-x", "10Gi", "", "Pending", undefined)],
    expectedEvents: [],
    plugin: { delete: [undefined] },
    test: "syncVolume",
  },
  {
    name: "8-10-1 - external deleter when volume is dynamic provisioning",
    initialVolumes: [
      withAnnotation(
        newExternalVolume(
          "volume8-10-1",
          "1Gi",
          "uid10-1-1",
          "claim10-1-1",
          "Bound",
          "Delete",
          "",
          gceDriver,
          BbC,
        ),
        PB,
        "external.io/test",
      ),
    ],
    expectedVolumes: [
      withAnnotation(
        newExternalVolume(
          "volume8-10-1",
          "1Gi",
          "uid10-1-1",
          "claim10-1-1",
          "Released",
          "Delete",
          "",
          gceDriver,
          BbC,
        ),
        PB,
        "external.io/test",
      ),
    ],
    initialClaims: [],
    expectedClaims: [],
    expectedEvents: [],
    test: "syncVolume",
  },
  {
    name: "8-10-2 - external deleter when volume is static provisioning",
    initialVolumes: [
      newExternalVolume(
        "volume8-10-2",
        "1Gi",
        "uid10-1-2",
        "claim10-1-2",
        "Bound",
        "Delete",
        "",
        gceDriver,
        BbC,
      ),
    ],
    expectedVolumes: [
      newExternalVolume(
        "volume8-10-2",
        "1Gi",
        "uid10-1-2",
        "claim10-1-2",
        "Released",
        "Delete",
        "",
        gceDriver,
        BbC,
      ),
    ],
    initialClaims: [],
    expectedClaims: [],
    expectedEvents: [],
    test: "syncVolume",
  },
  {
    name: "8-10-3 - external deleter when volume is migrated",
    initialVolumes: [
      withAnnotation(
        withAnnotation(
          newVolume("volume8-10-3", "1Gi", "uid10-1-3", "claim10-1-3", "Bound", "Delete", "", PB),
          PB,
          "kubernetes.io/gce-pd",
        ),
        ANN_MIGRATED_TO,
        gceDriver,
      ),
    ],
    expectedVolumes: [
      withAnnotation(
        withAnnotation(
          newVolume("volume8-10-3", "1Gi", "uid10-1-3", "claim10-1-3", "Released", "Delete", "", PB),
          PB,
          "kubernetes.io/gce-pd",
        ),
        ANN_MIGRATED_TO,
        gceDriver,
      ),
    ],
    initialClaims: [],
    expectedClaims: [],
    expectedEvents: [],
    test: "syncVolume",
  },
  {
    // The claim is bound to volume8-11-2: volume8-11-1 lost the race and is deleted.
    name: "8-11 - two PVs provisioned for a single claim",
    initialVolumes: [
      newVolume("volume8-11-1", "1Gi", "uid8-11", "claim8-11", "Bound", "Delete", "", PB),
      newVolume("volume8-11-2", "1Gi", "uid8-11", "claim8-11", "Bound", "Delete", "", PB),
    ],
    expectedVolumes: [newVolume("volume8-11-2", "1Gi", "uid8-11", "claim8-11", "Bound", "Delete", "", PB)],
    initialClaims: [newClaim("claim8-11", "uid8-11", "10Gi", "volume8-11-2", "Bound", undefined)],
    expectedClaims: [newClaim("claim8-11", "uid8-11", "10Gi", "volume8-11-2", "Bound", undefined)],
    expectedEvents: [],
    plugin: { delete: [undefined] },
    test: "syncVolume",
  },
  {
    // The claim is bound to volume8-12-2: volume8-12-1 is Released for its external deleter.
    name: "8-12 - two PVs externally provisioned for a single claim",
    initialVolumes: [
      withAnnotation(
        newExternalVolume(
          "volume8-12-1",
          "1Gi",
          "uid8-12",
          "claim8-12",
          "Bound",
          "Delete",
          "",
          gceDriver,
          PB,
        ),
        PB,
        "external.io/test",
      ),
      newExternalVolume("volume8-12-2", "1Gi", "uid8-12", "claim8-12", "Bound", "Delete", "", gceDriver, PB),
    ],
    expectedVolumes: [
      withAnnotation(
        newExternalVolume(
          "volume8-12-1",
          "1Gi",
          "uid8-12",
          "claim8-12",
          "Released",
          "Delete",
          "",
          gceDriver,
          PB,
        ),
        PB,
        "external.io/test",
      ),
      newExternalVolume("volume8-12-2", "1Gi", "uid8-12", "claim8-12", "Bound", "Delete", "", gceDriver, PB),
    ],
    initialClaims: [newClaim("claim8-12", "uid8-12", "10Gi", "volume8-12-2", "Bound", undefined)],
    expectedClaims: [newClaim("claim8-12", "uid8-12", "10Gi", "volume8-12-2", "Bound", undefined)],
    expectedEvents: [],
    test: "syncVolume",
  },
  {
    name: "8-13 - volume has deletion timestamp and processed",
    initialVolumes: [
      withFinalizers(
        withDeletionTimestamp(
          newVolume("volume8-13", "1Gi", "uid8-13", "claim8-13", "Bound", "Delete", "", BbC),
        ),
        [FINALIZER_IN_TREE_PV_PROTECTION],
      ),
    ],
    expectedVolumes: [],
    initialClaims: [],
    expectedClaims: [],
    expectedEvents: [],
    plugin: { delete: [undefined] },
    test: "syncVolume",
  },
];

const deleteMultisyncTests: BinderTest[] = [
  {
    name: "9-1 - delete returns error",
    initialVolumes: [
      withFinalizers(newVolume("volume9-1", "1Gi", "uid9-1", "claim9-1", "Bound", "Delete", ""), [
        FINALIZER_IN_TREE_PV_PROTECTION,
      ]),
    ],
    expectedVolumes: [],
    initialClaims: [],
    expectedClaims: [],
    expectedEvents: ["Warning VolumeFailedDelete Mock delete error"],
    plugin: { delete: [new Error("Mock delete error"), undefined] },
    test: "syncVolume",
  },
];

const pods = [
  pod("runningPod", "runningClaim", "Running"),
  pod("pendingPod", "pendingClaim", "Pending"),
  pod("completedPod", "completedClaim", "Succeeded"),
];
const recycled = "Normal VolumeRecycled Volume recycled";

const recycleTests: BinderTest[] = [
  {
    name: "6-1 - successful recycle",
    initialVolumes: [newVolume("volume6-1", "1Gi", "uid6-1", "claim6-1", "Bound", "Recycle", "", BbC)],
    expectedVolumes: [newVolume("volume6-1", "1Gi", "", "", "Available", "Recycle", "")],
    initialClaims: [],
    expectedClaims: [],
    expectedEvents: [recycled],
    plugin: { recycle: [undefined] },
    test: "syncVolume",
  },
  {
    name: "6-2 - successful recycle with prebound volume",
    initialVolumes: [newVolume("volume6-2", "1Gi", "uid6-2", "claim6-2", "Bound", "Recycle", "")],
    expectedVolumes: [newVolume("volume6-2", "1Gi", "", "claim6-2", "Available", "Recycle", "")],
    initialClaims: [],
    expectedClaims: [],
    expectedEvents: [recycled],
    plugin: { recycle: [undefined] },
    test: "syncVolume",
  },
  {
    name: "6-3 - plugin not found",
    initialVolumes: [newVolume("volume6-3", "1Gi", "uid6-3", "claim6-3", "Bound", "Recycle", "")],
    expectedVolumes: [
      withMessage(
        newVolume("volume6-3", "1Gi", "uid6-3", "claim6-3", "Failed", "Recycle", ""),
        "No recycler plugin found for the volume!",
      ),
    ],
    initialClaims: [],
    expectedClaims: [],
    expectedEvents: ["Warning VolumeFailedRecycle No recycler plugin found for the volume!"],
    test: "syncVolume",
  },
  {
    name: "6-4 - newRecycler returns error",
    initialVolumes: [newVolume("volume6-4", "1Gi", "uid6-4", "claim6-4", "Bound", "Recycle", "")],
    expectedVolumes: [
      withMessage(
        newVolume("volume6-4", "1Gi", "uid6-4", "claim6-4", "Failed", "Recycle", ""),
        "Recycle failed: Mock plugin error: no recycleCalls configured",
      ),
    ],
    initialClaims: [],
    expectedClaims: [],
    expectedEvents: [
      "Warning VolumeFailedRecycle Recycle failed: Mock plugin error: no recycleCalls configured",
    ],
    plugin: { recycle: [] },
    test: "syncVolume",
  },
  {
    name: "6-5 - recycle returns error",
    initialVolumes: [newVolume("volume6-5", "1Gi", "uid6-5", "claim6-5", "Bound", "Recycle", "")],
    expectedVolumes: [
      withMessage(
        newVolume("volume6-5", "1Gi", "uid6-5", "claim6-5", "Failed", "Recycle", ""),
        "Recycle failed: Mock recycle error",
      ),
    ],
    initialClaims: [],
    expectedClaims: [],
    expectedEvents: ["Warning VolumeFailedRecycle Recycle failed: Mock recycle error"],
    plugin: { recycle: [new Error("Mock recycle error")] },
    test: "syncVolume",
  },
  {
    name: "6-6 - volume is deleted before recycling",
    initialVolumes: [newVolume("volume6-6", "1Gi", "uid6-6", "claim6-6", "Bound", "Recycle", "")],
    expectedVolumes: [],
    initialClaims: [],
    expectedClaims: [],
    expectedEvents: [],
    plugin: { recycle: [] },
    beforeOperation: (h) => h.api.volumes.delete("volume6-6"),
    test: "syncVolume",
  },
  ...(
    [
      ["6-7", "volume is made Available before recycling", [BbC]],
      ["6-8", "prebound volume is made Available before recycling", []],
    ] as const
  ).map(([n, what, annotations]): BinderTest => ({
    // A previous recycler finished just as this one starts: "no longer needs recycling".
    name: `${n} - ${what}`,
    initialVolumes: [
      newVolume(`volume${n}`, "1Gi", `uid${n}`, `claim${n}`, "Bound", "Recycle", "", ...annotations),
    ],
    expectedVolumes: [newVolume(`volume${n}`, "1Gi", "", "", "Available", "Recycle", "")],
    initialClaims: [],
    expectedClaims: [],
    expectedEvents: [],
    plugin: { recycle: [] },
    beforeOperation: (h) => {
      tamper(h, `volume${n}`, (v) => {
        delete v.spec!.claimRef;
        v.status!.phase = "Available";
        delete v.metadata!.annotations;
      });
    },
    test: "syncVolume",
  })),
  {
    name: "6-9 - prebound volume is recycled while the claim exists",
    initialVolumes: [newVolume("volume6-9", "1Gi", "uid6-9", "claim6-9", "Bound", "Recycle", "")],
    expectedVolumes: [newVolume("volume6-9", "1Gi", "", "claim6-9", "Available", "Recycle", "")],
    initialClaims: [newClaim("claim6-9", "uid6-9-x", "10Gi", "", "Pending", undefined)],
    expectedClaims: [newClaim("claim6-9", "uid6-9-x", "10Gi", "", "Pending", undefined)],
    expectedEvents: [recycled],
    plugin: { recycle: [undefined] },
    test: "syncVolume",
  },
  {
    name: "6-10 - unknown reclaim policy",
    initialVolumes: [newVolume("volume6-10", "1Gi", "uid6-10", "claim6-10", "Bound", "Unknown", "")],
    expectedVolumes: [
      withMessage(
        newVolume("volume6-10", "1Gi", "uid6-10", "claim6-10", "Failed", "Unknown", ""),
        "Volume has unrecognized PersistentVolumeReclaimPolicy",
      ),
    ],
    initialClaims: [],
    expectedClaims: [],
    expectedEvents: [
      "Warning VolumeUnknownReclaimPolicy Volume has unrecognized PersistentVolumeReclaimPolicy",
    ],
    test: "syncVolume",
  },
  {
    name: "6-11 - used by running pod",
    initialVolumes: [newVolume("volume6-11", "1Gi", "uid6-11", "runningClaim", "Bound", "Recycle", "", BbC)],
    expectedVolumes: [
      newVolume("volume6-11", "1Gi", "uid6-11", "runningClaim", "Released", "Recycle", "", BbC),
    ],
    initialClaims: [],
    expectedClaims: [],
    expectedEvents: ["Normal VolumeFailedRecycle Volume is used by pods: default/runningPod"],
    test: "syncVolume",
  },
  {
    name: "6-12 - used by pending pod",
    initialVolumes: [newVolume("volume6-12", "1Gi", "uid6-12", "pendingClaim", "Bound", "Recycle", "", BbC)],
    expectedVolumes: [
      newVolume("volume6-12", "1Gi", "uid6-12", "pendingClaim", "Released", "Recycle", "", BbC),
    ],
    initialClaims: [],
    expectedClaims: [],
    expectedEvents: ["Normal VolumeFailedRecycle Volume is used by pods: default/pendingPod"],
    test: "syncVolume",
  },
  {
    name: "6-13 - used by completed pod",
    initialVolumes: [
      newVolume("volume6-13", "1Gi", "uid6-13", "completedClaim", "Bound", "Recycle", "", BbC),
    ],
    expectedVolumes: [newVolume("volume6-13", "1Gi", "", "", "Available", "Recycle", "")],
    initialClaims: [],
    expectedClaims: [],
    expectedEvents: [recycled],
    plugin: { recycle: [undefined] },
    test: "syncVolume",
  },
  {
    // A claim of that name (another UID, bound elsewhere) is cached: it is not this volume's user.
    name: "6-14 - seemingly used by running pod",
    initialVolumes: [
      newVolume("volume6-14", "1Gi", "uid6-14", "completedClaim", "Bound", "Recycle", "", BbC),
    ],
    expectedVolumes: [newVolume("volume6-14", "1Gi", "", "", "Available", "Recycle", "")],
    initialClaims: [newClaim("completedClaim", "uid6-14-x", "10Gi", "", "Bound", undefined)],
    expectedClaims: [newClaim("completedClaim", "uid6-14-x", "10Gi", "", "Bound", undefined)],
    expectedEvents: [recycled],
    plugin: { recycle: [undefined] },
    test: "syncVolume",
  },
];

const recycleMultisyncTests: BinderTest[] = [
  {
    name: "7-1 - recycle returns error",
    initialVolumes: [newVolume("volume7-1", "1Gi", "uid7-1", "claim7-1", "Bound", "Recycle", "")],
    expectedVolumes: [newVolume("volume7-1", "1Gi", "", "claim7-1", "Available", "Recycle", "")],
    initialClaims: [],
    expectedClaims: [],
    expectedEvents: ["Warning VolumeFailedRecycle Recycle failed: Mock recycle error", recycled],
    plugin: { recycle: [new Error("Mock recycle error"), undefined] },
    test: "syncVolume",
  },
];

/** Not an upstream set (upstream covers Retain in TestSync 5-3): the policy alone, beside the other two. */
const retainTests: BinderTest[] = [
  {
    name: "Retain - a volume whose claim is gone stays Released, untouched",
    initialVolumes: [newVolume("volume-r1", "1Gi", "uid-r1", "claim-r1", "Bound", "Retain", "", BbC)],
    expectedVolumes: [newVolume("volume-r1", "1Gi", "uid-r1", "claim-r1", "Released", "Retain", "", BbC)],
    initialClaims: [],
    expectedClaims: [],
    expectedEvents: [],
    test: "syncVolume",
  },
];

describe("PV binder: Retain", () => {
  for (const t of retainTests) test(t.name, () => runSyncTest(t).then(() => undefined));
});

describe("PV binder: TestDeleteSync (set 8)", () => {
  for (const t of deleteTests) test(t.name, () => runSyncTest(t).then(() => undefined));
});

describe("PV binder: TestDeleteMultiSync (set 9)", () => {
  for (const t of deleteMultisyncTests) test(t.name, () => runMultisyncTest(t).then(() => undefined));
});

describe("PV binder: TestRecycleSync (set 6)", () => {
  for (const t of recycleTests) test(t.name, () => runSyncTest(t, { pods }).then(() => undefined));
});

describe("PV binder: TestRecycleMultiSync (set 7)", () => {
  for (const t of recycleMultisyncTests) test(t.name, () => runMultisyncTest(t).then(() => undefined));
});
