import assert from "node:assert/strict";
import { describe, test } from "node:test";
import type {
  V1LabelSelector,
  V1LabelSelectorRequirement,
  V1NodeSelectorTerm,
  V1ObjectMeta,
  V1ObjectReference,
  V1PersistentVolume,
  V1PersistentVolumeClaim,
  V1PersistentVolumeSpec,
  V1VolumeNodeAffinity,
} from "@kubernetes/client-node";
import fc from "fast-check";
import {
  BETA_STORAGE_CLASS_ANNOTATION,
  accessModesKey,
  checkAccessModes,
  checkNodeAffinity,
  compileLabelSelector,
  getClaimClass,
  getVolumeClass,
  isVolumeBoundToClaim,
  volumeCapacity,
  volumeModeMismatch,
  type LabelMatcher,
} from "../../src/persistentvolume/pv-helpers.js";
import { VolumeIndex, type MatchResult } from "../../src/persistentvolume/volume-index.js";
import { compareQuantities, ZERO_QUANTITY } from "../../src/util/quantity.js";
import * as oracle from "./matcher-reference.js";
import { goalMix, WAIT_FOR_FIRST_CONSUMER_CLASS } from "../../bench/matcher-mix.js";

const RWO = "ReadWriteOnce";
const ROX = "ReadOnlyMany";
const RWX = "ReadWriteMany";
const RWOP = "ReadWriteOncePod";

interface PVOptions {
  uid?: string | undefined;
  modes?: readonly string[] | undefined;
  storageClass?: string | undefined;
  betaClass?: string | undefined;
  claimRef?: V1ObjectReference | undefined;
  /** Default "Available"; null: no phase. */
  phase?: string | null | undefined;
  labels?: Record<string, string> | undefined;
  /** Default "Filesystem"; null: nil. */
  volumeMode?: string | null | undefined;
  vac?: string | undefined;
  nodeAffinity?: V1VolumeNodeAffinity | undefined;
  deleting?: boolean | undefined;
}

function makePV(name: string, capacity: string | undefined, o: PVOptions = {}): V1PersistentVolume {
  const metadata: V1ObjectMeta = { name };
  if (o.uid !== undefined) metadata.uid = o.uid;
  if (o.labels) metadata.labels = o.labels;
  if (o.betaClass !== undefined) metadata.annotations = { [BETA_STORAGE_CLASS_ANNOTATION]: o.betaClass };
  if (o.deleting) metadata.deletionTimestamp = new Date(0);
  const spec: V1PersistentVolumeSpec = { accessModes: [...(o.modes ?? [RWO, ROX])] };
  if (capacity !== undefined) spec.capacity = { storage: capacity };
  if (o.storageClass !== undefined) spec.storageClassName = o.storageClass;
  if (o.claimRef) spec.claimRef = o.claimRef;
  const volumeMode = o.volumeMode === undefined ? "Filesystem" : o.volumeMode;
  if (volumeMode !== null) spec.volumeMode = volumeMode;
  if (o.vac !== undefined) spec.volumeAttributesClassName = o.vac;
  if (o.nodeAffinity) spec.nodeAffinity = o.nodeAffinity;
  const phase = o.phase === undefined ? "Available" : o.phase;
  return { metadata, spec, status: phase === null ? {} : { phase } };
}

interface ClaimOptions {
  name?: string | undefined;
  namespace?: string | undefined;
  uid?: string | undefined;
  modes?: readonly string[] | undefined;
  storageClass?: string | undefined;
  betaClass?: string | undefined;
  selector?: V1LabelSelector | undefined;
  /** Default "Filesystem"; null: nil. */
  volumeMode?: string | null | undefined;
  vac?: string | undefined;
}

/** upstream makePVC: claim01 in myns, [ROX, RWO], Filesystem. */
function makeClaim(request: string | undefined, o: ClaimOptions = {}): V1PersistentVolumeClaim {
  const claim: V1PersistentVolumeClaim = {
    metadata: { name: o.name ?? "claim01", namespace: o.namespace ?? "myns" },
    spec: {
      accessModes: [...(o.modes ?? [ROX, RWO])],
      resources: request === undefined ? {} : { requests: { storage: request } },
    },
  };
  const { metadata, spec } = claim as Required<V1PersistentVolumeClaim>;
  if (o.uid !== undefined) metadata.uid = o.uid;
  if (o.betaClass !== undefined) metadata.annotations = { [BETA_STORAGE_CLASS_ANNOTATION]: o.betaClass };
  if (o.storageClass !== undefined) spec.storageClassName = o.storageClass;
  if (o.selector) spec.selector = o.selector;
  const volumeMode = o.volumeMode === undefined ? "Filesystem" : o.volumeMode;
  if (volumeMode !== null) spec.volumeMode = volumeMode;
  if (o.vac !== undefined) spec.volumeAttributesClassName = o.vac;
  return claim;
}

function indexOf(volumes: readonly V1PersistentVolume[]): VolumeIndex {
  const index = new VolumeIndex();
  for (const pv of volumes) index.add(pv);
  return index;
}

/** The matched PV's UID (upstream's tests identify volumes by UID), asserting no error. */
function matchUID(
  index: VolumeIndex,
  claim: V1PersistentVolumeClaim,
  delayBinding = false,
): string | undefined {
  const result = index.findBestMatch(claim, delayBinding);
  assert.equal(result.error, undefined);
  return result.volume?.metadata?.uid;
}

function matchName(
  index: VolumeIndex,
  claim: V1PersistentVolumeClaim,
  delayBinding = false,
): string | undefined {
  const result = index.findBestMatch(claim, delayBinding);
  assert.equal(result.error, undefined);
  return result.volume?.metadata?.name;
}

function nodeAffinity(key: string, value: string): V1VolumeNodeAffinity {
  return {
    required: { nodeSelectorTerms: [{ matchExpressions: [{ key, operator: "In", values: [value] }] }] },
  };
}

