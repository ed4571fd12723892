/*
 * Upstream pv_controller_test.go: TestControllerSync (set 5, event-driven), TestControllerCache,
 * TestAnnealMigrationAnnotations, TestModifyDeletionFinalizers and TestRetroactiveStorageClassAssignment
 * (set 15); then what upstream leaves untested: bad input, the entry points, operation backoff and
 * the CoreV1Api adapter.
 */
import assert from "node:assert/strict";
import { Writable } from "node:stream";
import { describe, test } from "node:test";
import { ApiException, type V1PersistentVolume, type V1PersistentVolumeClaim } from "@kubernetes/client-node";
import fc from "fast-check";
import { createLogger, silentLogger } from "../../src/runtime/logger.js";
import {
  ANN_BETA_IS_DEFAULT_STORAGE_CLASS,
  ANN_BETA_STORAGE_PROVISIONER as BetaSP,
  ANN_BIND_COMPLETED as BC,
  ANN_BOUND_BY_CONTROLLER as BbC,
  ANN_DYNAMICALLY_PROVISIONED as PB,
  ANN_IS_DEFAULT_STORAGE_CLASS,
  ANN_MIGRATED_TO,
  ANN_PRE_RESIZE_CAPACITY,
  ANN_STORAGE_PROVISIONER as SP,
  FINALIZER_EXTERNAL_PV_PROTECTION as EXTERNAL_FINALIZER,
  FINALIZER_IN_TREE_PV_PROTECTION as IN_TREE_FINALIZER,
} from "../../src/persistentvolume/annotations.js";
import { CoreV1BinderApi } from "../../src/persistentvolume/binder-api.js";
import type { JsonRequest } from "../../src/runtime/client.js";
import { ControllerCache } from "../../src/persistentvolume/controller-cache.js";
import { OperationScheduler } from "../../src/persistentvolume/operations.js";
import { defaultStorageClass } from "../../src/persistentvolume/provision.js";
import { inTreeCsiMigration } from "../../src/volume/csimigration/plugin-manager.js";
import {
  modifyDeletionFinalizers,
  updateMigrationAnnotations,
} from "../../src/persistentvolume/csi-migration.js";
import { BETA_STORAGE_CLASS_ANNOTATION } from "../../src/persistentvolume/pv-helpers.js";
import {
  claimKeyOf,
  drainQueues,
  Harness,
  newClaim,
  newExternalVolume,
  newVolume,
  pod,
  runEventDrivenTest,
  runSyncTest,
  storageClass,
  TestClock,
  withAnnotation,
  withExpectedCapacity,
  withFinalizers,
  withSelector,
  type BinderTest,
  type ReactorError,
} from "./pv-binder-framework.js";

// ---- set 5: the controller driven by events ----

const external = "external";
const eventClasses = [storageClass(external, "gcr.io/vendor-csi", "Immediate")];

function addClaimEvent(h: Harness, claim: V1PersistentVolumeClaim): void {
  h.api.addClaim(claim);
  h.enqueuedClaims.push(claimKeyOf(claim));
}

function deleteClaimEvent(h: Harness, key: string): void {
  h.api.claims.delete(key);
  h.enqueuedClaims.push(key);
}

function deleteVolumeEvent(h: Harness, name: string): void {
  h.api.volumes.delete(name);
  h.enqueuedVolumes.push(name);
}

const none = { test: "syncClaim" } as const;

