import assert from "node:assert/strict";
import { describe, test } from "node:test";
import type {
  V1PersistentVolume,
  V1PersistentVolumeClaim,
  V1PersistentVolumeSpec,
  V1StorageClass,
} from "@kubernetes/client-node";
import fc from "fast-check";
import { explainClaim, type ClaimInputs } from "../../src/explain/claim.js";
import { render, noPaint } from "../../src/explain/render.js";
import {
  claimQuery,
  REASON_CODES,
  VolumeIndex,
  volumeVerdict,
  type ClaimQuery,
  type TargetNode,
} from "../../src/persistentvolume/volume-index.js";

function pv(
  name: string,
  size: string,
  spec: Partial<V1PersistentVolumeSpec> = {},
  meta = {},
): V1PersistentVolume {
  return {
    metadata: { name, ...meta },
    spec: { capacity: { storage: size }, accessModes: ["ReadWriteOnce"], storageClassName: "", ...spec },
    status: { phase: "Available" },
  };
}

function pvc(
  spec: Partial<NonNullable<V1PersistentVolumeClaim["spec"]>> = {},
  annotations = {},
): V1PersistentVolumeClaim {
  return {
    metadata: { name: "data", namespace: "ns", uid: "uid-1", annotations },
    spec: {
      accessModes: ["ReadWriteOnce"],
      resources: { requests: { storage: "10Gi" } },
      storageClassName: "",
      ...spec,
    },
  };
}

function query(claim: V1PersistentVolumeClaim, node?: TargetNode): ClaimQuery {
  const q = claimQuery(claim, node);
  if (q instanceof Error) assert.fail(q.message);
  return q;
}

describe("volumeVerdict: one reason per rule, with the values compared", () => {
  const cases: [string, V1PersistentVolume, V1PersistentVolumeClaim, { wanted: string; found: string }][] = [
    [
      "ClassMismatch",
      pv("a", "10Gi", { storageClassName: "gold" }),
      pvc(),
      { wanted: "<none>", found: "gold" },
    ],
    ["TooSmall", pv("a", "5Gi"), pvc(), { wanted: "10Gi", found: "5Gi" }],
    [
      "AccessModes",
      pv("a", "10Gi", { accessModes: ["ReadWriteOnce", "ReadOnlyMany"] }),
      pvc({ accessModes: ["ReadWriteMany"] }),
      { wanted: "RWX", found: "RWO,ROX" },
    ],
    ["VolumeMode", pv("a", "10Gi", { volumeMode: "Block" }), pvc(), { wanted: "Filesystem", found: "Block" }],
    [
      "Selector",
      pv("a", "10Gi", {}, { labels: { zone: "b", tier: "gold" } }),
      pvc({
        selector: {
          matchLabels: { tier: "gold", zone: "a" },
          matchExpressions: [{ key: "disk", operator: "Exists" }],
        },
      }),
      { wanted: "zone=a, disk Exists", found: "zone=b, no disk label" },
    ],
    [
      "BoundToOther",
      pv("a", "10Gi", { claimRef: { namespace: "other", name: "theirs", uid: "u2" } }),
      pvc(),
      { wanted: "ns/data (uid uid-1)", found: "other/theirs (uid u2)" },
    ],
    [
      "NotAvailable",
      { ...pv("a", "10Gi"), status: { phase: "Released" } },
      pvc(),
      { wanted: "Available", found: "Released" },
    ],
    [
      "Deleting",
      pv("a", "10Gi", {}, { deletionTimestamp: new Date("2026-01-02T03:04:05Z") }),
      pvc(),
      { wanted: "not being deleted", found: "deleted at 2026-01-02T03:04:05.000Z" },
    ],
    [
      "AttributesClass",
      pv("a", "10Gi", { volumeAttributesClassName: "fast" }),
      pvc(),
      { wanted: "<none>", found: "fast" },
    ],
  ];
  for (const [code, volume, claim, values] of cases) {
    test(code, () => {
      assert.deepEqual(volumeVerdict(query(claim), volume), [{ code, ...values }]);
    });
  }

  test("NodeAffinity: only on the scheduler's path (a selected node)", () => {
    const volume = pv("a", "10Gi", {
      nodeAffinity: {
        required: {
          nodeSelectorTerms: [{ matchExpressions: [{ key: "zone", operator: "In", values: ["a"] }] }],
        },
      },
    });
    assert.deepEqual(volumeVerdict(query(pvc()), volume), []);
    assert.deepEqual(volumeVerdict(query(pvc(), { name: "n1", labels: { zone: "a" } }), volume), []);
    assert.deepEqual(volumeVerdict(query(pvc(), { name: "n2", labels: { zone: "b" } }), volume), [
      { code: "NodeAffinity", wanted: "node n2", found: "no matching NodeSelectorTerms" },
    ]);
  });

  test("a volume pre-bound to the claim skips class, phase and selector, as upstream", () => {
    const volume = {
      ...pv("a", "10Gi", { storageClassName: "gold", claimRef: { namespace: "ns", name: "data" } }),
      status: { phase: "Pending" },
    };
    assert.deepEqual(volumeVerdict(query(pvc({ selector: { matchLabels: { x: "y" } } })), volume), []);
  });

  test("every failing rule is listed, in FindMatchingVolume's order", () => {
    const volume = pv("a", "1Gi", { storageClassName: "gold", volumeMode: "Block" });
    assert.deepEqual(
      volumeVerdict(query(pvc()), volume).map((r) => r.code),
      ["TooSmall", "VolumeMode", "ClassMismatch"],
    );
  });

  test("a PV without a valid capacity is TooSmall", () => {
    const volume = pv("a", "lots");
    assert.deepEqual(volumeVerdict(query(pvc()), volume), [
      { code: "TooSmall", wanted: "10Gi", found: "lots" },
    ]);
  });
});