/** index_test.go createTestVolumes(), deliberately out of order. */
function createTestVolumes(): V1PersistentVolume[] {
  const all = [RWO, ROX, RWX];
  const wait = { storageClass: "wait" };
  return [
    makePV("gce003", "10G", { uid: "gce-pd-10" }),
    makePV("gce004", "20G", { uid: "gce-pd-20", claimRef: { uid: "def456" }, phase: "Bound" }),
    makePV("nfs002", "5G", { uid: "nfs-5", modes: all }),
    makePV("gce001", "1G", { uid: "gce-pd-1", claimRef: { uid: "abc123" }, phase: "Bound" }),
    makePV("nfs003", "10G", { uid: "nfs-10", modes: all }),
    makePV("gce002", "5G", { uid: "gce-pd-5" }),
    makePV("nfs001", "1G", { uid: "nfs-1", modes: all }),
    makePV("gce0022", "20000G", { uid: "gce-pd-2", modes: [RWO], labels: { "should-exist": "true" } }),
    makePV("gce0023", "10000G", {
      uid: "gce-pd-silver1",
      modes: [RWO],
      labels: { "should-exist": "true" },
      storageClass: "silver",
    }),
    makePV("gce0024", "100G", { uid: "gce-pd-silver2", modes: [RWO], storageClass: "silver" }),
    makePV("gce0025", "50G", { uid: "gce-pd-gold", modes: [RWO], storageClass: "gold" }),
    makePV("local001", "200E", { uid: "local-pd-very-large", modes: all, storageClass: "large" }),
    makePV("local002", "800E", { uid: "local-pd-extremely-large", modes: all, storageClass: "large" }),
    makePV("affinity001", "100G", {
      uid: "affinity-pv",
      ...wait,
      nodeAffinity: nodeAffinity("key1", "value1"),
    }),
    makePV("affinity002", "150G", {
      uid: "affinity-pv2",
      ...wait,
      nodeAffinity: nodeAffinity("key1", "value1"),
    }),
    makePV("affinity003", "100G", {
      uid: "affinity-prebound",
      ...wait,
      claimRef: { name: "claim02", namespace: "myns" },
      nodeAffinity: nodeAffinity("key1", "value1"),
    }),
    // Upstream reuses the name affinity003: the indexer keeps only this one, as add() does.
    makePV("affinity003", "200G", {
      uid: "affinity-pv3",
      ...wait,
      nodeAffinity: nodeAffinity("key1", "value3"),
    }),
    ...(["Pending", "Failed", "Released", null] as const).map((phase) =>
      makePV(`affinity004-${phase?.toLowerCase() ?? "empty"}`, "200G", {
        uid: `affinity-pv4-${phase?.toLowerCase() ?? "empty"}`,
        ...wait,
        phase,
        nodeAffinity: nodeAffinity("key1", "value4"),
      }),
    ),
    makePV("gce-pd-vac-silver1", "100G", { uid: "gce-pd-vac-silver1", vac: "silver" }),
  ];
}

describe("index_test.go", () => {
  const shouldExist = { matchLabels: { "should-exist": "true" } };
  const rows: [name: string, claim: V1PersistentVolumeClaim, expected: string | undefined][] = [
    ["successful-match-gce-10", makeClaim("8G"), "gce-pd-10"],
    ["successful-match-nfs-5", makeClaim("5G", { modes: [ROX, RWO, RWX] }), "nfs-5"],
    ["successful-skip-1g-bound-volume", makeClaim("1G"), "gce-pd-5"],
    ["successful-no-match", makeClaim("999G"), undefined],
    [
      "successful-no-match-due-to-label",
      makeClaim("999G", { selector: { matchLabels: { "should-not-exist": "true" } } }),
      undefined,
    ],
    [
      "successful-no-match-due-to-size-constraint-with-label-selector",
      makeClaim("20000G", { selector: shouldExist, modes: [ROX, RWO] }),
      undefined,
    ],
    [
      "successful-match-due-with-constraint-and-label-selector",
      makeClaim("20000G", { selector: shouldExist, modes: [RWO] }),
      "gce-pd-2",
    ],
    ["successful-match-with-empty-vac", makeClaim("8G", { vac: "" }), "gce-pd-10"],
    ["successful-match-with-vac", makeClaim("1G", { vac: "silver" }), "gce-pd-vac-silver1"],
    ["successful-no-match-vac-nonexisting", makeClaim("1G", { vac: "non-existing" }), undefined],
    [
      "successful-match-with-class",
      makeClaim("1G", { selector: shouldExist, modes: [RWO], storageClass: "silver" }),
      "gce-pd-silver1",
    ],
    [
      "successful-match-with-class-and-labels",
      makeClaim("1G", { modes: [RWO], storageClass: "silver" }),
      "gce-pd-silver2",
    ],
    [
      "successful-match-very-large",
      makeClaim("1E", { modes: [RWO], storageClass: "large" }),
      "local-pd-very-large",
    ],
    [
      "successful-match-exact-extremely-large",
      makeClaim("800E", { modes: [RWO], storageClass: "large" }),
      "local-pd-extremely-large",
    ],
    [
      "successful-no-match-way-too-large",
      makeClaim("950E", { modes: [RWO], storageClass: "large" }),
      undefined,
    ],
  ];
  const index = indexOf(createTestVolumes());
  for (const [name, claim, expected] of rows) {
    test(`TestMatchVolume ${name}`, () => {
      assert.equal(matchUID(index, claim), expected);
      assert.equal(
        oracle.findBestMatchLinear(claim, oracle.bucketByAccessModes(index.list()), false).volume?.metadata
          ?.uid,
        expected,
      );
    });
  }

  test("TestMatchingWithBoundVolumes: of two 1G PVs the unbound one", () => {
    const bound = makePV("gce001", "1G", { uid: "gce-pd-1", claimRef: { uid: "abc123" }, phase: "Bound" });
    const unbound = makePV("gce002", "1G", { uid: "gce-pd-2" });
    assert.equal(matchName(indexOf([bound, unbound]), makeClaim("1G")), "gce002");
  });

  test("TestListByAccessModes: buckets by accessModesKey, by capacity", () => {
    const volumes = indexOf(createTestVolumes()).list();
    const bucket = (key: string): (string | undefined)[] =>
      volumes
        .filter((pv) => accessModesKey(pv.spec?.accessModes) === key)
        .sort((a, b) =>
          compareQuantities(volumeCapacity(a) ?? ZERO_QUANTITY, volumeCapacity(b) ?? ZERO_QUANTITY),
        )
        .map((pv) => pv.metadata?.uid);
    assert.deepEqual(bucket("RWO,ROX").slice(0, 3), ["gce-pd-1", "gce-pd-5", "gce-pd-10"]);
    assert.deepEqual(bucket("RWO,ROX,RWX"), [
      "nfs-1",
      "nfs-5",
      "nfs-10",
      "local-pd-very-large",
      "local-pd-extremely-large",
    ]);
  });

  test("TestAllPossibleAccessModes: RWO is in 3 buckets, RWX in 1", () => {
    const keys = new Set(
      indexOf(createTestVolumes())
        .list()
        .map((pv) => accessModesKey(pv.spec?.accessModes)),
    );
    assert.deepEqual([...keys].filter((key) => key.split(",").includes("RWO")).sort(), [
      "RWO",
      "RWO,ROX",
      "RWO,ROX,RWX",
    ]);
    assert.deepEqual(
      [...keys].filter((key) => key.split(",").includes("RWX")),
      ["RWO,ROX,RWX"],
    );
  });

  test("TestFindingVolumeWithDifferentAccessModes: fewest modes first, then up the levels", () => {
    const gce = makePV("gce", "10G", { modes: [RWO, ROX] });
    const ebs = makePV("ebs", "10G", { modes: [RWO] });
    const nfs = makePV("nfs", "10G", { modes: [RWO, ROX, RWX] });
    const index = indexOf([gce, ebs, nfs]);
    const claim = (modes: string[]): V1PersistentVolumeClaim => makeClaim("1G", { modes });
    assert.equal(matchName(index, claim([RWO])), "ebs");
    assert.equal(matchName(index, claim([RWO, ROX])), "gce");
    assert.equal(
      matchName(index, claim([RWX, RWO, ROX])),
      "nfs",
      "order of the requested modes does not matter",
    );
    assert.equal(matchName(index, claim([RWX])), "nfs", "fewer modes requested still match");
    index.add(makePV("ebs", "10G", { modes: [RWO], claimRef: {} }));
    assert.equal(matchName(index, claim([RWO])), "gce", "exact match bound: next level up");
    index.add(makePV("gce", "10G", { modes: [RWO, ROX], claimRef: {} }));
    assert.equal(matchName(index, claim([RWO])), "nfs");
    index.add(gce);
    assert.equal(matchName(index, claim([ROX])), "gce", "partial mode request");
  });

  const fsPV = makePV("block", "10G", { uid: "local-1", modes: [RWO] });
  const blockPV = makePV("block", "10G", { uid: "local-1", modes: [RWO], volumeMode: "Block" });
  const nilPV = makePV("nil-mode", "10G", { uid: "local-1", modes: [RWO], volumeMode: null });
  const modeClaim = (volumeMode: string | null): V1PersistentVolumeClaim =>
    makeClaim("8G", { modes: [RWO], volumeMode });
  const modeRows: [string, V1PersistentVolume, string | null, boolean][] = [
    ["pvc block and pv filesystem", fsPV, "Block", true],
    ["pvc filesystem and pv block", blockPV, "Filesystem", true],
    ["pvc block and pv block", blockPV, "Block", false],
    ["pvc filesystem and pv filesystem", fsPV, "Filesystem", false],
    ["pvc filesystem and pv nil", nilPV, "Filesystem", false],
    ["pvc nil and pv filesystem", fsPV, null, false],
    ["pvc nil and pv nil", nilPV, null, false],
    ["pvc nil and pv block", blockPV, null, true],
    ["pvc block and pv nil", nilPV, "Block", true],
  ];
  for (const [name, pv, mode, mismatch] of modeRows) {
    test(`TestVolumeModeCheck ${name}`, () => {
      assert.equal(volumeModeMismatch(modeClaim(mode).spec, pv.spec), mismatch);
    });
    test(`TestFilteringVolumeModes ${name}`, () => {
      assert.equal(matchName(indexOf([pv]), modeClaim(mode)) !== undefined, !mismatch);
    });
  }

  test("TestStorageObjectInUseProtectionFiltering: a PV being deleted never matches", () => {
    const claim = makeClaim("1G", { name: "pvc1", modes: [RWO] });
    assert.equal(matchName(indexOf([makePV("pv1", "1G", { modes: [RWO] })]), claim), "pv1");
    assert.equal(
      matchName(indexOf([makePV("pv1", "1G", { modes: [RWO], deleting: true })]), claim),
      undefined,
    );
    const prebound = { name: "pvc1", namespace: "myns" };
    assert.equal(
      matchName(indexOf([makePV("pv1", "1G", { modes: [RWO], deleting: true, claimRef: prebound })]), claim),
      undefined,
      "not even when pre-bound",
    );
  });

  test("TestFindingPreboundVolumes", () => {
    const claim = makeClaim("1Gi", { modes: [RWO] });
    const claimRef = { kind: "PersistentVolumeClaim", apiVersion: "v1", name: "claim01", namespace: "myns" };
    const pv = (name: string, size: string, o: PVOptions = {}): V1PersistentVolume =>
      makePV(name, size, { modes: [RWO], ...o });
    const index = indexOf([pv("pv1", "1Gi"), pv("pv5", "5Gi"), pv("pv8", "8Gi"), pv("pvBadSize", "1Mi")]);
    index.add(pv("pvBadMode", "1Gi", { modes: [ROX] }));
    assert.equal(matchName(index, claim), "pv1", "exact match on size");
    index.add(pv("pv1", "1Gi", { claimRef: { name: "foo", namespace: "bar" } }));
    assert.equal(matchName(index, claim), "pv5", "exact match pre-bound elsewhere: next size up");
    index.add(pv("pv1", "1Gi"));
    index.add(pv("pv8", "8Gi", { claimRef }));
    assert.equal(matchName(index, claim), "pv8", "the largest, pre-bound to the claim, wins");
    index.add(pv("pv8", "8Gi"));
    index.add(pv("pvBadSize", "1Mi", { claimRef }));
    assert.equal(matchName(index, claim), "pv1", "a pre-bound PV too small is ignored");
    index.add(pv("pvBadSize", "1Mi"));
    index.add(pv("pvBadMode", "1Gi", { modes: [ROX], claimRef }));
    assert.equal(matchName(index, claim), "pv1", "a pre-bound PV without the mode is ignored");
  });

  test("TestBestMatchDelayed: delayBinding leaves unbound PVs to the scheduler", () => {
    assert.equal(matchUID(indexOf(createTestVolumes()), makeClaim("8G"), true), undefined);
  });

  const checkRows: [string, string[], boolean][] = [
    ["success-single-mode", [RWX], true],
    ["success-many-modes", [RWX, RWO], true],
    ["fail-single-mode", [ROX], false],
    ["fail-many-modes", [RWX, ROX], false],
  ];
  for (const [name, modes, ok] of checkRows) {
    test(`TestCheckAccessModes ${name}`, () => {
      assert.equal(
        checkAccessModes(makeClaim("100G", { modes }), makePV("pv", "1G", { modes: [RWO, RWX] })),
        ok,
      );
    });
  }
});