const eventTests: { test: BinderTest; act: (h: Harness) => Promise<void> | void }[] = [
  {
    test: {
      ...none,
      name: "5-2 - complete bind",
      initialVolumes: [newVolume("volume5-2", "1Gi", "", "", "Available", "Retain", "")],
      expectedVolumes: [newVolume("volume5-2", "1Gi", "uid5-2", "claim5-2", "Bound", "Retain", "", BbC)],
      initialClaims: [],
      expectedClaims: [newClaim("claim5-2", "uid5-2", "1Gi", "volume5-2", "Bound", undefined, BbC, BC)],
      expectedEvents: [],
    },
    act: (h) => {
      addClaimEvent(h, newClaim("claim5-2", "uid5-2", "1Gi", "", "Pending", undefined));
    },
  },
  {
    test: {
      ...none,
      name: "5-2-2 - complete bind when PV and PVC both exist",
      initialVolumes: [newVolume("volume5-2", "1Gi", "", "", "Available", "Retain", "")],
      expectedVolumes: [newVolume("volume5-2", "1Gi", "uid5-2", "claim5-2", "Bound", "Retain", "", BbC)],
      initialClaims: [newClaim("claim5-2", "uid5-2", "1Gi", "", "Pending", undefined)],
      expectedClaims: [newClaim("claim5-2", "uid5-2", "1Gi", "volume5-2", "Bound", undefined, BbC, BC)],
      expectedEvents: [],
    },
    act: () => undefined,
  },
  {
    test: {
      ...none,
      name: "5-2-3 - complete bind when PV and PVC both exist and PV has AnnPreResizeCapacity annotation",
      initialVolumes: [
        withAnnotation(
          newVolume("volume5-2", "2Gi", "", "", "Available", "Retain", ""),
          ANN_PRE_RESIZE_CAPACITY,
          "1Gi",
        ),
      ],
      expectedVolumes: [
        withAnnotation(
          newVolume("volume5-2", "2Gi", "uid5-2", "claim5-2", "Bound", "Retain", "", BbC),
          ANN_PRE_RESIZE_CAPACITY,
          "1Gi",
        ),
      ],
      initialClaims: [],
      expectedClaims: [
        withExpectedCapacity(
          newClaim("claim5-2", "uid5-2", "2Gi", "volume5-2", "Bound", undefined, BbC, BC),
          "1Gi",
        ),
      ],
      expectedEvents: [],
    },
    act: (h) => {
      addClaimEvent(
        h,
        withExpectedCapacity(newClaim("claim5-2", "uid5-2", "2Gi", "", "Pending", undefined), "2Gi"),
      );
    },
  },
  {
    test: {
      ...none,
      name: "5-3 - delete claim",
      initialVolumes: [newVolume("volume5-3", "10Gi", "uid5-3", "claim5-3", "Bound", "Retain", "", BbC)],
      expectedVolumes: [newVolume("volume5-3", "10Gi", "uid5-3", "claim5-3", "Released", "Retain", "", BbC)],
      initialClaims: [newClaim("claim5-3", "uid5-3", "1Gi", "volume5-3", "Bound", undefined, BbC, BC)],
      expectedClaims: [],
      expectedEvents: [],
    },
    act: (h) => {
      deleteClaimEvent(h, "default/claim5-3");
    },
  },
  {
    test: {
      ...none,
      name: "5-4 - delete volume",
      initialVolumes: [newVolume("volume5-4", "1Gi", "uid5-4", "claim5-4", "Bound", "Retain", "")],
      expectedVolumes: [],
      initialClaims: [newClaim("claim5-4", "uid5-4", "1Gi", "volume5-4", "Bound", undefined, BbC, BC)],
      expectedClaims: [newClaim("claim5-4", "uid5-4", "1Gi", "volume5-4", "Lost", undefined, BbC, BC)],
      expectedEvents: [
        "Warning ClaimLost Bound claim has lost its PersistentVolume. Data on the volume is lost!",
      ],
    },
    act: (h) => {
      deleteVolumeEvent(h, "volume5-4");
    },
  },
  {
    // Upstream also checks the deletion-latency metric; the metric is not part of this controller.
    test: {
      ...none,
      name: "5-5 - delete claim and delete volume",
      initialVolumes: [
        withAnnotation(
          newVolume("volume5-5", "10Gi", "uid5-5", "claim5-5", "Bound", "Delete", external, BbC),
          PB,
          "gcr.io/vendor-csi",
        ),
      ],
      expectedVolumes: [],
      initialClaims: [
        withAnnotation(
          newClaim("claim5-5", "uid5-5", "1Gi", "volume5-5", "Bound", external, BbC, BC),
          SP,
          "gcr.io/vendor-csi",
        ),
      ],
      expectedClaims: [],
      expectedEvents: [],
    },
    act: async (h) => {
      deleteClaimEvent(h, "default/claim5-5");
      await drainQueues(h);
      assert.equal(h.api.volumes.get("volume5-5")?.status?.phase, "Released");
      deleteVolumeEvent(h, "volume5-5");
    },
  },
  {
    // Released for the external deleter (upstream: and a deletion start time recorded for the metric).
    test: {
      ...none,
      name: "5-6 - delete claim and waiting for external volume deletion",
      initialVolumes: [
        withAnnotation(
          newExternalVolume(
            "volume5-6",
            "10Gi",
            "uid5-6",
            "claim5-6",
            "Bound",
            "Delete",
            external,
            "fake.driver.csi",
            BbC,
          ),
          PB,
          "gcr.io/vendor-csi",
        ),
      ],
      expectedVolumes: [
        withAnnotation(
          newExternalVolume(
            "volume5-6",
            "10Gi",
            "uid5-6",
            "claim5-6",
            "Released",
            "Delete",
            external,
            "fake.driver.csi",
            BbC,
          ),
          PB,
          "gcr.io/vendor-csi",
        ),
      ],
      initialClaims: [
        withAnnotation(
          newClaim("claim5-6", "uid5-6", "1Gi", "volume5-6", "Bound", external, BbC, BC),
          SP,
          "gcr.io/vendor-csi",
        ),
      ],
      expectedClaims: [],
      expectedEvents: [],
    },
    act: (h) => {
      deleteClaimEvent(h, "default/claim5-6");
    },
  },
  {
    test: {
      ...none,
      name: "5-7 - delete volume event makes claim lost, delete claim event",
      initialVolumes: [
        newVolume("volume5-7", "10Gi", "uid5-7", "claim5-7", "Bound", "Delete", external, BbC, PB),
      ],
      expectedVolumes: [],
      initialClaims: [
        withAnnotation(
          newClaim("claim5-7", "uid5-7", "1Gi", "volume5-7", "Bound", external, BbC, BC),
          SP,
          "gcr.io/vendor-csi",
        ),
      ],
      expectedClaims: [],
      expectedEvents: ["Warning ClaimLost"],
    },
    act: async (h) => {
      deleteVolumeEvent(h, "volume5-7");
      await drainQueues(h);
      assert.equal(h.api.claims.get("default/claim5-7")?.status?.phase, "Lost");
      deleteClaimEvent(h, "default/claim5-7");
    },
  },
  {
    test: {
      ...none,
      name: "5-8 - delete claim waiting for an external provisioner",
      initialVolumes: [],
      expectedVolumes: [],
      initialClaims: [
        withAnnotation(
          newClaim("claim5-8", "uid5-8", "1Gi", "", "Pending", external),
          SP,
          "gcr.io/vendor-csi",
        ),
      ],
      expectedClaims: [],
      expectedEvents: ["Normal ExternalProvisioning"],
    },
    act: (h) => {
      deleteClaimEvent(h, "default/claim5-8");
    },
  },
  {
    // CSI migration is off for the plugin: migrated-to goes, the external finalizer becomes the in-tree one.
    test: {
      ...none,
      name: "5-9 - volume has its external PV deletion protection finalizer removed as CSI migration is disabled",
      initialVolumes: [
        withFinalizers(
          withAnnotation(
            newVolume("volume-5-9", "1Gi", "", "", "Available", "Delete", "", PB),
            ANN_MIGRATED_TO,
            "pd.csi.storage.gke.io",
          ),
          [EXTERNAL_FINALIZER],
        ),
      ],
      expectedVolumes: [
        withFinalizers(newVolume("volume-5-9", "1Gi", "", "", "Available", "Delete", "", PB), [
          IN_TREE_FINALIZER,
        ]),
      ],
      initialClaims: [],
      expectedClaims: [],
      expectedEvents: [],
    },
    act: () => undefined,
  },
];

describe("PV binder: TestControllerSync (set 5)", () => {
  for (const { test: t, act } of eventTests) {
    test(t.name, () => runEventDrivenTest(t, act, { classes: eventClasses }).then(() => undefined));
  }
});