describe("volumeVerdict agrees with findBestMatch (the same rules)", () => {
  const modes = fc.subarray(["ReadWriteOnce", "ReadOnlyMany", "ReadWriteMany", "ReadWriteOncePod"], {
    minLength: 1,
  });
  const volumeArb = fc.record({
    size: fc.integer({ min: 1, max: 8 }),
    modes,
    cls: fc.constantFrom("", "gold"),
    block: fc.boolean(),
    vac: fc.constantFrom(undefined, "fast"),
    zone: fc.constantFrom(undefined, "a", "b"),
    phase: fc.constantFrom("Available", "Available", "Released", "Pending"),
    ref: fc.constantFrom(undefined, "mine", "mine-old-uid", "other"),
    deleting: fc.boolean(),
  });
  const claimArb = fc.record({
    size: fc.integer({ min: 1, max: 8 }),
    modes,
    cls: fc.constantFrom("", "gold"),
    block: fc.boolean(),
    vac: fc.constantFrom(undefined, "fast"),
    zone: fc.constantFrom(undefined, "a"),
  });
  test("the chosen volume matches; with no choice, nothing matches", () => {
    fc.assert(
      fc.property(fc.array(volumeArb, { maxLength: 12 }), claimArb, (volumes, c) => {
        const claim = pvc({
          accessModes: c.modes,
          resources: { requests: { storage: `${c.size}Gi` } },
          storageClassName: c.cls,
          volumeMode: c.block ? "Block" : "Filesystem",
          ...(c.vac ? { volumeAttributesClassName: c.vac } : {}),
          ...(c.zone ? { selector: { matchLabels: { zone: c.zone } } } : {}),
        });
        const pvs = volumes.map((v, i) => {
          const refs = {
            mine: { namespace: "ns", name: "data", uid: "uid-1" },
            "mine-old-uid": { namespace: "ns", name: "data", uid: "uid-0" },
            other: { namespace: "ns", name: "other" },
          };
          const volume = pv(
            `pv-${i}`,
            `${v.size}Gi`,
            {
              accessModes: v.modes,
              storageClassName: v.cls,
              volumeMode: v.block ? "Block" : "Filesystem",
              ...(v.vac ? { volumeAttributesClassName: v.vac } : {}),
              ...(v.ref ? { claimRef: refs[v.ref] } : {}),
            },
            {
              ...(v.zone ? { labels: { zone: v.zone } } : {}),
              ...(v.deleting ? { deletionTimestamp: new Date(0) } : {}),
            },
          );
          volume.status = { phase: v.phase };
          return volume;
        });
        const index = new VolumeIndex();
        for (const volume of pvs) index.add(volume);
        const chosen = index.findBestMatch(claim, false).volume;
        const q = query(claim);
        const matching = pvs.filter((volume) => volumeVerdict(q, volume).length === 0);
        if (chosen) assert.ok(matching.includes(chosen));
        else assert.deepEqual(matching, []);
      }),
      { numRuns: 500 },
    );
  });
});