describe("pre-bound volumes and bucket order", () => {
  const prebound = { name: "claim01", namespace: "myns" };
  const claim = makeClaim("1Gi", { modes: [RWO], uid: "u1", storageClass: "gold" });

  test("in its bucket a pre-bound PV wins, ignoring phase, class and selector; an earlier bucket wins first", () => {
    const index = indexOf([
      makePV("small", "1Gi", { modes: [RWO, ROX], storageClass: "gold" }),
      makePV("big", "100Gi", { modes: [RWO, ROX], claimRef: prebound, phase: "Pending" }),
    ]);
    assert.equal(matchName(index, claim), "big");
    assert.equal(matchName(index, claim, true), "big", "delayBinding still returns pre-bound volumes");
    index.add(makePV("rwo-only", "50Gi", { modes: [RWO], storageClass: "gold" }));
    assert.equal(matchName(index, claim), "rwo-only", "upstream: the first bucket with any match wins");
    assert.equal(matchName(index, claim, true), "big");
  });

  test("several pre-bound PVs: earliest bucket, then smallest name; a different UID is not this claim", () => {
    const index = indexOf([
      makePV("pb-c", "5Gi", { modes: [RWO, ROX], claimRef: prebound }),
      makePV("pb-b", "5Gi", { modes: [RWO, ROX], claimRef: { ...prebound, uid: "u1" } }),
      makePV("pb-a", "5Gi", { modes: [RWO, ROX], claimRef: { ...prebound, uid: "u2" } }),
      makePV("pb-z", "5Gi", { modes: [RWO, ROX, RWX], claimRef: prebound }),
    ]);
    assert.equal(matchName(index, claim), "pb-b");
    index.delete("pb-b");
    index.delete("pb-c");
    assert.equal(matchName(index, claim), "pb-z");
  });

  test("buckets with as many modes are visited in accessModesKey order (upstream: map order)", () => {
    const index = indexOf([
      makePV("rwx", "1Gi", { modes: [RWO, RWX], storageClass: "gold" }),
      makePV("rox", "10Gi", { modes: [RWO, ROX], storageClass: "gold" }),
    ]);
    assert.equal(matchName(index, claim), "rox", '"RWO,ROX" < "RWO,RWX"');
  });
});