// ---- the controller cache (storeObjectUpdate) ----

describe("PV binder: TestControllerCache", () => {
  const pv = (version: string): V1PersistentVolume =>
    modifyVersion(newVolume("pvName", "1Gi", "", "", "Available", "Delete", ""), version);

  test("stores new, equal and newer versions and ignores older ones, comparing as integers", () => {
    const cache = new ControllerCache(silentLogger);
    // Step 5: "2" > "10" as strings, 2 < 10 as integers.
    for (const [version, stored, cached] of [
      ["1", true, "1"],
      ["1", true, "1"],
      ["2", true, "2"],
      ["1", false, "2"],
      ["10", true, "10"],
    ] as const) {
      assert.equal(cache.storeVolume(pv(version)), stored, `version ${version}`);
      assert.equal(cache.getVolume("pvName")?.metadata?.resourceVersion, cached);
    }
  });

  test("an unparsable resourceVersion is an error", () => {
    const cache = new ControllerCache(silentLogger);
    cache.storeVolume(pv("1"));
    assert.throws(() => cache.storeVolume(pv("xxx")), /error parsing ResourceVersion "xxx"/);
  });

  test("claims follow the same rules and cached objects are frozen", () => {
    const cache = new ControllerCache(silentLogger);
    const claim = newClaim("c", "u", "1Gi", "", "Pending", undefined);
    assert.equal(cache.storeClaim(modifyVersion(claim, "5")), true);
    assert.equal(cache.storeClaim(modifyVersion(structuredClone(claim), "4")), false);
    const cached = cache.getClaim("default/c");
    assert.ok(cached && Object.isFrozen(cached.metadata));
  });

  test("property: the cache holds the highest version stored so far", () => {
    fc.assert(
      fc.property(fc.array(fc.bigInt({ min: 0n, max: 2n ** 63n - 1n }), { minLength: 1 }), (versions) => {
        const cache = new ControllerCache(silentLogger);
        for (const v of versions) cache.storeVolume(pv(String(v)));
        const max = versions.reduce((a, b) => (a > b ? a : b));
        assert.equal(cache.getVolume("pvName")?.metadata?.resourceVersion, String(max));
      }),
    );
  });
});

function modifyVersion<T extends V1PersistentVolume | V1PersistentVolumeClaim>(obj: T, version: string): T {
  obj.metadata!.resourceVersion = version;
  return obj;
}

// ---- CSI migration annotations and finalizers ----

describe("PV binder: TestAnnealMigrationAnnotations", () => {
  const migratedPlugin = "kubernetes.io/gce-pd";
  const migratedDriver = "pd.csi.storage.gke.io";
  const nonMigratedPlugin = "kubernetes.io/rbd";
  const nonMigratedDriver = "rbd.csi.ceph.com";
  const cases: [
    string,
    Record<string, string>,
    Record<string, string>,
    Record<string, string>,
    Record<string, string>,
  ][] = [
    [
      "migration on",
      { [PB]: migratedPlugin },
      { [PB]: migratedPlugin, [ANN_MIGRATED_TO]: migratedDriver },
      { [SP]: migratedPlugin },
      { [SP]: migratedPlugin, [ANN_MIGRATED_TO]: migratedDriver },
    ],
    [
      "migration on with beta storage provisioner annotation",
      { [PB]: migratedPlugin },
      { [PB]: migratedPlugin, [ANN_MIGRATED_TO]: migratedDriver },
      { [BetaSP]: migratedPlugin },
      { [BetaSP]: migratedPlugin, [ANN_MIGRATED_TO]: migratedDriver },
    ],
    [
      "migration off",
      { [PB]: nonMigratedPlugin },
      { [PB]: nonMigratedPlugin },
      { [SP]: nonMigratedPlugin },
      { [SP]: nonMigratedPlugin },
    ],
    [
      "migration off removes migrated to (rollback)",
      { [PB]: nonMigratedPlugin, [ANN_MIGRATED_TO]: nonMigratedDriver },
      { [PB]: nonMigratedPlugin },
      { [SP]: nonMigratedPlugin, [ANN_MIGRATED_TO]: nonMigratedDriver },
      { [SP]: nonMigratedPlugin },
    ],
    [
      "migration off removes migrated to (rollback) with beta storage provisioner annotation",
      { [PB]: nonMigratedPlugin, [ANN_MIGRATED_TO]: nonMigratedDriver },
      { [PB]: nonMigratedPlugin },
      { [BetaSP]: nonMigratedPlugin, [ANN_MIGRATED_TO]: nonMigratedDriver },
      { [BetaSP]: nonMigratedPlugin },
    ],
    [
      "migration on, other plugin not affected",
      { [PB]: "non-migrated-plugin" },
      { [PB]: "non-migrated-plugin" },
      { [SP]: "non-migrated-plugin" },
      { [SP]: "non-migrated-plugin" },
    ],
    ["not dynamically provisioned", {}, {}, {}, {}],
  ];
  for (const [name, volume, expectedVolume, claim, expectedClaim] of cases) {
    test(name, () => {
      updateMigrationAnnotations(inTreeCsiMigration, volume, false);
      assert.deepEqual(volume, expectedVolume);
      updateMigrationAnnotations(inTreeCsiMigration, claim, true);
      assert.deepEqual(claim, expectedClaim);
    });
  }
  test("nil annotations", () => {
    assert.equal(updateMigrationAnnotations(inTreeCsiMigration, undefined, true), false);
  });
});