describe("explainClaim: the binder's next step", () => {
  const now = new Date("2026-12-03T12:00:00Z");
  const sc = (name: string, provisioner: string, extra: Partial<V1StorageClass> = {}): V1StorageClass => ({
    metadata: { name },
    provisioner,
    volumeBindingMode: "Immediate",
    ...extra,
  });
  const inputs = (claim: V1PersistentVolumeClaim, more: Partial<ClaimInputs> = {}): ClaimInputs => ({
    claim,
    volumes: [],
    classes: [],
    csiDrivers: [],
    leases: [],
    now,
    ...more,
  });

  test("Bind: the smallest fit, the same as findBestMatch", () => {
    const r = explainClaim(
      inputs(pvc(), { volumes: [pv("big", "100Gi"), pv("fit", "10Gi"), pv("small", "1Gi")] }),
    );
    assert.equal(r.conclusion.kind, "Bind");
    assert.equal(r.conclusion.volume, "fit");
    assert.deepEqual(
      r.volumes.verdicts.map((v) => [v.name, v.verdict, v.chosen]),
      [
        ["fit", "Match", true],
        ["big", "Match", false],
        ["small", "Mismatch", false],
      ],
    );
    assert.deepEqual(r.volumes.byReason, { TooSmall: 1 });
  });

  test("NoMatchNoClass: upstream's event, and what to change for the nearest volume", () => {
    const r = explainClaim(inputs(pvc(), { volumes: [pv("small", "1Gi")] }));
    assert.equal(r.conclusion.kind, "NoMatchNoClass");
    assert.equal(
      r.conclusion.message,
      "no persistent volumes available for this claim and no storage class is set",
    );
    assert.ok(r.suggestions.some((s) => s.includes("to use volume small: request at most 1Gi")));
  });

  test("the nearest volume suggested is never one bound to another claim", () => {
    const taken = {
      ...pv("taken", "10Gi", { claimRef: { namespace: "ns", name: "other", uid: "uid-2" } }),
      status: { phase: "Bound" },
    };
    const r = explainClaim(inputs(pvc(), { volumes: [taken, pv("small", "1Gi")] }));
    assert.equal(r.volumes.verdicts[0]?.name, "taken", "the bound volume is the nearest by size");
    assert.deepEqual(
      r.suggestions.filter((s) => s.startsWith("to use volume")),
      ["to use volume small: request at most 1Gi (or resize the volume)"],
    );
  });

  test("WaitForVolumeAvailable: a fitting volume not yet Available is waited for, not FailedBinding", () => {
    const pending = { ...pv("new", "10Gi"), status: { phase: "Pending" } };
    const r = explainClaim(inputs(pvc(), { volumes: [pv("small", "1Gi"), pending] }));
    assert.equal(r.conclusion.kind, "WaitForVolumeAvailable");
    assert.equal(r.conclusion.volume, "new");
    assert.match(r.conclusion.message, /waits for volume new \(Pending\)/);
    // One being deleted never turns Available: upstream's event.
    const deleting = { ...pending, metadata: { name: "new", deletionTimestamp: new Date() } };
    const d = explainClaim(inputs(pvc(), { volumes: [deleting] }));
    assert.equal(d.conclusion.kind, "NoMatchNoClass");
  });

  test("Provision: the provisioner is alive by its CSIDriver, by a fresh Lease, else not", () => {
    const claim = pvc({ storageClassName: "csi" });
    const classes = [sc("csi", "example.com/driver")];
    const none = explainClaim(inputs(claim, { classes }));
    assert.equal(none.conclusion.kind, "Provision");
    assert.equal(none.conclusion.provisioner?.alive, false);
    assert.ok(
      none.suggestions.some((s) => s.includes("install or start the provisioner example.com/driver")),
    );
    const driver = explainClaim(
      inputs(claim, { classes, csiDrivers: [{ metadata: { name: "example.com/driver" }, spec: {} }] }),
    );
    assert.equal(driver.conclusion.provisioner?.alive, true);
    const lease = (renewTime: Date) => ({
      metadata: { name: "example.com-driver", namespace: "kube-system" },
      spec: { holderIdentity: "pod-1", renewTime },
    });
    const fresh = explainClaim(inputs(claim, { classes, leases: [lease(new Date(now.getTime() - 10_000))] }));
    assert.equal(fresh.conclusion.provisioner?.alive, true);
    const stale = explainClaim(
      inputs(claim, { classes, leases: [lease(new Date(now.getTime() - 600_000))] }),
    );
    assert.equal(stale.conclusion.provisioner?.alive, false);
    const unknown = explainClaim(inputs(claim, { classes, leases: undefined }));
    assert.equal(unknown.conclusion.provisioner?.alive, null);
  });

  test("the default class is assigned first, then the claim matches with it", () => {
    const claim = pvc();
    delete claim.spec!.storageClassName;
    const classes = [
      sc("std", "kubernetes.io/no-provisioner", {
        metadata: { name: "std", annotations: { "storageclass.kubernetes.io/is-default-class": "true" } },
      }),
    ];
    const r = explainClaim(
      inputs(claim, { classes, volumes: [pv("v", "10Gi", { storageClassName: "std" })] }),
    );
    assert.equal(r.claim.demands.storageClass, "std");
    assert.equal(r.claim.demands.storageClassSource, "default");
    assert.equal(r.conclusion.kind, "Bind");
    const empty = explainClaim(inputs(claim, { classes }));
    assert.equal(empty.conclusion.kind, "Provision");
    assert.equal(empty.conclusion.provisioner?.kind, "none");
  });

  test("WaitForFirstConsumer without a selected node; Provision for the selected node", () => {
    const classes = [sc("local", "example.com/lvm", { volumeBindingMode: "WaitForFirstConsumer" })];
    const volumes = [pv("v", "10Gi", { storageClassName: "local" })];
    const r = explainClaim(inputs(pvc({ storageClassName: "local" }), { classes, volumes }));
    assert.equal(r.conclusion.kind, "WaitForFirstConsumer");
    assert.equal(r.volumes.matching, 1);
    const selected = explainClaim(
      inputs(pvc({ storageClassName: "local" }, { "volume.kubernetes.io/selected-node": "n1" }), {
        classes,
        volumes,
      }),
    );
    assert.equal(selected.conclusion.kind, "Provision");
    assert.equal(selected.claim.demands.selectedNode, "n1");
  });

  test("ClassNotFound, Bound, Lost, WaitForRequestedVolume, BindRequested, Invalid", () => {
    assert.equal(explainClaim(inputs(pvc({ storageClassName: "gone" }))).conclusion.kind, "ClassNotFound");
    const completed = { "pv.kubernetes.io/bind-completed": "yes" };
    const bound = pvc({ volumeName: "v" }, completed);
    assert.equal(explainClaim(inputs(bound, { volumes: [pv("v", "10Gi")] })).conclusion.kind, "Bound");
    assert.equal(explainClaim(inputs(bound)).conclusion.kind, "Lost");
    // syncBoundClaim: a volume whose claimRef is another claim's (by UID) makes this one Lost
    // (ClaimMisbound); one whose claimRef is this claim's, or none, is bound (again).
    const claimRef = (uid: string) => ({ claimRef: { namespace: "ns", name: "other", uid } });
    const misbound = explainClaim(inputs(bound, { volumes: [pv("v", "10Gi", claimRef("uid-2"))] }));
    assert.equal(misbound.conclusion.kind, "Lost");
    assert.match(misbound.conclusion.message, /bound to another claim/);
    const own = { claimRef: { namespace: "ns", name: "data", uid: "uid-1" } };
    assert.equal(explainClaim(inputs(bound, { volumes: [pv("v", "10Gi", own)] })).conclusion.kind, "Bound");
    const requested = pvc({ volumeName: "v" });
    assert.equal(explainClaim(inputs(requested)).conclusion.kind, "WaitForRequestedVolume");
    assert.equal(
      explainClaim(inputs(requested, { volumes: [pv("v", "1Gi")] })).conclusion.kind,
      "WaitForRequestedVolume",
    );
    assert.equal(
      explainClaim(inputs(requested, { volumes: [pv("v", "10Gi")] })).conclusion.kind,
      "BindRequested",
    );
    const invalid = pvc({ resources: { requests: { storage: "lots" } } });
    assert.equal(explainClaim(inputs(invalid)).conclusion.kind, "Invalid");
  });

  test("a claim naming its volume: the binder's checkVolumeSatisfyClaim, each check", () => {
    const requested = pvc({ volumeName: "v", selector: { matchLabels: { tier: "db" } } });
    const judge = (volume: V1PersistentVolume, claim = requested) =>
      explainClaim(inputs(claim, { volumes: [volume] })).conclusion;
    // Neither the selector nor the phase counts when the claim names the volume.
    const free = judge(pv("v", "10Gi", {}, { labels: {} }));
    assert.deepEqual([free.kind, free.volume], ["BindRequested", "v"]);
    assert.equal(judge({ ...pv("v", "10Gi"), status: { phase: "Released" } }).kind, "BindRequested");
    const cases: [string, V1PersistentVolume, V1PersistentVolumeClaim?][] = [
      ['the volume is marked for deletion "v"', pv("v", "10Gi", {}, { deletionTimestamp: new Date(0) })],
      [
        'invalid storage request "lots"',
        pv("v", "10Gi"),
        pvc({ volumeName: "v", resources: { requests: { storage: "lots" } } }),
      ],
      ['invalid volume capacity "huge"', pv("v", "huge")],
      ["requested PV is too small", pv("v", "1Gi")],
      ["storageClassName does not match", pv("v", "10Gi", { storageClassName: "gold" })],
      ["volumeAttributesClassName does not match", pv("v", "10Gi", { volumeAttributesClassName: "fast" })],
      ["incompatible volumeMode", pv("v", "10Gi", { volumeMode: "Block" })],
      ["incompatible accessMode", pv("v", "10Gi", { accessModes: ["ReadOnlyMany"] })],
    ];
    for (const [mismatch, volume, claim] of cases) {
      const c = judge(volume, claim);
      assert.equal(c.kind, "WaitForRequestedVolume", mismatch);
      assert.equal(c.message, `cannot bind to the requested volume v: ${mismatch}; the claim stays Pending`);
    }
    // A claimRef naming the claim binds whatever the volume's size (the binder's bind, no check).
    const prebound = pv("v", "1Gi", { claimRef: { namespace: "ns", name: "data" } });
    assert.equal(judge(prebound).kind, "BindRequested");
    const other = judge(pv("v", "10Gi", { claimRef: { namespace: "ns", name: "owner", uid: "uid-9" } }));
    assert.equal(other.kind, "WaitForRequestedVolume");
    assert.match(other.message, /already bound to a different claim \(ns\/owner\)/);
  });

  test("binding mode as the binder reads it: Immediate without a class; a class without one stops it", () => {
    assert.equal(explainClaim(inputs(pvc())).claim.demands.bindingMode, "Immediate");
    const missing = explainClaim(inputs(pvc({ storageClassName: "gone" })));
    assert.equal(missing.claim.demands.bindingMode, "Immediate");
    const unset: V1StorageClass = { metadata: { name: "odd" }, provisioner: "example.com/x" };
    const r = explainClaim(inputs(pvc({ storageClassName: "odd" }), { classes: [unset] }));
    assert.equal(r.claim.demands.bindingMode, null);
    assert.deepEqual(r.conclusion, {
      kind: "Invalid",
      volume: null,
      provisioner: null,
      message: 'the binder cannot sync this claim: VolumeBindingMode not set for StorageClass "odd"',
    });
  });

  test("a claim without a class binds a class-less volume before the default class is assigned", () => {
    const claim = pvc();
    delete claim.spec!.storageClassName;
    const classes = [
      sc("std", "kubernetes.io/no-provisioner", {
        metadata: { name: "std", annotations: { "storageclass.kubernetes.io/is-default-class": "true" } },
      }),
    ];
    const r = explainClaim(inputs(claim, { classes, volumes: [pv("plain", "10Gi")] }));
    assert.equal(r.claim.demands.storageClassSource, "none");
    assert.deepEqual([r.conclusion.kind, r.conclusion.volume], ["Bind", "plain"]);
  });

  test("every reason code is documented in the schema list", () => {
    assert.deepEqual([...REASON_CODES].sort(), [
      "AccessModes",
      "AttributesClass",
      "BoundToOther",
      "ClassMismatch",
      "Deleting",
      "NodeAffinity",
      "NotAvailable",
      "Selector",
      "TooSmall",
      "VolumeMode",
    ]);
  });

  test("human output summarises hundreds of volumes by reason, nearest first", () => {
    const volumes = Array.from({ length: 300 }, (_, i) => pv(`pv-${i}`, `${(i % 9) + 1}Gi`));
    const text = render(explainClaim(inputs(pvc(), { volumes })), "human", noPaint);
    assert.match(text, /Volumes: 300, 0 matching/);
    assert.match(text, /TooSmall +300/);
    assert.match(text, /nearest 10:\n {2}pv-\d+ \(9Gi\):/);
    assert.ok(text.split("\n").length < 60);
  });
});