describe("findTurningAvailable (not upstream)", () => {
  const claim = makeClaim("2G", { modes: [RWO] });
  const name = (index: VolumeIndex, excluded?: (name: string) => boolean) =>
    index.findTurningAvailable(claim, excluded)?.metadata?.name;

  test("the smallest unbound volume that fits, in any phase but Available", () => {
    for (const phase of ["Pending", "Released", "Failed", null]) {
      const index = indexOf([
        makePV("big", "5G", { phase }),
        makePV("fits", "2G", { phase }),
        makePV("small", "1G", { phase }),
      ]);
      assert.equal(name(index), "fits", `phase ${phase}`);
      assert.equal(
        name(index, (n) => n === "fits"),
        "big",
        `phase ${phase}, "fits" excluded`,
      );
    }
  });

  test("never an Available, bound, deleting or mismatched volume", () => {
    const ref = { name: "other", namespace: "myns", uid: "u" };
    const index = indexOf([
      makePV("available", "2G"),
      makePV("bound", "2G", { phase: "Bound", claimRef: ref }),
      makePV("deleting", "2G", { phase: "Pending", deleting: true }),
      makePV("gold", "2G", { phase: "Pending", storageClass: "gold" }),
      makePV("rox", "2G", { phase: "Pending", modes: [ROX] }),
    ]);
    assert.equal(name(index), undefined);
    assert.equal(index.findBestMatch(claim, false).volume?.metadata?.name, "available");
    // Its sync made it Available: it leaves the turning group for the Available one.
    index.add(makePV("pending", "2G", { phase: "Pending" }));
    assert.equal(name(index), "pending");
    index.add(makePV("pending", "2G"));
    assert.equal(name(index), undefined);
  });
});

describe("pv_helpers_test.go TestFindMatchVolumeWithNode, controller path (node nil)", () => {
  // Rows about node affinity and exclusion are scheduler-only; VAC-off rows do not apply (gate on).
  const volumes = (vac?: string): V1PersistentVolume[] => {
    const wait = { storageClass: "wait", vac, nodeAffinity: nodeAffinity("key1", "value1") };
    return [
      makePV("local001", "5G", { uid: "local-small", vac }),
      makePV("local002", "200E", { uid: "local-pd-very-large", storageClass: "large", vac }),
      makePV("affinity001", "100G", { uid: "affinity-pv", ...wait }),
      makePV("affinity002", "150G", { uid: "affinity-pv2", ...wait }),
      makePV("affinity003", "100G", {
        uid: "affinity-prebound",
        ...wait,
        claimRef: { name: "claim02", namespace: "myns" },
      }),
      // Upstream's slice has a second "affinity003"; an index keyed by name cannot, so it is renamed.
      makePV("affinity003b", "200G", { uid: "affinity-pv3", ...wait }),
      makePV("affinity004", "200G", { uid: "affinity-pv4", ...wait, phase: null }),
    ];
  };
  const claim = (name: string, modes: string[], vac?: string): V1PersistentVolumeClaim =>
    makeClaim("100G", { name, modes, storageClass: "wait", vac });
  const rows: [string, V1PersistentVolume[], V1PersistentVolumeClaim, boolean, string | undefined][] = [
    ["success-match, delayed", volumes(), claim("claim01", [RWO]), true, undefined],
    ["success-match, immediate", volumes(), claim("claim01", [RWO]), false, "affinity-pv"],
    ["success-prebound, delayed", volumes(), claim("claim02", [RWO]), true, "affinity-prebound"],
    ["success-prebound, immediate", volumes(), claim("claim02", [RWO]), false, "affinity-prebound"],
    ["fail-accessmode", volumes(), claim("claim01", [RWX]), false, undefined],
    [
      "fail-nonavaliable: the phase-less PV is skipped",
      volumes(),
      claim("claim04", [RWO]),
      false,
      "affinity-pv",
    ],
    ["success-match-with-vac", volumes("gold"), claim("claim01", [RWO], "gold"), false, "affinity-pv"],
    ["fail-vac", volumes(), claim("claim01", [RWO], "silver"), false, undefined],
    ["fail-prebound-vac, delayed", volumes("gold"), claim("claim02", [RWO], "silver"), true, undefined],
    ["fail-prebound-vac, immediate", volumes("gold"), claim("claim02", [RWO], "silver"), false, undefined],
  ];
  for (const [name, pvs, pvc, delayBinding, expected] of rows) {
    test(name, () => {
      assert.equal(matchUID(indexOf(pvs), pvc, delayBinding), expected);
    });
  }
});