describe("PV binder: TestModifyDeletionFinalizers", () => {
  const custom = "test.volume.kubernetes.io/finalizer";
  const nonMigratedDriver = "rbd.csi.ceph.com";
  const v = (policy: string, finalizers: string[] | undefined, ...annotations: string[]) => {
    const volume = newVolume(
      "volume-13",
      "1Gi",
      "uid11-23",
      "claim11-23",
      "Bound",
      policy,
      "copper",
      ...annotations,
    );
    if (finalizers) volume.metadata!.finalizers = finalizers;
    return volume;
  };
  const external = (finalizers: string[] | undefined) => {
    const volume = newExternalVolume(
      "volume-13",
      "1Gi",
      "uid11-23",
      "claim11-23",
      "Bound",
      "Delete",
      "copper",
      nonMigratedDriver,
      PB,
      BbC,
    );
    if (finalizers) volume.metadata!.finalizers = finalizers;
    return volume;
  };
  const migrated = (volume: V1PersistentVolume) =>
    modifyAnnotations(volume, { [PB]: "kubernetes.io/gce-pd", [ANN_MIGRATED_TO]: "pd.csi.storage.gke.io" });
  const cases: [string, V1PersistentVolume, string[] | undefined, boolean][] = [
    [
      "13-1 migration was never enabled, volume has the finalizer",
      external([EXTERNAL_FINALIZER]),
      [EXTERNAL_FINALIZER],
      false,
    ],
    [
      "13-2 migration was never enabled, volume does not have the finalizer",
      external(undefined),
      undefined,
      false,
    ],
    [
      "13-3 migration was disabled, volume has a custom finalizer",
      v("Delete", [custom], PB, BbC),
      [custom, IN_TREE_FINALIZER],
      true,
    ],
    [
      "13-4 migration was disabled, volume has no finalizers",
      v("Delete", undefined, PB, BbC),
      [IN_TREE_FINALIZER],
      true,
    ],
    [
      "13-5 migration was disabled, volume has the external finalizer",
      v("Delete", [EXTERNAL_FINALIZER], PB, BbC),
      [IN_TREE_FINALIZER],
      true,
    ],
    [
      "13-6 migration was disabled, volume has multiple finalizers",
      v("Delete", [EXTERNAL_FINALIZER, custom], PB, BbC),
      [custom, IN_TREE_FINALIZER],
      true,
    ],
    [
      "13-7 migration is enabled, volume has both finalizers",
      migrated(v("Delete", [EXTERNAL_FINALIZER, IN_TREE_FINALIZER], PB, BbC)),
      [EXTERNAL_FINALIZER],
      true,
    ],
    [
      "13-8 plugin not migrated, volume has the external finalizer",
      v("Delete", [EXTERNAL_FINALIZER], PB, BbC),
      [IN_TREE_FINALIZER],
      true,
    ],
    [
      "13-9 plugin not migrated, volume has multiple finalizers",
      v("Delete", [EXTERNAL_FINALIZER, custom], PB, BbC),
      [custom, IN_TREE_FINALIZER],
      true,
    ],
    [
      "13-10 missing annotations but finalizers exist",
      v("Delete", [EXTERNAL_FINALIZER]),
      [EXTERNAL_FINALIZER],
      false,
    ],
    ["13-11 missing annotations and finalizers", v("Delete", undefined), undefined, false],
    ["13-12 reclaimPolicy Retain, no finalizers", v("Retain", undefined, PB, BbC), undefined, false],
    ["13-13 reclaimPolicy Recycle, no finalizers", v("Recycle", undefined, PB, BbC), undefined, false],
    [
      "13-14 reclaimPolicy Retain, in-tree finalizer",
      v("Retain", [IN_TREE_FINALIZER], PB, BbC),
      undefined,
      true,
    ],
    [
      "13-15 statically provisioned PV",
      newVolume("volume-13-15", "1Gi", "", "", "Available", "Delete", "copper"),
      undefined,
      false,
    ],
    [
      "derived: a Delete volume being deleted gets no new finalizer (the apiserver forbids it)",
      (() => {
        const volume = v("Delete", ["kubernetes.io/pv-protection"], PB, BbC);
        volume.metadata!.deletionTimestamp = new Date();
        return volume;
      })(),
      ["kubernetes.io/pv-protection"],
      false,
    ],
  ];
  for (const [name, volume, finalizers, modified] of cases) {
    test(name, () => {
      assert.deepEqual(modifyDeletionFinalizers(inTreeCsiMigration, volume), { finalizers, modified });
    });
  }
});

function modifyAnnotations(
  volume: V1PersistentVolume,
  annotations: Record<string, string>,
): V1PersistentVolume {
  volume.metadata!.annotations = annotations;
  return volume;
}

// ---- set 15: retroactive default storage class ----

