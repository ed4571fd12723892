import assert from "node:assert/strict";
import { describe, test } from "node:test";
import type { V1PersistentVolumeList } from "@kubernetes/client-node";
import { diff, poolTies, unexpectedHandoverWrites } from "../conformance/compare.js";
import { randomScenario } from "../conformance/random-scenario.js";
import { normaliser, type Step } from "../conformance/runner.js";

/* The differential harness's own logic: what it generates, normalises and refuses. */

type Spec = { spec: Record<string, unknown>; metadata: { name: string } };
const created = (steps: Step[], kind: string) =>
  steps.flatMap((s) => ("create" in s ? s.create : [])).filter((o) => o.kind === kind) as unknown as Spec[];

describe("randomScenario", () => {
  const seeds = Array.from({ length: 10 }, (_, i) => 1000 + i); // those npm test runs

  test("PV sizes are distinct and each targeted claim asks for exactly its PV", () => {
    for (let seed = 0; seed < 300; seed++) {
      const { steps } = randomScenario(seed);
      // The PVs claims choose between (CSI ones are pre-bound to their claim).
      const pvs = created(steps, "PersistentVolume").filter((p) => p.metadata.name.startsWith("pv-"));
      const sizes = pvs.map((p) => (p.spec.capacity as { storage: string }).storage);
      assert.equal(new Set(sizes).size, sizes.length, `seed ${seed}: equal sizes`);
      for (const c of created(steps, "PersistentVolumeClaim")) {
        const target = /^claim-(\d+)$/.exec(c.metadata.name)?.[1];
        if (target === undefined) continue;
        const p = pvs.find((v) => v.metadata.name === `pv-${target}`)!;
        assert.deepEqual(
          [c.spec.resources, c.spec.storageClassName, c.spec.accessModes],
          [{ requests: p.spec.capacity }, p.spec.storageClassName, p.spec.accessModes],
          `seed ${seed}: ${c.metadata.name}`,
        );
      }
    }
  });

  test("the seeds npm test runs mix static binding, provisioning, each reclaim policy and moving pods", () => {
    const all = seeds.map(randomScenario);
    const steps = all.flatMap((s) => s.steps);
    const claims = all.flatMap((s) => created(s.steps, "PersistentVolumeClaim"));
    // All but the stray claims: targeted, provisioned and pre-bound (CSI) ones.
    const bindable = claims.filter((c) => c.metadata.name !== "stray").length;
    assert.ok(bindable * 2 > claims.length, `${bindable} of ${claims.length} claims are made to bind`);
    assert.ok(claims.some((c) => c.spec.storageClassName === "hp"));
    assert.ok(claims.some((c) => c.spec.storageClassName === "hp-retain"));
    const deletedClaims = new Set(
      steps.flatMap((s) => ("delete" in s ? [s.delete].flat() : [])).map((r) => r.name),
    );
    for (const policy of ["Retain", "Delete", "Recycle"]) {
      assert.ok(
        all.some((s) =>
          created(s.steps, "PersistentVolume").some(
            (p) =>
              p.spec.persistentVolumeReclaimPolicy === policy &&
              deletedClaims.has(p.metadata.name.replace("pv-", "claim-")),
          ),
        ),
        `a released ${policy} PV`,
      );
    }
    assert.ok(
      steps.some((s) => "podPhase" in s),
      "a recycler pod completes",
    );
    assert.ok(
      all.some((s) => created(s.steps, "Pod").some((p) => p.metadata.name.startsWith("n2-"))),
      "a pod moves to n2",
    );
  });
});