describe("helpers_test.go TestCheckVolumeNodeAffinity", () => {
  const labels = { "test-key1": "test-value1", "test-key2": "test-value2" };
  const term = (...exprs: [string, string[]][]): V1NodeSelectorTerm => ({
    matchExpressions: exprs.map(([key, values]) => ({ key, operator: "In", values })),
  });
  const rows: [string, V1VolumeNodeAffinity | undefined, boolean][] = [
    ["valid-nil", undefined, true],
    ["valid-no-constraints", {}, true],
    ["select-nothing", { required: { nodeSelectorTerms: [] } }, false],
    ["select-nothing-empty-terms", { required: { nodeSelectorTerms: [{ matchExpressions: [] }] } }, false],
    [
      "valid-multiple-terms",
      {
        required: {
          nodeSelectorTerms: [
            term(["test-key3", ["test-value1", "test-value3"]]),
            term(["test-key2", ["test-value0", "test-value2"]]),
          ],
        },
      },
      true,
    ],
    [
      "valid-multiple-match-expressions",
      {
        required: {
          nodeSelectorTerms: [
            term(
              ["test-key1", ["test-value1", "test-value3"]],
              ["test-key2", ["test-value0", "test-value2"]],
            ),
          ],
        },
      },
      true,
    ],
    [
      "invalid-multiple-match-expressions-key",
      {
        required: {
          nodeSelectorTerms: [
            term(
              ["test-key1", ["test-value1", "test-value3"]],
              ["test-key3", ["test-value0", "test-value2"]],
            ),
          ],
        },
      },
      false,
    ],
    [
      "invalid-multiple-match-expressions-values",
      {
        required: {
          nodeSelectorTerms: [
            term(
              ["test-key1", ["test-value3", "test-value4"]],
              ["test-key2", ["test-value0", "test-value2"]],
            ),
          ],
        },
      },
      false,
    ],
    [
      "invalid-multiple-terms",
      {
        required: {
          nodeSelectorTerms: [
            term(["test-key3", ["test-value1", "test-value3"]]),
            term(["test-key2", ["test-value0", "test-value1"]]),
          ],
        },
      },
      false,
    ],
  ];
  for (const [name, affinity, ok] of rows) {
    test(name, () => {
      const error = checkNodeAffinity(makePV("test-constraints", "1G", { nodeAffinity: affinity }), labels);
      assert.equal(error === undefined, ok, error?.message);
      if (!ok) assert.equal(error?.message, "no matching NodeSelectorTerms");
    });
  }

  test("Gt/Lt compare integers; matchFields never constrain a label-only node", () => {
    const affinity = (operator: string, values: string[]): V1PersistentVolume =>
      makePV("pv", "1G", {
        nodeAffinity: {
          required: { nodeSelectorTerms: [{ matchExpressions: [{ key: "cpus", operator, values }] }] },
        },
      });
    assert.equal(checkNodeAffinity(affinity("Gt", ["8"]), { cpus: "16" }), undefined);
    assert.ok(checkNodeAffinity(affinity("Gt", ["8"]), { cpus: "4" }));
    assert.ok(checkNodeAffinity(affinity("Lt", ["8"]), { cpus: "x" }));
    assert.equal(checkNodeAffinity(affinity("Lt", ["8"]), { cpus: "-3" }), undefined);
    const byName = makePV("pv", "1G", {
      nodeAffinity: {
        required: {
          nodeSelectorTerms: [{ matchFields: [{ key: "metadata.name", operator: "In", values: ["n1"] }] }],
        },
      },
    });
    assert.equal(checkNodeAffinity(byName, {}), undefined);
  });

  test("parse errors carry upstream's field paths, reported only when no term matches", () => {
    const pv = (terms: V1NodeSelectorTerm[]): V1PersistentVolume =>
      makePV("pv", "1G", { nodeAffinity: { required: { nodeSelectorTerms: terms } } });
    const bad: V1NodeSelectorTerm[] = [
      { matchExpressions: [{ key: "k", operator: "Equals", values: ["v"] }] },
      { matchExpressions: [{ key: "k", operator: "Gt", values: ["abc"] }] },
      { matchFields: [{ key: "metadata.name", operator: "Exists" }] },
    ];
    assert.equal(
      checkNodeAffinity(pv(bad), { k: "v" })?.message,
      '[nodeSelectorTerms[0].matchExpressions[0].operator: Unsupported value: "Equals": supported values: "In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt", ' +
        "nodeSelectorTerms[1].matchExpressions[0].values[0]: Invalid value: \"abc\": for 'Gt', 'Lt' operators, the value must be an integer, " +
        'nodeSelectorTerms[2].matchFields[0].operator: Unsupported value: "Exists": supported values: "In", "NotIn"]',
    );
    assert.equal(
      checkNodeAffinity(pv([{ matchExpressions: [{ key: "k", operator: "In" }] }]), {})?.message,
      "nodeSelectorTerms[0].matchExpressions[0].values: Invalid value: null: for 'in', 'notin' operators, values set can't be empty",
    );
    assert.equal(
      checkNodeAffinity(pv([...bad, { matchExpressions: [{ key: "k", operator: "Exists" }] }]), { k: "v" }),
      undefined,
    );
    const noTerms = makePV("pv", "1G", { nodeAffinity: { required: {} as { nodeSelectorTerms: [] } } });
    assert.equal(checkNodeAffinity(noTerms, {})?.message, "no matching NodeSelectorTerms");
  });
});

describe("pv-helpers", () => {
  test("class: the beta annotation wins, even empty; nil and missing read as empty", () => {
    assert.equal(getClaimClass(makeClaim("1G")), "");
    assert.equal(getClaimClass(makeClaim("1G", { storageClass: "gold" })), "gold");
    assert.equal(getClaimClass(makeClaim("1G", { storageClass: "gold", betaClass: "" })), "");
    assert.equal(getClaimClass(makeClaim("1G", { storageClass: "gold", betaClass: "silver" })), "silver");
    assert.equal(getClaimClass({}), "");
    assert.equal(getVolumeClass(makePV("pv", "1G")), "");
    assert.equal(getVolumeClass(makePV("pv", "1G", { storageClass: "gold", betaClass: "silver" })), "silver");
    assert.equal(getVolumeClass({}), "");
  });

  test("isVolumeBoundToClaim: name and namespace, and the UID when the claimRef has one", () => {
    const claim = makeClaim("1G", { uid: "u1" });
    const bound = (claimRef?: V1ObjectReference): boolean =>
      isVolumeBoundToClaim(makePV("pv", "1G", { claimRef }), claim);
    assert.equal(bound(), false);
    assert.equal(bound({ name: "claim01", namespace: "myns" }), true);
    assert.equal(bound({ name: "claim01", namespace: "myns", uid: "" }), true);
    assert.equal(bound({ name: "claim01", namespace: "myns", uid: "u1" }), true);
    assert.equal(bound({ name: "claim01", namespace: "myns", uid: "u2" }), false);
    assert.equal(bound({ name: "claim01", namespace: "other" }), false);
    assert.equal(bound({ name: "other", namespace: "myns" }), false);
    assert.equal(bound({}), false);
  });

  test("accessModesKey: canonical order, deduplicated, unknown modes dropped", () => {
    assert.equal(accessModesKey([RWOP, RWX, ROX, RWO]), "RWO,ROX,RWX,RWOP");
    assert.equal(accessModesKey([ROX, RWO, ROX]), "RWO,ROX");
    assert.equal(accessModesKey([RWO, "Bogus"]), "RWO");
    assert.equal(accessModesKey([]), "");
    assert.equal(accessModesKey(undefined), "");
  });

  test("label selectors: upstream operator semantics", () => {
    const matcher = (selector: V1LabelSelector | undefined): LabelMatcher => {
      const compiled = compileLabelSelector(selector);
      assert.ok(!(compiled instanceof Error), String(compiled));
      return compiled;
    };
    const expr = (key: string, operator: string, values?: string[]): V1LabelSelectorRequirement =>
      values ? { key, operator, values } : { key, operator };
    const gold = { tier: "gold" };
    assert.ok(matcher(undefined)(undefined), "no selector matches everything");
    assert.ok(matcher({})(gold), "{} matches everything");
    assert.ok(matcher({ matchLabels: {}, matchExpressions: [] })(undefined));
    assert.ok(matcher({ matchLabels: gold })(gold));
    assert.ok(!matcher({ matchLabels: gold })({ tier: "silver" }));
    assert.ok(!matcher({ matchLabels: gold })(undefined));
    assert.ok(matcher({ matchExpressions: [expr("tier", "In", ["gold", "x"])] })(gold));
    assert.ok(!matcher({ matchExpressions: [expr("tier", "In", ["x"])] })(gold));
    assert.ok(matcher({ matchExpressions: [expr("tier", "NotIn", ["x"])] })(gold));
    assert.ok(
      matcher({ matchExpressions: [expr("tier", "NotIn", ["x"])] })({}),
      "NotIn matches a missing key",
    );
    assert.ok(!matcher({ matchExpressions: [expr("tier", "NotIn", ["gold"])] })(gold));
    assert.ok(matcher({ matchExpressions: [expr("tier", "Exists")] })(gold));
    assert.ok(!matcher({ matchExpressions: [expr("tier", "DoesNotExist")] })(gold));
    assert.ok(!matcher({ matchExpressions: [expr("constructor", "Exists")] })({}), "own labels only");
    const both = matcher({ matchLabels: gold, matchExpressions: [expr("zone", "Exists")] });
    assert.ok(both({ tier: "gold", zone: "a" }));
    assert.ok(!both(gold), "requirements are ANDed");
  });

  test("label selectors: invalid operators, values and keys give upstream's messages", () => {
    const message = (selector: V1LabelSelector): string | undefined => {
      const compiled = compileLabelSelector(selector);
      return compiled instanceof Error ? compiled.message : undefined;
    };
    const keyRule =
      "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character " +
      "(e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";
    assert.equal(
      message({ matchExpressions: [{ key: "tier", operator: "Equals", values: ["a"] }] }),
      '"Equals" is not a valid label selector operator',
    );
    assert.equal(
      message({ matchExpressions: [{ key: "tier", operator: "In", values: [] }] }),
      "values: Invalid value: null: for 'in', 'notin' operators, values set can't be empty",
    );
    assert.equal(
      message({ matchExpressions: [{ key: "tier", operator: "Exists", values: ["x"] }] }),
      'values: Invalid value: ["x"]: values set must be empty for exists and does not exist',
    );
    assert.equal(message({ matchLabels: { "bad key": "x" } }), `key: Invalid value: "bad key": ${keyRule}`);
    assert.equal(
      message({ matchLabels: { "a/b/c": "x" } }),
      "key: Invalid value: \"a/b/c\": a valid label key must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character " +
        "(e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
    );
    assert.equal(
      message({ matchLabels: { "/x": "x" } }),
      'key: Invalid value: "/x": prefix part must be non-empty',
    );
    assert.equal(
      message({ matchExpressions: [{ key: "", operator: "In" }] }),
      `[key: Invalid value: "": name part must be non-empty; ${keyRule}, values: Invalid value: null: for 'in', 'notin' operators, values set can't be empty]`,
    );
    assert.equal(
      message({ matchLabels: { tier: "-x" } }),
      "values[0][tier]: Invalid value: \"-x\": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character " +
        "(e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')",
    );
    assert.equal(
      message({ matchLabels: { "example.com/tier": "" } }),
      undefined,
      "prefixed keys and empty values are valid",
    );
  });
});