describe("PV binder: TestRetroactiveStorageClassAssignment (set 15)", () => {
  const noProvisioner = "kubernetes.io/no-provisioner";
  const cls = (name: string, isDefault: boolean) =>
    storageClass(
      name,
      noProvisioner,
      "Immediate",
      isDefault ? { metadata: { name, annotations: { [ANN_IS_DEFAULT_STORAGE_CLASS]: "true" } } } : {},
    );
  const cases: { classes: ReturnType<typeof cls>[]; test: BinderTest }[] = [
    {
      classes: [],
      test: {
        name: "15-1 - pvc storage class is not assigned retroactively if there are no default storage classes",
        initialVolumes: [],
        expectedVolumes: [],
        initialClaims: [newClaim("claim15-1", "uid15-1", "1Gi", "", "Pending", undefined)],
        expectedClaims: [newClaim("claim15-1", "uid15-1", "1Gi", "", "Pending", undefined)],
        expectedEvents: ["Normal FailedBinding"],
        test: "syncClaim",
      },
    },
    {
      classes: [cls("gold", true), cls("silver", false)],
      test: {
        name: "15-3 - pvc storage class is not assigned retroactively if claim is already bound",
        initialVolumes: [],
        expectedVolumes: [],
        initialClaims: [newClaim("claim15-3", "uid15-3", "1Gi", "test", "Bound", "copper", BbC, BC)],
        expectedClaims: [newClaim("claim15-3", "uid15-3", "1Gi", "test", "Lost", "copper", BbC, BC)],
        expectedEvents: ["Warning ClaimLost"],
        test: "syncClaim",
      },
    },
    {
      classes: [cls("gold", true), cls("silver", false)],
      test: {
        name: "15-4 - pvc storage class is not assigned retroactively if claim is already bound but annotations are missing",
        initialVolumes: [],
        expectedVolumes: [],
        initialClaims: [newClaim("claim15-4", "uid15-4", "1Gi", "test", "Bound", "copper")],
        expectedClaims: [newClaim("claim15-4", "uid15-4", "1Gi", "test", "Pending", "copper")],
        expectedEvents: [],
        test: "syncClaim",
      },
    },
    {
      classes: [cls("gold", true), cls("silver", false)],
      test: {
        name: "15-5 - pvc storage class is assigned retroactively if there is a default",
        initialVolumes: [],
        expectedVolumes: [],
        initialClaims: [newClaim("claim15-5", "uid15-5", "1Gi", "", "Pending", undefined)],
        expectedClaims: [newClaim("claim15-5", "uid15-5", "1Gi", "", "Pending", "gold")],
        expectedEvents: [],
        test: "syncClaim",
      },
    },
    {
      classes: [cls("gold", true), cls("silver", true)],
      test: {
        name: "15-2 - pvc storage class is assigned retroactively if there are multiple default storage classes",
        initialVolumes: [],
        expectedVolumes: [],
        initialClaims: [newClaim("claim15-2", "uid15-2", "1Gi", "", "Pending", undefined)],
        expectedClaims: [newClaim("claim15-2", "uid15-2", "1Gi", "", "Pending", "gold")],
        expectedEvents: [],
        test: "syncClaim",
      },
    },
    {
      // copper's provisioner is kubernetes.io/no-provisioner, which no plugin implements.
      classes: [cls("gold", true), cls("copper", false)],
      test: {
        name: "15-6 - pvc storage class is not changed if claim is not bound but already has a storage class",
        initialVolumes: [],
        expectedVolumes: [],
        initialClaims: [newClaim("claim15-6", "uid15-6", "1Gi", "", "Pending", "copper")],
        expectedClaims: [newClaim("claim15-6", "uid15-6", "1Gi", "", "Pending", "copper")],
        expectedEvents: [
          "Warning ProvisioningFailed no volume plugin matched name: kubernetes.io/no-provisioner",
        ],
        test: "syncClaim",
      },
    },
    {
      classes: [cls("gold", true), cls("copper", false)],
      test: {
        name: '15-7 - pvc storage class is not changed if claim is not bound but already set annotation "volume.beta.kubernetes.io/storage-class"',
        initialVolumes: [],
        expectedVolumes: [],
        initialClaims: [
          newClaim("claim15-7", "uid15-7", "1Gi", "", "Pending", undefined, BETA_STORAGE_CLASS_ANNOTATION),
        ],
        expectedClaims: [
          newClaim("claim15-7", "uid15-7", "1Gi", "", "Pending", undefined, BETA_STORAGE_CLASS_ANNOTATION),
        ],
        expectedEvents: ['Warning ProvisioningFailed storageclass.storage.k8s.io "yes" not found'],
        test: "syncClaim",
      },
    },
  ];
  for (const { classes, test: t } of cases)
    test(t.name, () => runSyncTest(t, { classes }).then(() => undefined));

  test("the newest default class wins, equally new ones by name", () => {
    const at = (name: string, time: string | undefined, annotation = ANN_IS_DEFAULT_STORAGE_CLASS) =>
      storageClass(name, noProvisioner, "Immediate", {
        metadata: {
          name,
          annotations: { [annotation]: "true" },
          ...(time ? { creationTimestamp: new Date(time) } : {}),
        },
      });
    const notDefault = storageClass("newest", noProvisioner, "Immediate", {
      metadata: { name: "newest", creationTimestamp: new Date("2030-01-01T00:00:00Z") },
    });
    const pick = (classes: ReturnType<typeof at>[]) => defaultStorageClass(classes)?.metadata?.name;
    assert.equal(pick([at("a", "2020-01-01T00:00:00Z"), at("b", "2021-01-01T00:00:00Z"), notDefault]), "b");
    assert.equal(
      pick([
        at("b", "2021-01-01T00:00:00Z"),
        at("a", "2021-01-01T00:00:00Z", ANN_BETA_IS_DEFAULT_STORAGE_CLASS),
      ]),
      "a",
    );
    assert.equal(pick([at("old", "2021-01-01T00:00:00Z"), at("none", undefined)]), "old");
    assert.equal(pick([notDefault]), undefined);
  });
});

// ---- behaviour upstream does not table-test ----

describe("PV binder: WaitForFirstConsumer events", () => {
  const wait = [storageClass("wait", "", "WaitForFirstConsumer")];
  const claim = () => newClaim("claim-w", "uid-w", "1Gi", "", "Pending", "wait");
  const run = (pods: ReturnType<typeof pod>[], event: string) =>
    runSyncTest(
      {
        name: "wait",
        initialVolumes: [],
        expectedVolumes: [],
        initialClaims: [claim()],
        expectedClaims: [claim()],
        expectedEvents: [event],
        test: "syncClaim",
      },
      { classes: wait, pods },
    ).then(() => undefined);

  test("one unscheduled pod", () =>
    run([pod("p1", "claim-w", "Pending")], "Normal WaitForPodScheduled waiting for pod p1 to be scheduled"));
  test("several unscheduled pods; scheduled and finished ones do not count", () =>
    run(
      [
        pod("p1", "claim-w", "Pending"),
        pod("p2", "claim-w", "Pending"),
        pod("p3", "claim-w", "Pending", "node1"),
        pod("p4", "claim-w", "Failed"),
      ],
      "Normal WaitForPodScheduled waiting for pods p1,p2 to be scheduled",
    ));
  test("only scheduled pods", () =>
    run(
      [pod("p3", "claim-w", "Pending", "node1")],
      "Normal WaitForFirstConsumer waiting for first consumer to be created before binding",
    ));
});

