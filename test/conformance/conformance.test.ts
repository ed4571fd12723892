import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import fc from "fast-check";
import { ConformanceRunner, type Scenario, type Snapshot } from "./runner.js";
import { pv, pvc, sc, SCENARIOS } from "./scenarios.js";
import { MIGRATION_SCENARIOS } from "./scenarios-migration.js";
import { PLUGIN_SCENARIOS } from "./scenarios-plugins.js";

/*
 * Differential conformance: every scenario runs on upstream kube-controller-manager and on kvc, each
 * on its own embedded control plane, at the same time; their settled outcomes must be equal.
 *   KVC_CONFORMANCE_SEEDS=3 (random scenarios, default 2)  KVC_CONFORMANCE_SEED=<n> (replay one)
 *   KVC_CONFORMANCE_ONLY=<substring>[,<substring>…] (run matching scenarios only)
 */

/** The keys whose values differ, as "key: upstream … | kvc …" lines. */
export function diff(upstream: Snapshot, ours: Snapshot): string[] {
  const keys = [...new Set([...Object.keys(upstream), ...Object.keys(ours)])].sort();
  return keys
    .filter((k) => JSON.stringify(upstream[k]) !== JSON.stringify(ours[k]))
    .map(
      (k) => `${k}:\n    upstream ${JSON.stringify(upstream[k])}\n    kvc      ${JSON.stringify(ours[k])}`,
    );
}

/**
 * A random static-binding scenario from a seed: PVs with distinct sizes (so no tie-break decides),
 * random classes, access modes and labels; claims created one at a time, each settled before the next
 * (so the order claims are processed in cannot decide either).
 */
export function randomScenario(seed: number): Scenario {
  const modes = fc.subarray(["ReadWriteOnce", "ReadOnlyMany", "ReadWriteMany"], { minLength: 1 });
  const cls = fc.constantFrom("", "gold", "silver");
  const label = fc.constantFrom(undefined, "a", "b");
  const [world] = fc.sample(
    fc.record({
      pvs: fc.uniqueArray(fc.record({ size: fc.integer({ min: 1, max: 64 }), cls, modes, label }), {
        minLength: 1,
        maxLength: 6,
        selector: (p) => p.size,
      }),
      claims: fc.array(fc.record({ size: fc.integer({ min: 1, max: 64 }), cls, modes, label }), {
        minLength: 1,
        maxLength: 4,
      }),
    }),
    { seed, numRuns: 1 },
  );
  return {
    name: `random seed ${seed}`,
    steps: [
      { create: [sc("gold"), sc("silver")] },
      {
        create: world!.pvs.map((p, i) =>
          pv(`pv-${i}`, {
            size: `${p.size}Gi`,
            cls: p.cls,
            modes: p.modes,
            ...(p.label && { labels: { tier: p.label } }),
          }),
        ),
      },
      ...world!.claims.flatMap((c, i) => [
        {
          create: [
            pvc(`claim-${i}`, {
              size: `${c.size}Gi`,
              cls: c.cls,
              modes: c.modes,
              ...(c.label && { selector: { tier: c.label } }),
            }),
          ],
        },
        { settle: true as const },
      ]),
    ],
  };
}

const only = process.env.KVC_CONFORMANCE_ONLY;
const seeds = process.env.KVC_CONFORMANCE_SEED
  ? [Number(process.env.KVC_CONFORMANCE_SEED)]
  : Array.from({ length: Number(process.env.KVC_CONFORMANCE_SEEDS ?? 2) }, (_, i) => 1000 + i);
const scenarios = [
  ...SCENARIOS,
  ...MIGRATION_SCENARIOS,
  ...PLUGIN_SCENARIOS,
  ...seeds.map(randomScenario),
].filter((s) => !only || only.split(",").some((part) => s.name.includes(part)));

describe("kvc decides as kube-controller-manager does", () => {
  const upstream = new ConformanceRunner("kube-controller-manager");
  const ours = new ConformanceRunner("kvc");
  before(async () => {
    await Promise.all([upstream.start(), ours.start()]);
  });
  after(async () => {
    await Promise.all([upstream.stop(), ours.stop()]);
  });

  for (const scenario of scenarios) {
    test(scenario.name, async () => {
      const [a, b] = await Promise.all([upstream.run(scenario), ours.run(scenario)]);
      if (scenario.differs) return; // run, declared different: see scenarios.ts
      const differences = diff(a, b);
      assert.deepEqual(differences, [], `${scenario.name} differs:\n${differences.join("\n")}`);
    });
  }
});