describe("bad input: no throw, a clear error", () => {
  const ok = makePV("ok", "1Gi", { modes: [RWO] });
  const claim = (o: ClaimOptions & { request?: string | undefined } = {}): V1PersistentVolumeClaim =>
    makeClaim("request" in o ? o.request : "1Gi", { modes: [RWO], ...o });
  const errorOf = (index: VolumeIndex, pvc: V1PersistentVolumeClaim): string | undefined => {
    let result: MatchResult = {};
    assert.doesNotThrow(() => (result = index.findBestMatch(pvc, false)));
    assert.equal(result.volume, undefined);
    return result.error;
  };

  test("a PV without a valid capacity is stored, reported and never matched", () => {
    const index = new VolumeIndex();
    assert.match(
      index.add(makePV("missing", undefined, { modes: [RWO] })) ?? "",
      /missing has no valid spec\.capacity\.storage \(missing\)/,
    );
    assert.match(
      index.add(makePV("bad", "lots", { modes: [RWO] })) ?? "",
      /bad has no valid spec\.capacity\.storage \("lots"\)/,
    );
    const prebound = { name: "claim01", namespace: "myns" };
    assert.ok(index.add(makePV("bad-prebound", "??", { modes: [RWO], claimRef: prebound })));
    assert.equal(index.size, 3);
    assert.equal(matchName(index, claim({ request: "0" })), undefined);
    assert.equal(index.add(ok), undefined);
    assert.equal(matchName(index, claim({ request: "0" })), "ok");
  });

  test("a claim without a valid storage request is an error", () => {
    const index = indexOf([ok]);
    assert.equal(
      errorOf(index, claim({ request: undefined })),
      "claim myns/claim01 has no valid spec.resources.requests.storage (missing)",
    );
    assert.equal(
      errorOf(index, claim({ request: "1 gigabyte" })),
      'claim myns/claim01 has no valid spec.resources.requests.storage ("1 gigabyte")',
    );
  });

  test("unknown access modes: an error on a claim, ignored on a PV (as upstream's index key)", () => {
    const index = new VolumeIndex();
    assert.match(
      index.add(makePV("odd", "1Gi", { modes: [RWO, "Bogus"] })) ?? "",
      /unsupported access modes Bogus/,
    );
    assert.equal(
      errorOf(index, claim({ modes: [RWO, "ReadWriteSometimes"] })),
      "claim myns/claim01 requests unsupported access modes ReadWriteSometimes",
    );
    assert.equal(matchName(index, claim()), "odd");
  });

  test("invalid selectors are upstream's error; empty selectors match everything", () => {
    const labelled = makePV("labelled", "1Gi", { modes: [RWO], labels: { tier: "gold" } });
    const index = indexOf([labelled, makePV("plain", "1Gi", { modes: [RWO] })]);
    assert.equal(
      errorOf(index, claim({ selector: { matchExpressions: [{ key: "tier", operator: "Bogus" }] } })),
      'error creating internal label selector for claim: myns/claim01: "Bogus" is not a valid label selector operator',
    );
    assert.equal(
      errorOf(index, claim({ selector: { matchExpressions: [{ key: "tier", operator: "NotIn" }] } })),
      "error creating internal label selector for claim: myns/claim01: values: Invalid value: null: for 'in', 'notin' operators, values set can't be empty",
    );
    assert.equal(matchName(index, claim({ selector: {} })), "labelled", "{} matches; equal sizes go by name");
    assert.equal(
      matchName(
        index,
        claim({ selector: { matchExpressions: [{ key: "tier", operator: "DoesNotExist" }] } }),
      ),
      "plain",
    );
  });

  test("objects missing whole sections", () => {
    const index = new VolumeIndex();
    assert.match(index.add({}) ?? "", /without metadata\.name/);
    assert.equal(index.size, 0);
    assert.ok(index.add({ metadata: { name: "bare" } }));
    assert.match(errorOf(index, {}) ?? "", /claim \/ has no valid/);
    assert.equal(index.delete("bare"), true);
    assert.equal(index.delete("bare"), false);
    assert.equal(index.size, 0);
  });
});

