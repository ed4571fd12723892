import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { FakeClock } from "../../src/runtime/clock.js";
import { Comparator, type Comparison } from "../../src/shadow/comparator.js";
import type { Decision } from "../../src/shadow/decisions.js";

const GRACE = 30_000;

function setup() {
  const clock = new FakeClock();
  const seen: Comparison[] = [];
  const comparator = new Comparator({
    clock,
    graceMs: GRACE,
    onComparison: (c) => seen.push(c),
    now: () => new Date(0),
  });
  const outcomes = () =>
    seen.map((c) => `${c.outcome} ${c.key} kvc=${c.kvc ?? "-"} upstream=${c.upstream ?? "-"}`);
  return { clock, comparator, seen, outcomes };
}

const binding = (claim: string, pv: string, equivalents?: string[]): Decision => ({
  controller: "persistentvolume-binder-controller",
  kind: "binding",
  key: `binding pvc ${claim}`,
  value: pv,
  ...(equivalents && { equivalents }),
});

const phase = (pv: string, value: string): Decision => ({
  controller: "persistentvolume-binder-controller",
  kind: "phase",
  key: `phase pv ${pv}`,
  value,
});

describe("shadow Comparator", () => {
  test("the same decision on both sides agrees, in either order", () => {
    const { comparator, outcomes } = setup();
    comparator.intended(binding("ns/a", "pv-1"));
    comparator.observed(binding("ns/a", "pv-1"));
    comparator.observed(binding("ns/b", "pv-2"));
    comparator.intended(binding("ns/b", "pv-2"));
    assert.deepEqual(outcomes(), [
      "agree binding pvc ns/a kvc=pv-1 upstream=pv-1",
      "agree binding pvc ns/b kvc=pv-2 upstream=pv-2",
    ]);
    assert.equal(comparator.pending, 0);
  });

  test("different values differ; upstream's among kvc's equal choices is a tie", () => {
    const { comparator, outcomes } = setup();
    comparator.intended(binding("ns/a", "pv-1"));
    comparator.observed(binding("ns/a", "pv-9"));
    comparator.intended(binding("ns/b", "pv-1", ["pv-2", "pv-3"]));
    comparator.observed(binding("ns/b", "pv-3"));
    assert.deepEqual(outcomes(), [
      "differ binding pvc ns/a kvc=pv-1 upstream=pv-9",
      "tie binding pvc ns/b kvc=pv-1 upstream=pv-3",
    ]);
  });

  test("after a tie, each side's phase change of the volume it chose is part of the tie", () => {
    const { clock, comparator, outcomes } = setup();
    comparator.intended(binding("ns/a", "pv-1", ["pv-2"]));
    comparator.observed(binding("ns/a", "pv-2"));
    comparator.intended(phase("pv-1", "Bound"));
    comparator.observed(phase("pv-2", "Bound"));
    comparator.intended(phase("pv-3", "Bound"));
    clock.advance(GRACE);
    assert.deepEqual(outcomes(), [
      "tie binding pvc ns/a kvc=pv-1 upstream=pv-2",
      "tie phase pv pv-1 kvc=Bound upstream=-",
      "tie phase pv pv-2 kvc=- upstream=Bound",
      "kvc-only phase pv pv-3 kvc=Bound upstream=-",
    ]);
  });

  test("a tie excuses only what follows from that one decision: once, within the grace window", () => {
    const { clock, comparator, outcomes } = setup();
    comparator.intended(binding("ns/a", "pv-1", ["pv-2"]));
    comparator.observed(binding("ns/a", "pv-2"));
    // Not what the tie implies: another phase of a tied volume.
    comparator.intended(phase("pv-1", "Released"));
    comparator.observed(phase("pv-2", "Failed"));
    clock.advance(GRACE);
    // Too late to follow from the tie.
    comparator.observed(phase("pv-2", "Bound"));
    clock.advance(GRACE);
    // A later binding of another claim to a tied volume, and its phase change, are not ties.
    comparator.intended(binding("ns/b", "pv-1"));
    comparator.intended(phase("pv-1", "Bound"));
    clock.advance(GRACE);
    assert.deepEqual(outcomes(), [
      "tie binding pvc ns/a kvc=pv-1 upstream=pv-2",
      "kvc-only phase pv pv-1 kvc=Released upstream=-",
      "upstream-only phase pv pv-2 kvc=- upstream=Failed",
      "upstream-only phase pv pv-2 kvc=- upstream=Bound",
      "kvc-only binding pvc ns/b kvc=pv-1 upstream=-",
      "kvc-only phase pv pv-1 kvc=Bound upstream=-",
    ]);
  });

  test("a write of what upstream already did confirms upstream's pending decision, and only that", () => {
    const { clock, comparator, outcomes } = setup();
    comparator.confirmed(binding("ns/a", "pv-1"));
    comparator.observed(binding("ns/b", "pv-2"));
    comparator.confirmed(binding("ns/b", "pv-3"));
    comparator.observed(binding("ns/c", "pv-4"));
    comparator.confirmed(binding("ns/c", "pv-4"));
    clock.advance(GRACE);
    assert.deepEqual(outcomes(), [
      "agree binding pvc ns/c kvc=pv-4 upstream=pv-4",
      "upstream-only binding pvc ns/b kvc=- upstream=pv-2",
    ]);
  });

  test("one side a few steps ahead: each value matches its own, in order", () => {
    const { clock, comparator, outcomes } = setup();
    comparator.observed(phase("pv-1", "Available"));
    comparator.observed(phase("pv-1", "Bound"));
    assert.deepEqual(
      comparator.waiting(10).map((w) => `${w.side} ${w.value}`),
      ["upstream Available", "upstream Bound"],
    );
    comparator.intended(phase("pv-1", "Bound"));
    clock.advance(GRACE);
    assert.deepEqual(outcomes(), [
      "agree phase pv pv-1 kvc=Bound upstream=Bound",
      "upstream-only phase pv pv-1 kvc=- upstream=Available",
    ]);
  });

  test("one side alone is counted once the grace window has passed, not before", () => {
    const { clock, comparator, outcomes } = setup();
    comparator.intended(binding("ns/a", "pv-1"));
    comparator.observed(binding("ns/b", "pv-2"));
    clock.advance(GRACE - 1);
    assert.deepEqual(outcomes(), []);
    assert.equal(comparator.pending, 2);
    clock.advance(1);
    assert.deepEqual(outcomes(), [
      "kvc-only binding pvc ns/a kvc=pv-1 upstream=-",
      "upstream-only binding pvc ns/b kvc=- upstream=pv-2",
    ]);
    assert.equal(comparator.pending, 0);
  });

  test("the other side within the window matches, however late in it", () => {
    const { clock, comparator, outcomes } = setup();
    comparator.intended(binding("ns/a", "pv-1"));
    clock.advance(GRACE - 1);
    comparator.observed(binding("ns/a", "pv-1"));
    clock.advance(GRACE);
    assert.deepEqual(outcomes(), ["agree binding pvc ns/a kvc=pv-1 upstream=pv-1"]);
  });

  test("a decision retried by every sync (its write never lands) is counted once", () => {
    const { clock, comparator, outcomes, seen } = setup();
    for (let i = 0; i < 1000; i++) {
      comparator.intended(binding("ns/a", "pv-1"));
      clock.advance(1_000);
    }
    assert.deepEqual(outcomes(), ["kvc-only binding pvc ns/a kvc=pv-1 upstream=-"]);
    assert.equal(comparator.pending, 0);
    // Both sides see one binding twice (the PV's claimRef, then the claim's volumeName): one decision.
    comparator.observed(binding("ns/b", "pv-2"));
    comparator.intended(binding("ns/b", "pv-2"));
    comparator.intended(binding("ns/b", "pv-2"));
    comparator.observed(binding("ns/b", "pv-2"));
    clock.advance(GRACE);
    assert.equal(seen.length, 2);
    assert.equal(seen[1]?.outcome, "agree");
  });

  test("after the observed state changed, kvc's repeated decision counts again", () => {
    const { clock, comparator, outcomes } = setup();
    comparator.intended(binding("ns/a", "pv-1"));
    clock.advance(GRACE);
    comparator.observed(binding("ns/a", "pv-9"));
    comparator.intended(binding("ns/a", "pv-1"));
    clock.advance(GRACE);
    assert.deepEqual(outcomes(), [
      "kvc-only binding pvc ns/a kvc=pv-1 upstream=-",
      "differ binding pvc ns/a kvc=pv-1 upstream=pv-9",
    ]);
  });

  test("upstream's answer to kvc's decision is no new state: kvc's next write of that binding is the same decision", () => {
    // One binding is two writes (the PV's claimRef, then the claim's volumeName). kvc's claim write
    // can follow upstream's PV write, seen before upstream's claim write reached kvc's cache.
    const { clock, comparator, outcomes } = setup();
    comparator.intended(binding("ns/a", "pv-1", ["pv-2"]));
    comparator.observed(binding("ns/a", "pv-2"));
    comparator.intended(binding("ns/a", "pv-1", ["pv-2"]));
    comparator.observed(binding("ns/a", "pv-2"));
    clock.advance(GRACE);
    assert.deepEqual(outcomes(), ["tie binding pvc ns/a kvc=pv-1 upstream=pv-2"]);
    assert.equal(comparator.pending, 0);
  });

  test("forget() drops the pending decisions about a subject that is gone, uncounted", () => {
    const { clock, comparator, outcomes } = setup();
    comparator.intended(binding("ns/a", "pv-1"));
    comparator.intended(binding("other/a", "pv-2"));
    comparator.forget("binding pvc ns/");
    clock.advance(GRACE);
    assert.deepEqual(outcomes(), ["kvc-only binding pvc other/a kvc=pv-2 upstream=-"]);
  });

  describe("a condition: compared by the value each side settles on within a grace window", () => {
    const unused = (value: string): Decision => ({
      controller: "persistentvolumeclaim-protection-controller",
      kind: "condition",
      key: "unused pvc ns/a",
      value,
    });

    test("a value one side passes through (its pod cache late) is not counted, in either order", () => {
      const { clock, comparator, outcomes } = setup();
      comparator.intended(unused("False"));
      comparator.observed(unused("True"));
      comparator.observed(unused("False"));
      assert.deepEqual(outcomes(), []);
      assert.equal(comparator.pending, 1);
      clock.advance(GRACE);
      assert.deepEqual(outcomes(), ["agree unused pvc ns/a kvc=False upstream=False"]);
      assert.equal(comparator.pending, 0);
    });

    test("settled on different values: differ; one side alone: one-sided", () => {
      const { clock, comparator, outcomes } = setup();
      comparator.intended(unused("False"));
      comparator.observed(unused("True"));
      clock.advance(GRACE);
      comparator.observed(unused("False"));
      clock.advance(GRACE);
      assert.deepEqual(outcomes(), [
        "differ unused pvc ns/a kvc=False upstream=True",
        "upstream-only unused pvc ns/a kvc=- upstream=False",
      ]);
    });

    test("a claim deleting before the window closes: one side alone is dropped, both are compared", () => {
      const { clock, comparator, outcomes } = setup();
      comparator.intended(unused("True NoPodsUsingPVC"));
      comparator.conditionEnded("unused pvc ns/a");
      clock.advance(GRACE);
      assert.deepEqual(outcomes(), [], "upstream met the deleting version first: no decision to compare");
      assert.equal(comparator.pending, 0);
      comparator.intended(unused("False PodUsingPVC"));
      comparator.observed(unused("True NoPodsUsingPVC"));
      comparator.conditionEnded("unused pvc ns/a");
      assert.deepEqual(outcomes(), [
        "differ unused pvc ns/a kvc=False PodUsingPVC upstream=True NoPodsUsingPVC",
      ]);
      comparator.conditionEnded("unused pvc ns/b");
      clock.advance(GRACE);
      assert.equal(outcomes().length, 1);
    });

    test("a repeat of a settled value opens no window; a confirmation counts only within one", () => {
      const { clock, comparator, outcomes } = setup();
      comparator.confirmed(unused("True"));
      comparator.observed(unused("True"));
      comparator.confirmed(unused("True"));
      clock.advance(GRACE);
      comparator.intended(unused("True"));
      comparator.observed(unused("True"));
      clock.advance(GRACE);
      assert.deepEqual(outcomes(), ["agree unused pvc ns/a kvc=True upstream=True"]);
      assert.deepEqual(comparator.waiting(10), []);
    });
  });

  test("stop() drops pending decisions and their timers", () => {
    const { clock, comparator, outcomes } = setup();
    comparator.intended(binding("ns/a", "pv-1"));
    comparator.stop();
    assert.equal(clock.pendingTimers, 0);
    clock.advance(GRACE);
    assert.deepEqual(outcomes(), []);
  });
});