describe("PV binder: bad input never crashes a sync", () => {
  const base = (claim: V1PersistentVolumeClaim, volumes: V1PersistentVolume[] = []): BinderTest => ({
    name: "bad input",
    initialVolumes: volumes,
    expectedVolumes: volumes,
    initialClaims: [claim],
    expectedClaims: [claim],
    expectedEvents: [],
    test: "syncClaim",
  });
  const rejects = async (t: BinderTest, message: RegExp, env = {}) => {
    const h = new Harness(t, env);
    await assert.rejects(h.ctrl.syncClaim(structuredClone(t.initialClaims[0]!)), (err: unknown) => {
      assert.ok(err instanceof Error && !(err instanceof TypeError), `a plain error, not ${String(err)}`);
      assert.match(err.message, message);
      return true;
    });
    await h.ctrl.waitForOperations();
    h.check();
  };
  const withRequest = (request: string | undefined) =>
    modifyClaim(newClaim("claim-b", "uid-b", "1Gi", "", "Pending", undefined), (c) => {
      if (request === undefined) delete c.spec!.resources;
      else c.spec!.resources = { requests: { storage: request } };
    });

  test("an unparsable storage request: the sync fails with an error", () =>
    rejects(
      base(withRequest("one gig"), [newVolume("v", "1Gi", "", "", "Available", "Retain", "")]),
      /error finding PV for claim "default\/claim-b"/,
    ));
  test("a missing storage request: the sync fails with an error", () =>
    rejects(
      base(withRequest(undefined), [newVolume("v", "1Gi", "", "", "Available", "Retain", "")]),
      /no valid spec.resources.requests.storage/,
    ));
  test("an unknown access mode: the sync fails with an error", () =>
    rejects(
      base(
        modifyClaim(
          newClaim("claim-b", "uid-b", "1Gi", "", "Pending", undefined),
          (c) => (c.spec!.accessModes = ["ReadWriteSometimes"]),
        ),
      ),
      /unsupported access modes ReadWriteSometimes/,
    ));
  test("an invalid selector: the sync fails with an error", () =>
    rejects(
      base(withSelector(newClaim("claim-b", "uid-b", "1Gi", "", "Pending", undefined), { "a b": "c" })),
      /error creating internal label selector/,
    ));
  test("a class without volumeBindingMode: the sync fails with an error", () =>
    rejects(
      base(newClaim("claim-b", "uid-b", "1Gi", "", "Pending", "modeless")),
      /VolumeBindingMode not set for StorageClass "modeless"/,
      {
        classes: [storageClass("modeless", "x", undefined)],
      },
    ));

  test("a requested volume with an unparsable capacity: VolumeMismatch", async () => {
    const volume = modifyVolume(
      newVolume("v", "1Gi", "", "", "Available", "Retain", ""),
      (v) => (v.spec!.capacity = { storage: "lots" }),
    );
    await runSyncTest({
      ...base(newClaim("claim-b", "uid-b", "1Gi", "v", "Pending", undefined), [volume]),
      expectedEvents: [
        'Warning VolumeMismatch Cannot bind to requested volume "v": invalid volume capacity "lots"',
      ],
    });
  });
  test("a requested volume and an unparsable request: VolumeMismatch", async () => {
    const claim = modifyClaim(
      newClaim("claim-b", "uid-b", "1Gi", "v", "Pending", undefined),
      (c) => (c.spec!.resources!.requests = { storage: "?" }),
    );
    await runSyncTest({
      ...base(claim, [newVolume("v", "1Gi", "", "", "Available", "Retain", "")]),
      expectedEvents: [
        'Warning VolumeMismatch Cannot bind to requested volume "v": invalid storage request "?"',
      ],
    });
  });
  test("a requested volume without capacity is too small", async () => {
    const volume = modifyVolume(
      newVolume("v", "1Gi", "", "", "Available", "Retain", ""),
      (v) => delete v.spec!.capacity,
    );
    await runSyncTest({
      ...base(newClaim("claim-b", "uid-b", "1Gi", "v", "Pending", undefined), [volume]),
      expectedEvents: [
        'Warning VolumeMismatch Cannot bind to requested volume "v": requested PV is too small',
      ],
    });
  });
  test("a missing class when provisioning: ProvisioningFailed", () =>
    runSyncTest({
      ...base(newClaim("claim-b", "uid-b", "1Gi", "", "Pending", "gone")),
      expectedEvents: ["Warning ProvisioningFailed"],
    }).then(() => undefined));
  test("a PV with an unparsable resourceVersion: updateVolume fails with an error", async () => {
    const h = new Harness(base(newClaim("claim-b", "uid-b", "1Gi", "", "Pending", undefined)), {});
    const volume = newVolume("v", "1Gi", "", "", "Available", "Retain", "");
    await h.ctrl.updateVolume(volume);
    await assert.rejects(
      h.ctrl.updateVolume(modifyVersion(structuredClone(volume), "x")),
      /error parsing ResourceVersion "x"/,
    );
  });
  test("property: arbitrary quantities and modes never throw anything but an Error", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.string(),
        fc.string(),
        fc.array(fc.constantFrom("ReadWriteOnce", "ReadOnlyMany", "ReadWriteMany", "ReadWriteOncePod", "x")),
        fc.boolean(),
        async (request, capacity, modes, prebound) => {
          const volume = modifyVolume(newVolume("v", "1Gi", "", "", "Available", "Retain", ""), (v) => {
            v.spec!.capacity = { storage: capacity };
            v.spec!.accessModes = modes;
          });
          const claim = modifyClaim(
            newClaim("c", "u", "1Gi", prebound ? "v" : "", "Pending", undefined),
            (c) => {
              c.spec!.resources = { requests: { storage: request } };
              c.spec!.accessModes = modes;
            },
          );
          const h = new Harness(base(claim, [volume]), {});
          try {
            await h.ctrl.syncClaim(structuredClone(claim));
            await h.ctrl.syncVolume(structuredClone(volume));
          } catch (err) {
            assert.ok(
              err instanceof Error && !(err instanceof TypeError) && !(err instanceof RangeError),
              String(err),
            );
          }
          await h.ctrl.waitForOperations();
        },
      ),
      { numRuns: 200 },
    );
  });
});

function modifyClaim(
  claim: V1PersistentVolumeClaim,
  change: (c: V1PersistentVolumeClaim) => unknown,
): V1PersistentVolumeClaim {
  change(claim);
  return claim;
}

function modifyVolume(
  volume: V1PersistentVolume,
  change: (v: V1PersistentVolume) => unknown,
): V1PersistentVolume {
  change(volume);
  return volume;
}

