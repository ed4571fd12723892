import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { diff, poolTies, unexpectedHandoverWrites } from "./compare.js";
import { explainMismatches, type ExplainResult } from "./explain-check.js";
import { ConformanceRunner } from "./runner.js";
import { randomScenario } from "./random-scenario.js";
import { LONG_SCENARIOS, SCENARIOS } from "./scenarios.js";
import { MIGRATION_SCENARIOS } from "./scenarios-migration.js";
import { PLUGIN_SCENARIOS } from "./scenarios-plugins.js";
import { MAX_TIED_BINDINGS, MIN_COMPARED, shadowFailures } from "./shadow-check.js";

/*
 * Differential conformance: every scenario runs on upstream kube-controller-manager and on kvc, each
 * on its own embedded control plane, at the same time; their settled outcomes must be equal.
 *   KVC_CONFORMANCE_SEEDS=20 (random scenarios, default 10)  KVC_CONFORMANCE_SEED=<n> (replay one)
 *   KVC_CONFORMANCE_ONLY=<substring>[,<substring>…] (run matching scenarios only; none matching fails)
 *   KVC_CONFORMANCE_LONG=1 (also the scenarios that wait out minutes: LONG_SCENARIOS)
 */

const only = process.env.KVC_CONFORMANCE_ONLY;
const seeds = process.env.KVC_CONFORMANCE_SEED
  ? [Number(process.env.KVC_CONFORMANCE_SEED)]
  : Array.from({ length: Number(process.env.KVC_CONFORMANCE_SEEDS ?? 10) }, (_, i) => 1000 + i);
const scenarios = [
  ...SCENARIOS,
  ...MIGRATION_SCENARIOS,
  ...PLUGIN_SCENARIOS,
  ...(process.env.KVC_CONFORMANCE_LONG === "1" ? LONG_SCENARIOS : []),
  ...seeds.map(randomScenario),
].filter((s) => !only || only.split(",").some((part) => s.name.includes(part)));

describe("kvc decides as kube-controller-manager does", () => {
  // A filter that matches nothing is a typo, not a pass.
  test("the filter selects scenarios", () => {
    assert.ok(scenarios.length > 0, `KVC_CONFORMANCE_ONLY=${only ?? ""} selects no scenario`);
  });
  if (scenarios.length === 0) return;

  const upstream = new ConformanceRunner("kube-controller-manager");
  const ours = new ConformanceRunner("kvc");
  before(async () => {
    await Promise.all([upstream.start(), ours.start()]);
  });
  after(async () => {
    await Promise.all([upstream.stop(), ours.stop()]);
  });

  for (const scenario of scenarios) {
    test(scenario.name, async (t) => {
      const [a, b] = await Promise.all([upstream.run(scenario), ours.run(scenario)]);
      // Beside KCM, kvc --shadow agreed with every decision and wrote nothing (shadow-check.ts).
      const shadow = upstream.shadowVerdict;
      if (shadow instanceof Error) throw shadow;
      if (shadow) {
        t.diagnostic(
          `shadow: ${JSON.stringify(shadow.counts)}, tied bindings ${shadow.tiedBindings} ` +
            `(at most ${MAX_TIED_BINDINGS}), KCM's writes ${shadow.upstreamWrites.length} ` +
            `(then at least ${MIN_COMPARED} compared), unparsed ${shadow.unparsed}`,
        );
        // Competing claims: the shadow (one worker, its choices never applied) meets KCM's choices
        // among equal volumes as its own differing ones; third-party writes it takes for KCM's.
        const excused = scenario.differs ?? scenario.competing ?? scenario.thirdParty;
        const failures = shadowFailures(shadow, excused);
        assert.deepEqual(failures, [], `${scenario.name}: the shadow beside KCM:\n${failures.join("\n")}`);
      }
      // After a switch nothing is detached, re-bound, re-provisioned or created: on either side.
      const unexpected = unexpectedHandoverWrites(scenario, { upstream: a, kvc: b });
      assert.deepEqual(
        unexpected,
        [],
        `${scenario.name}: writes across the handover:\n${unexpected.join("\n")}`,
      );
      // No claim double-bound, every binding pointing both ways: on each side, not only alike.
      for (const [side, snapshot] of [
        ["upstream", a],
        ["kvc", b],
      ] as const)
        assert.deepEqual(snapshot.Bindings, [], `${scenario.name}: ${side} broke the binding invariant`);
      // A scenario declared different (see scenarios.ts) is run, not compared.
      if (!scenario.differs) {
        const differences = scenario.competing ? diff(poolTies(a), poolTies(b)) : diff(a, b);
        assert.deepEqual(differences, [], `${scenario.name} differs:\n${differences.join("\n")}`);
      }
      // kvc explain's verdict on every claim and pod created equals what each controller did.
      const wrong = explainMismatches({ upstream: a, kvc: b });
      assert.deepEqual(wrong, [], `${scenario.name}: kvc explain predicted otherwise:\n${wrong.join("\n")}`);
      const { predictions, undecided } = b.Explain as ExplainResult;
      const count = (prefix: string) => predictions.filter((p) => p.startsWith(prefix)).length;
      t.diagnostic(
        `explain checked: ${count("PVC ")} binder, ${count("Pod ")} attach; undecided: ${undecided.length}`,
      );
    });
  }
});