describe("VolumeIndex agrees with the linear oracle", () => {
  const SIZES = ["1Gi", "1024Mi", "1073741824", "1.5Gi", "2Gi", "2G", "5Gi", "10G", "10Gi", "100Gi", "1Ti"];
  const often = <T, U>(usual: fc.Arbitrary<T>, rare: fc.Arbitrary<U>, weight = 10): fc.Arbitrary<T | U> =>
    fc.oneof({ weight, arbitrary: usual }, { weight: 1, arbitrary: rare });
  const quantity = often(fc.constantFrom(...SIZES), fc.constantFrom(undefined, "lots", ""), 30);
  const storageClass = fc.constantFrom(undefined, "", "gold", "silver");
  const betaClass = often(fc.constant(undefined), fc.constantFrom("", "gold", "silver"), 5);
  const volumeMode = fc.constantFrom(null, "Filesystem", "Block");
  const vac = fc.constantFrom(undefined, "", "fast");
  const pvModes = often(
    fc.constantFrom(
      [RWO],
      [RWO, ROX],
      [ROX, RWO],
      [RWO, ROX, RWX],
      [RWX],
      [RWO, RWOP],
      [RWO, RWX],
      [RWO, RWO],
    ),
    fc.array(fc.constantFrom(RWO, ROX, RWX, RWOP, "Bogus"), { maxLength: 4 }),
    4,
  );
  const claimRef = often(
    fc.constant(undefined),
    fc.constantFrom<V1ObjectReference>(
      { name: "claim", namespace: "ns" },
      { name: "claim", namespace: "ns", uid: "" },
      { name: "claim", namespace: "ns", uid: "uid-1" },
      { name: "claim", namespace: "ns", uid: "uid-2" },
      { name: "other", namespace: "ns" },
      { name: "claim", namespace: "other" },
      {},
    ),
    4,
  );
  const labels = fc.record(
    { tier: fc.constantFrom("gold", "silver"), zone: fc.constantFrom("a", "b") },
    { requiredKeys: [] },
  );
  const pvArbitrary = (name: fc.Arbitrary<string>): fc.Arbitrary<V1PersistentVolume> =>
    fc
      .record({
        name,
        capacity: quantity,
        modes: pvModes,
        storageClass,
        betaClass,
        phase: often(fc.constant("Available"), fc.constantFrom("Bound", "Released", "Pending", null), 2),
        labels: often(fc.constant(undefined), labels, 1),
        volumeMode,
        vac,
        claimRef,
        deleting: often(fc.constant(false), fc.constant(true), 9),
      })
      .map(({ name, capacity, ...o }) => makePV(name, capacity, o));

  const requirement: fc.Arbitrary<V1LabelSelectorRequirement> = fc.oneof(
    fc.record({
      key: fc.constantFrom("tier", "zone", "env"),
      operator: fc.constantFrom("In", "NotIn"),
      values: fc.uniqueArray(fc.constantFrom("gold", "silver", "a", "b"), { minLength: 1, maxLength: 2 }),
    }),
    fc.record({
      key: fc.constantFrom("tier", "zone", "env"),
      operator: fc.constantFrom("Exists", "DoesNotExist"),
    }),
  );
  const selector: fc.Arbitrary<V1LabelSelector | undefined> = fc.oneof(
    { weight: 6, arbitrary: fc.constant(undefined) },
    { weight: 1, arbitrary: fc.constant({}) },
    { weight: 2, arbitrary: labels.map((matchLabels) => ({ matchLabels })) },
    {
      weight: 2,
      arbitrary: fc.array(requirement, { minLength: 1, maxLength: 2 }).map((e) => ({ matchExpressions: e })),
    },
    {
      weight: 1,
      arbitrary: fc.constantFrom<V1LabelSelector>(
        { matchExpressions: [{ key: "tier", operator: "Bogus" }] },
        { matchExpressions: [{ key: "tier", operator: "In" }] },
      ),
    },
  );
  const claimArbitrary: fc.Arbitrary<V1PersistentVolumeClaim> = fc
    .record({
      request: often(fc.constantFrom(...SIZES), fc.constantFrom(undefined, "lots"), 40),
      modes: often(
        fc.constantFrom([RWO], [RWO], [ROX], [RWX], [RWO, ROX], [RWOP], []),
        fc.array(fc.constantFrom(RWO, ROX, RWX, RWOP, "Bogus"), { maxLength: 3 }),
      ),
      storageClass,
      betaClass,
      volumeMode,
      vac,
      selector,
      uid: fc.constantFrom("uid-1", "uid-2"),
    })
    .map(({ request, ...o }) => makeClaim(request, { name: "claim", namespace: "ns", ...o }));

  const byName = (a: V1PersistentVolume, b: V1PersistentVolume): number => {
    const [x, y] = [a.metadata?.name ?? "", b.metadata?.name ?? ""];
    return x < y ? -1 : x > y ? 1 : 0;
  };

  /** A deterministic Fisher–Yates shuffle: another map order upstream might iterate in. */
  function shuffle<T>(items: readonly T[], seed: number): T[] {
    const out = [...items];
    let state = seed >>> 0 || 1;
    for (let i = out.length - 1; i > 0; i--) {
      state = (Math.imul(state, 1664525) + 1013904223) >>> 0;
      const j = state % (i + 1);
      [out[i], out[j]] = [out[j]!, out[i]!];
    }
    return out;
  }

  /** A claim, or half the time one modelled on an unbound PV so that matches are common. */
  interface Query {
    claim: V1PersistentVolumeClaim;
    delayBinding: boolean;
    seed: number;
    model: number | undefined;
  }
  const query: fc.Arbitrary<Query> = fc.record({
    claim: claimArbitrary,
    delayBinding: often(fc.constant(false), fc.constant(true), 3),
    seed: fc.nat(),
    model: fc.option(fc.nat(), { nil: undefined, freq: 2 }),
  });

  function modelledOn(claim: V1PersistentVolumeClaim, pv: V1PersistentVolume): V1PersistentVolumeClaim {
    const mode = pv.spec?.accessModes?.[0];
    return makeClaim(pv.spec?.capacity?.storage ?? claim.spec?.resources?.requests?.storage, {
      name: "claim",
      namespace: "ns",
      uid: claim.metadata?.uid,
      modes: mode === undefined ? [] : [mode],
      storageClass: getVolumeClass(pv),
      volumeMode: pv.spec?.volumeMode ?? null,
      vac: pv.spec?.volumeAttributesClassName,
      selector: claim.spec?.selector,
    });
  }

  function assertAgrees(index: VolumeIndex, volumes: readonly V1PersistentVolume[], q: Query): void {
    const { delayBinding, seed } = q;
    const free = volumes.filter((pv) => pv.status?.phase === "Available" && !pv.spec?.claimRef);
    const models = free.length ? free : volumes;
    const model = q.model === undefined ? undefined : models[q.model % models.length];
    const claim = model ? modelledOn(q.claim, model) : q.claim;
    const ours = index.findBestMatch(claim, delayBinding);
    const sorted = [...volumes].sort(byName);
    const expected = oracle.findBestMatchLinear(claim, oracle.bucketByAccessModes(sorted), delayBinding);
    assert.equal(
      ours.error !== undefined,
      expected.error !== undefined,
      `${ours.error} vs ${expected.error}`,
    );
    // Visiting each bucket in name order is exactly the documented tie rule.
    assert.equal(ours.volume?.metadata?.name, expected.volume?.metadata?.name);
    // Any other visiting order, as upstream's map order may be, differs only among ties.
    const other = oracle.findBestMatchLinear(
      claim,
      oracle.bucketByAccessModes(shuffle(sorted, seed)),
      delayBinding,
    ).volume;
    if (!ours.volume || !other) {
      assert.equal(other, ours.volume);
      return;
    }
    assert.equal(
      oracle.getAccessModesAsString(other.spec?.accessModes),
      oracle.getAccessModesAsString(ours.volume.spec?.accessModes),
    );
    if (oracle.isVolumeBoundToClaim(ours.volume, claim)) assert.ok(oracle.isVolumeBoundToClaim(other, claim));
    else assert.equal(oracle.capacityOf(other), oracle.capacityOf(ours.volume));
  }

  test("random PV sets, adds, replacements and deletes, random claims", () => {
    const poolName = fc.integer({ min: 0, max: 39 }).map((i) => `pv-${i}`);
    const operation = often(
      pvArbitrary(poolName).map((pv) => ({ add: pv })),
      poolName.map((name) => ({ remove: name })),
      4,
    );
    fc.assert(
      fc.property(
        fc.array(operation, { maxLength: 80, size: "max" }),
        fc.array(query, { minLength: 1, maxLength: 5 }),
        (operations, queries) => {
          const index = new VolumeIndex();
          const model = new Map<string, V1PersistentVolume>();
          for (const op of operations) {
            if ("add" in op) {
              index.add(op.add);
              model.set(op.add.metadata!.name!, op.add);
            } else {
              assert.equal(index.delete(op.remove), model.delete(op.remove));
            }
          }
          assert.equal(index.size, model.size);
          assert.deepEqual(new Set(index.list()), new Set(model.values()));
          for (const q of queries) assertAgrees(index, [...model.values()], q);
        },
      ),
      { numRuns: 500 },
    );
  });

  test("many equal sizes: ties go to the smallest name, as the oracle in name order", () => {
    const name = fc.stringMatching(/^[a-z0-9]{1,4}$/);
    fc.assert(
      fc.property(
        fc.uniqueArray(pvArbitrary(name), {
          selector: (pv) => pv.metadata!.name,
          maxLength: 60,
          size: "max",
        }),
        fc.array(query, { minLength: 1, maxLength: 5 }),
        (volumes, queries) => {
          const index = indexOf(volumes);
          for (const q of queries) assertAgrees(index, volumes, q);
        },
      ),
      { numRuns: 300 },
    );
  });

  test("large groups stay ordered through chunk splits, merges and replacements", () => {
    const step = fc.tuple(
      fc.nat(2999),
      fc.constantFrom(...SIZES.slice(0, 6)),
      often(fc.constant(false), fc.constant(true), 3),
    );
    fc.assert(
      fc.property(
        fc.array(step, { minLength: 6000, maxLength: 6000 }),
        fc.array(fc.tuple(fc.constantFrom(...SIZES), fc.boolean()), { minLength: 20, maxLength: 20 }),
        (steps, queries) => {
          const index = new VolumeIndex();
          const model = new Map<string, V1PersistentVolume>();
          for (const [i, size, remove] of steps) {
            const name = `pv-${i}`;
            if (remove) {
              index.delete(name);
              model.delete(name);
            } else {
              const pv = makePV(name, size, { modes: [RWO], labels: { zone: String(i % 7) } });
              index.add(pv);
              model.set(name, pv);
            }
          }
          for (const [request, selective] of queries) {
            const selector = selective ? { matchLabels: { zone: "3" } } : undefined;
            const claim = makeClaim(request, { modes: [RWO], selector });
            assertAgrees(index, [...model.values()], {
              claim,
              delayBinding: false,
              seed: 1,
              model: undefined,
            });
          }
        },
      ),
      { numRuns: 3, endOnFailure: true },
    );
  });
});