describe("PV binder: entry points", () => {
  const harness = (
    volumes: V1PersistentVolume[],
    claims: V1PersistentVolumeClaim[],
    errors: ReactorError[] = [],
  ) =>
    new Harness(
      {
        name: "e",
        initialVolumes: volumes,
        expectedVolumes: [],
        initialClaims: claims,
        expectedClaims: [],
        expectedEvents: [],
        errors,
        test: "syncClaim",
      },
      {},
    );

  test("deleting a bound claim enqueues its volume, and a bound volume its claim", () => {
    const volume = newVolume("v", "1Gi", "u", "c", "Bound", "Retain", "", BbC);
    const claim = newClaim("c", "u", "1Gi", "v", "Bound", undefined, BbC, BC);
    const h = harness([volume], [claim]);
    h.ctrl.deleteClaim(claim);
    h.ctrl.deleteVolume(volume);
    assert.deepEqual(h.enqueuedVolumes, ["v"]);
    assert.deepEqual(h.enqueuedClaims, ["default/c"]);
    assert.equal(h.ctrl.cachedClaim("default/c"), undefined);
    assert.equal(h.ctrl.cachedVolume("v"), undefined);
  });

  test("deleting an unbound claim or volume enqueues nothing", () => {
    const h = harness([], []);
    h.ctrl.deleteClaim(newClaim("c", "u", "1Gi", "", "Pending", undefined));
    h.ctrl.deleteVolume(newVolume("v", "1Gi", "", "", "Available", "Retain", ""));
    assert.deepEqual([h.enqueuedClaims, h.enqueuedVolumes], [[], []]);
  });

  test("a stale informer copy does not undo what the controller just wrote", async () => {
    const volume = newVolume("v", "1Gi", "", "", "Available", "Retain", "");
    const claim = newClaim("c", "u", "1Gi", "", "Pending", undefined);
    const h = harness([volume], [claim]);
    await h.ctrl.updateClaim(structuredClone(claim));
    assert.equal(h.api.claims.get("default/c")?.status?.phase, "Bound");
    const writes = h.api.changes.length;
    // The informer still has the version before the binding: nothing is synced again.
    await h.ctrl.updateClaim(structuredClone(claim));
    await h.ctrl.updateVolume(structuredClone(volume));
    assert.equal(h.api.changes.length, writes);
    assert.equal(h.ctrl.cachedClaim("default/c")?.spec?.volumeName, "v");
  });

  test("a volume pre-bound to an unbound claim enqueues the claim with the version it found", async () => {
    const claim = newClaim("c", "u", "1Gi", "", "Pending", undefined);
    const volume = newVolume("v", "1Gi", "u", "c", "Available", "Delete", "", BbC);
    const h = harness([volume], [claim]);
    await h.ctrl.syncVolume(structuredClone(volume));
    assert.deepEqual(h.enqueuedClaims, ["default/c"]);
    // Shadow mode syncs this version again when the informer holds a newer one (KCM's binding).
    assert.deepEqual(
      h.claimsDecidedOn.map((c) => [c.metadata?.uid, c.metadata?.resourceVersion, c.spec?.volumeName ?? ""]),
      [["u", h.api.claims.get("default/c")?.metadata?.resourceVersion, ""]],
    );
  });

  test("a volume turning Available wakes a claim that found none (not upstream: no 15 s resync wait)", async () => {
    const claim = newClaim("c", "u", "1Gi", "", "Pending", "");
    const volume = newVolume("v", "1Gi", "", "", "Pending", "Retain", "");
    const h = harness([], [claim]);
    await h.ctrl.updateClaim(structuredClone(claim));
    assert.deepEqual(h.events, [
      "Normal FailedBinding no persistent volumes available for this claim and no storage class is set",
    ]);
    h.api.volumes.set("v", structuredClone(volume));
    await h.ctrl.updateVolume(structuredClone(volume));
    assert.equal(h.api.volumes.get("v")?.status?.phase, "Available");
    assert.deepEqual(h.enqueuedClaims, ["default/c"]);
    // Woken once: the volume's next sync (Available already) wakes nothing.
    await h.ctrl.updateVolume(structuredClone(h.api.volumes.get("v")!));
    assert.deepEqual(h.enqueuedClaims, ["default/c"]);
    await h.ctrl.updateClaim(structuredClone(h.api.claims.get("default/c")!));
    assert.equal(h.api.claims.get("default/c")?.spec?.volumeName, "v");
  });

  test("a claim a new volume will fit waits for it without FailedBinding (not upstream)", async () => {
    const claim = newClaim("c", "u", "1Gi", "", "Pending", "");
    const volume = newVolume("v", "1Gi", "", "", "Pending", "Retain", "");
    const h = harness([volume], [claim]);
    // The volume's sync (Pending to Available) has not run yet.
    await h.ctrl.updateClaim(structuredClone(claim));
    assert.deepEqual(h.events, []);
    assert.equal(h.api.claims.get("default/c")?.spec?.volumeName, undefined);
    await h.ctrl.updateVolume(structuredClone(volume));
    assert.deepEqual(h.enqueuedClaims, ["default/c"]);
    await h.ctrl.updateClaim(structuredClone(h.api.claims.get("default/c")!));
    assert.equal(h.api.claims.get("default/c")?.spec?.volumeName, "v");
    assert.deepEqual(h.events, []);
  });

  test("a new volume that does not fit, or whose sync failed, leaves the claim its FailedBinding", async () => {
    const failed =
      "Normal FailedBinding no persistent volumes available for this claim and no storage class is set";
    const claim = newClaim("c", "u", "2Gi", "", "Pending", "");
    const small = harness([newVolume("v", "1Gi", "", "", "Pending", "Retain", "")], [claim]);
    await small.ctrl.updateClaim(structuredClone(claim));
    assert.deepEqual(small.events, [failed]);

    const volume = newVolume("v", "2Gi", "", "", "Pending", "Retain", "");
    const conflict = new ApiException(409, "Conflict", "{}", {});
    const h = harness(
      [volume],
      [claim],
      [{ verb: "update", resource: "persistentvolumes", error: conflict }],
    );
    await assert.rejects(h.ctrl.updateVolume(structuredClone(volume)));
    await h.ctrl.updateClaim(structuredClone(claim));
    assert.deepEqual(h.events, [failed]);
  });

  test("resync enqueues every claim, then every volume, from the informers", () => {
    const h = harness([newVolume("v", "1Gi", "", "", "Available", "Retain", "")], []);
    h.ctrl.resync();
    assert.deepEqual(h.enqueuedVolumes, ["v"]);
  });
});