describe("normaliser", () => {
  const claimUID = "0b6f3a7e-1111-4222-8333-944455556666";
  const podUID = "7c1d2e3f-aaaa-4bbb-8ccc-ddddeeeeffff";
  const identities = new Map([
    [claimUID, "PersistentVolumeClaim c"],
    [podUID, "Pod p #2"],
  ]);
  const pvs = { items: [] } as unknown as V1PersistentVolumeList;
  const n = normaliser("c7", identities, pvs);

  test("names provisioned PVs by claim, UIDs by object, the namespace as NS; keeps durations", () => {
    assert.equal(
      n(`Successfully provisioned volume pvc-${claimUID} for c7/c (pod ${podUID}) after 1.5s`),
      "Successfully provisioned volume pvc-for-c for NS/c (pod <Pod p #2>) after 1.5s",
    );
    // Both sides' durations come from shared flags and constants: one that differs is a difference.
    assert.notEqual(n("activeDeadlineSeconds 60s"), n("activeDeadlineSeconds 90s"));
  });

  test("an unknown UID stays distinguishable from a known one", () => {
    assert.equal(n("uid 99999999-aaaa-4bbb-8ccc-ddddeeeeffff"), "uid <uid>");
  });

  test("a namespace that merely starts like the scenario's is kept", () => {
    assert.equal(n("c70/x and c7/x"), "c70/x and NS/x");
  });
});

describe("comparison", () => {
  test("a differing condition message is a difference", () => {
    const pvc = (message: string) => ({
      "PVC c": { conditions: [{ type: "Resizing", status: "True", message }] },
    });
    assert.deepEqual(diff(pvc("a"), pvc("a")), []);
    assert.equal(diff(pvc("a"), pvc("b")).length, 1);
  });

  test("handover writes a scenario does not allow are reported per side", () => {
    const scenario = { name: "s", steps: [], handoverWrites: ["Pod default/r created"] };
    assert.deepEqual(
      unexpectedHandoverWrites(scenario, {
        upstream: { Handover: [["Pod default/r created"]] },
        kvc: { Handover: [["Pod default/r created", "VolumeAttachment va deleted"]] },
      }),
      ["kvc: VolumeAttachment va deleted"],
    );
  });
});

describe("pools of competing claims", () => {
  const pv = (claim: string | undefined, capacity = "1Gi") => ({
    phase: claim ? "Bound" : "Available",
    claim: claim && `/${claim}`,
    claimUID: claim && `PersistentVolumeClaim ${claim}`,
    capacity,
    class: "",
    accessModes: ["ReadWriteOnce"],
  });
  const pvc = (volume: string | undefined, request = "1Gi") => ({
    phase: volume ? "Bound" : "Pending",
    volume,
    request,
    class: "",
    requestedModes: ["ReadWriteOnce"],
  });

  test("equally good choices compare equal", () => {
    const kcm = { "PV a": pv("c1"), "PV b": pv(undefined), "PVC c1": pvc("a"), "PVC c2": pvc(undefined) };
    const kvc = { "PV a": pv(undefined), "PV b": pv("c2"), "PVC c1": pvc(undefined), "PVC c2": pvc("b") };
    assert.deepEqual(diff(poolTies(kcm), poolTies(kvc)), []);
    assert.notDeepEqual(diff(kcm, kvc), []);
  });

  test("a claim bound to a bigger volume than the other side's, or a claimRef UID of another claim, differs", () => {
    const base = { "PV a": pv("c1"), "PV big": pv(undefined, "5Gi"), "PVC c1": pvc("a") };
    const bigger = { "PV a": pv(undefined), "PV big": pv("c1", "5Gi"), "PVC c1": pvc("big") };
    assert.equal(diff(poolTies(base), poolTies(bigger)).length, 3);
    const wrongUID = { ...base, "PV a": { ...pv("c1"), claimUID: "PersistentVolumeClaim c1 #2" } };
    assert.equal(diff(poolTies(base), poolTies(wrongUID)).length, 1);
  });

  test("more claims bound on one side differs", () => {
    const one = { "PV a": pv("c1"), "PV b": pv(undefined), "PVC c1": pvc("a"), "PVC c2": pvc(undefined) };
    const two = { "PV a": pv("c1"), "PV b": pv("c2"), "PVC c1": pvc("a"), "PVC c2": pvc("b") };
    assert.equal(diff(poolTies(one), poolTies(two)).length, 2);
  });
});