test("a megabyte capacity or request is quoted clipped in the warning and the error, not whole", () => {
  const huge = "9".repeat(1 << 20) + "x";
  const index = new VolumeIndex();
  const warning = index.add(makePV("pv-huge", huge)) ?? "";
  assert.match(warning, /has no valid spec\.capacity\.storage \("9{64}…"\)/);
  assert.ok(warning.length < 300, `warning of ${warning.length} chars`);
  const error = index.findBestMatch(makeClaim(huge), false).error ?? "";
  assert.match(error, /has no valid spec\.resources\.requests\.storage \("9{64}…"\)/);
  assert.ok(error.length < 300, `error of ${error.length} chars`);
});

describe("the goal benchmark's mix (bench/matcher-mix.ts), every claim against the linear oracle", () => {
  /** Local claims bind with delayBinding, as the binder runs them (WaitForFirstConsumer). */
  const delay = (claim: V1PersistentVolumeClaim): boolean =>
    claim.spec?.storageClassName === WAIT_FOR_FIRST_CONSUMER_CLASS;

  /** Asserts the index answers as the oracle for every claim; counts what the answers covered. */
  function assertSameAsOracle(
    index: VolumeIndex,
    volumes: Iterable<V1PersistentVolume>,
    claims: V1PersistentVolumeClaim[],
  ): { selector: number; preboundLocal: number; tied: number } {
    const sorted = [...volumes].sort((a, b) => (a.metadata!.name! < b.metadata!.name! ? -1 : 1));
    const buckets = oracle.bucketByAccessModes(sorted);
    const covered = { selector: 0, preboundLocal: 0, tied: 0 };
    for (const claim of claims) {
      const expected = oracle.findBestMatchLinear(claim, buckets, delay(claim)).volume;
      assert.equal(
        index.findBestMatch(claim, delay(claim)).volume?.metadata?.name,
        expected?.metadata?.name,
        claim.metadata?.name,
      );
      if (!expected) continue;
      if (claim.spec?.selector) covered.selector++;
      if (delay(claim)) covered.preboundLocal++;
      // A tie: another volume would do as well in another visiting order (upstream's map order).
      const shuffled = oracle.findBestMatchLinear(
        claim,
        oracle.bucketByAccessModes([...sorted].reverse()),
        delay(claim),
      ).volume;
      if (shuffled !== expected) covered.tied++;
    }
    return covered;
  }

  test("every phase, selectors, pre-bound and node-affine PVs, many equal sizes; then replacements", () => {
    const { volumes, claims } = goalMix(3_000, 500, 3);
    const index = indexOf(volumes);
    const covered = assertSameAsOracle(index, volumes, claims);
    assert.ok(covered.selector >= 20, `${covered.selector} matches by a selector`);
    assert.ok(covered.preboundLocal >= 5, `${covered.preboundLocal} WaitForFirstConsumer claims pre-bound`);
    assert.ok(covered.tied >= 20, `${covered.tied} matches among ties`);
    // Replace a third (new labels, phases, sizes from another seed's PVs of the same names), delete some.
    const model = new Map(volumes.map((pv) => [pv.metadata!.name!, pv]));
    const other = goalMix(3_000, 0, 4).volumes;
    other.forEach((pv, i) => {
      if (i % 3 !== 0) return;
      if (i % 9 === 0) {
        index.delete(pv.metadata!.name!);
        model.delete(pv.metadata!.name!);
      } else {
        index.add(pv);
        model.set(pv.metadata!.name!, pv);
      }
    });
    assert.equal(index.size, model.size);
    assertSameAsOracle(index, model.values(), claims);
  });
});