describe("PV binder: operations", () => {
  test("one operation per name at a time", async () => {
    const ops = new OperationScheduler(new TestClock(), silentLogger);
    const running: (() => void)[] = [];
    const op = () => new Promise<void>((resolve) => running.push(resolve));
    const releaseAll = () => {
      running.splice(0).forEach((release) => {
        release();
      });
    };
    ops.schedule("a", op);
    await new Promise(setImmediate);
    ops.schedule("a", op);
    ops.schedule("b", op);
    await new Promise(setImmediate);
    assert.equal(running.length, 2, "a second a is skipped while the first runs; b runs");
    releaseAll();
    await ops.waitForCompletion();
    ops.schedule("a", op);
    await new Promise(setImmediate);
    assert.equal(running.length, 1, "a finished a can run again");
    releaseAll();
    await ops.waitForCompletion();
  });

  test("a failed operation is logged with its error whole: message, stack and cause", async () => {
    const lines: string[] = [];
    const destination = new Writable({
      write(chunk: Buffer, _encoding, done) {
        lines.push(chunk.toString());
        done();
      },
    });
    const ops = new OperationScheduler(
      new TestClock(),
      createLogger({ verbosity: 0, format: "json", destination }),
    );
    ops.schedule("provision-a", () =>
      Promise.reject(new Error("create failed", { cause: new Error("connection refused") })),
    );
    await ops.waitForCompletion();
    const line = lines.map((l) => JSON.parse(l) as Record<string, unknown>).find((l) => l.operationName);
    // pino's serializer keeps the stack and follows the cause chain into message and stack.
    const err = line?.err as { message?: string; stack?: string } | undefined;
    assert.equal(err?.message, "create failed: connection refused");
    assert.match(
      err?.stack ?? "",
      /pv-binder-controller\.test\.ts[\s\S]*caused by: Error: connection refused/,
    );
  });

  test("a failed operation backs off 500 ms doubling to 2m2s; a success forgets it", async () => {
    const clock = new TestClock();
    const ops = new OperationScheduler(clock, silentLogger);
    let runs = 0;
    let fail = true;
    const op = () => {
      runs++;
      return fail ? Promise.reject(new Error("boom")) : Promise.resolve();
    };
    const expectedBackoffs = [500, 1000, 2000, 4000, 8000, 16000, 32000, 64000, 122000, 122000];
    for (const backoff of expectedBackoffs) {
      const before = runs;
      ops.schedule("a", op);
      await ops.waitForCompletion();
      assert.equal(runs, before + 1);
      clock.advance(backoff);
      ops.schedule("a", op); // still within the backoff (upstream retries only once it has passed)
      await ops.waitForCompletion();
      assert.equal(runs, before + 1, `backoff ${backoff}`);
      clock.advance(1);
    }
    fail = false;
    ops.schedule("a", op);
    await ops.waitForCompletion();
    fail = true;
    ops.schedule("a", op);
    await ops.waitForCompletion();
    clock.advance(501);
    const before = runs;
    ops.schedule("a", op);
    await ops.waitForCompletion();
    assert.equal(runs, before + 1, "after a success the backoff starts over at 500 ms");
  });
});

describe("PV binder: the API adapter", () => {
  test("replaces with the object's resourceVersion and names the kind; keeps fields client-node lacks", async () => {
    const calls: [string, string, unknown][] = [];
    // The apiserver's answer: JSON, with a field client-node 2.0.1's models lack and a date.
    const answer = {
      metadata: { name: "c", namespace: "default", creationTimestamp: "2026-12-04T10:00:00Z" },
      status: { phase: "Bound", healthStatus: { abnormal: false } },
    };
    const request: JsonRequest = (method, path, opts) => {
      calls.push([method, path, opts?.body]);
      return Promise.resolve(structuredClone(answer));
    };
    const api = new CoreV1BinderApi(request);
    const volume = Object.freeze(newVolume("v", "1Gi", "", "", "Available", "Retain", ""));
    const claim = newClaim("c", "u", "1Gi", "", "Pending", undefined);
    await api.updateVolume(volume);
    await api.updateVolumeStatus(volume);
    await api.updateClaim(claim);
    const got = await api.updateClaimStatus(claim);
    await api.getClaim("default", "c");
    await api.deleteVolume("v");
    assert.deepEqual(calls[0], [
      "PUT",
      "/api/v1/persistentvolumes/v",
      Object.assign({}, volume, { apiVersion: "v1", kind: "PersistentVolume" }),
    ]);
    assert.equal((calls[1]?.[2] as V1PersistentVolume).metadata?.resourceVersion, "1");
    assert.deepEqual(
      calls[2]?.[2],
      Object.assign({}, claim, { apiVersion: "v1", kind: "PersistentVolumeClaim" }),
    );
    assert.deepEqual(
      calls.map(([method, path]) => `${method} ${path}`),
      [
        "PUT /api/v1/persistentvolumes/v",
        "PUT /api/v1/persistentvolumes/v/status",
        "PUT /api/v1/namespaces/default/persistentvolumeclaims/c",
        "PUT /api/v1/namespaces/default/persistentvolumeclaims/c/status",
        "GET /api/v1/namespaces/default/persistentvolumeclaims/c",
        "DELETE /api/v1/persistentvolumes/v",
      ],
    );
    // Decoded as client-node's models type it (a Date), nothing dropped.
    assert.deepEqual(got.metadata?.creationTimestamp, new Date("2026-12-04T10:00:00Z"));
    assert.deepEqual((got.status as Record<string, unknown>).healthStatus, { abnormal: false });
  });
});
