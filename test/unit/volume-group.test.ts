import assert from "node:assert/strict";
import { describe, test } from "node:test";
import type { V1LabelSelector } from "@kubernetes/client-node";
import {
  CapacityOrder,
  capacityKey,
  capacityProbe,
  compareSized,
  parseCapacity,
  type Sized,
} from "../../src/persistentvolume/capacity-order.js";
import { compileLabelSelector } from "../../src/persistentvolume/pv-helpers.js";
import { selectorAnchors, VolumeGroup, type Labelled } from "../../src/persistentvolume/volume-group.js";
import { compareQuantities, parseQuantity } from "../../src/util/quantity.js";
import { mulberry32 } from "../support/random.js";

/** Exact keys and NaN keys side by side: whole bytes, fractions, huge exponents, zero, negatives. */
const QUANTITIES = [
  "0",
  "1",
  "1500m",
  "1k",
  "1Ki",
  "1G",
  "1Gi",
  "1073741824",
  "1.5Gi",
  "2Gi",
  "10G",
  "10Gi",
  "100Gi",
  "1Ti",
  "999999999999999",
  "1000000000000000",
  "1Pi",
  "800E",
  "1e30",
  "-1Gi",
  "0.5",
];

function item(name: string, text: string, labels?: Record<string, string>): Sized & Labelled {
  const capacity = parseQuantity(text);
  return { name, capacity, capacityKey: capacityKey(capacity), labels };
}

/** The reference order: Quantity.Cmp, then name. */
function reference(a: Sized, b: Sized): number {
  return compareQuantities(a.capacity, b.capacity) || (a.name < b.name ? -1 : a.name > b.name ? 1 : 0);
}

describe("capacityKey and compareSized", () => {
  test("an exact key is the value; compareSized orders every pair as Quantity.Cmp then name", () => {
    assert.equal(capacityKey(parseQuantity("1Gi")), 2 ** 30);
    assert.equal(capacityKey(parseQuantity("-1Gi")), -(2 ** 30));
    assert.ok(Number.isNaN(capacityKey(parseQuantity("1500m"))), "a fraction has no exact key");
    assert.ok(Number.isNaN(capacityKey(parseQuantity("1e30"))), "nor a value beyond 10^15");
    const items = QUANTITIES.flatMap((q) => [item(`a-${q}`, q), item(`b-${q}`, q)]);
    for (const a of items) {
      for (const b of items) {
        assert.equal(Math.sign(compareSized(a, b)), Math.sign(reference(a, b)), `${a.name} vs ${b.name}`);
      }
    }
  });

  test("parseCapacity: the same Quantity for the same text, undefined for bad text", () => {
    assert.equal(parseCapacity("10Gi"), parseCapacity("10Gi"));
    assert.equal(parseCapacity("10Gi")?.key, 10 * 2 ** 30);
    assert.equal(parseCapacity("lots"), undefined);
    assert.equal(parseCapacity(undefined), undefined);
    assert.equal(parseCapacity("9".repeat(100))?.key, NaN);
  });
});

describe("CapacityOrder", () => {
  test("random inserts and removals stay in (capacity, name) order through chunk splits and merges", () => {
    const random = mulberry32(7);
    const order = new CapacityOrder<Sized>();
    const model = new Map<string, Sized>();
    for (let step = 0; step < 20_000; step++) {
      const name = `pv-${Math.floor(random() * 3_000)}`;
      const existing = model.get(name);
      if (existing) {
        assert.equal(order.remove(existing), true);
        model.delete(name);
      } else {
        const added = item(name, QUANTITIES[Math.floor(random() * QUANTITIES.length)]!);
        order.insert(added);
        model.set(name, added);
      }
      if (step % 1_000 !== 999) continue;
      assert.equal(order.size, model.size);
      const sorted = [...model.values()].sort(reference);
      for (const q of QUANTITIES) {
        const min = capacityProbe(parseQuantity(q));
        const odd = (s: Sized) => Number(s.name.slice(3)) % 2 === 1;
        const expected = sorted.find((s) => compareQuantities(s.capacity, min.capacity) >= 0 && odd(s));
        assert.equal(order.first(min, odd), expected, `first odd ≥ ${q}`);
      }
    }
    assert.equal(order.remove(item("absent", "1Gi")), false);
  });

  test("batches of inserts between reads (bulk merges and single inserts), removals of pending items", () => {
    const random = mulberry32(31);
    const order = new CapacityOrder<Sized>();
    const model = new Map<string, Sized>();
    let next = 0;
    for (let round = 0; round < 60; round++) {
      // Batches from 0 to 800: some outnumber a sixteenth of the order (one merge), some do not.
      const batch = Math.floor(random() ** 3 * 800);
      for (let i = 0; i < batch; i++) {
        const added = item(`pv-${next++}`, QUANTITIES[Math.floor(random() * QUANTITIES.length)]!);
        order.insert(added);
        model.set(added.name, added);
      }
      // Removes the newest (still pending until the first removal settles) and some older items.
      for (const name of [`pv-${next - 1}`, `pv-${Math.floor(random() * next)}`]) {
        const existing = model.get(name);
        if (!existing) continue;
        assert.equal(order.remove(existing), true, `remove ${name}`);
        model.delete(name);
      }
      assert.equal(order.size, model.size);
      const sorted = [...model.values()].sort(reference);
      for (const q of QUANTITIES) {
        const min = capacityProbe(parseQuantity(q));
        const expected = sorted.find((s) => compareQuantities(s.capacity, min.capacity) >= 0);
        assert.equal(
          order.first(min, () => true),
          expected,
          `round ${round}: first ≥ ${q}`,
        );
      }
      assert.deepEqual(everyItem(order), sorted, `round ${round}: the whole order`);
    }
  });
});

/** The order's items, smallest first: first() offers each in turn to an `accept` that takes none. */
function everyItem(order: CapacityOrder<Sized>): Sized[] {
  const items: Sized[] = [];
  order.first(capacityProbe(parseQuantity("-1e30")), (s) => {
    items.push(s);
    return false;
  });
  return items;
}

describe("VolumeGroup: a walk of the anchored postings finds what a walk of the whole group finds", () => {
  const VALUES = ["a", "b", "c", "gold"];
  const SELECTORS: V1LabelSelector[] = [
    { matchLabels: { zone: "a" } },
    { matchLabels: { zone: "a", tier: "gold" } },
    { matchExpressions: [{ key: "zone", operator: "In", values: ["a", "b"] }] },
    { matchExpressions: [{ key: "zone", operator: "In", values: ["a", "a"] }] },
    { matchExpressions: [{ key: "tier", operator: "Exists" }] },
    { matchExpressions: [{ key: "host", operator: "Exists" }] },
    {
      matchExpressions: [
        { key: "zone", operator: "In", values: ["b", "c"] },
        { key: "tier", operator: "Exists" },
        { key: "app", operator: "NotIn", values: ["a"] },
      ],
    },
    { matchExpressions: [{ key: "zone", operator: "NotIn", values: ["a"] }] },
    { matchExpressions: [{ key: "tier", operator: "DoesNotExist" }] },
    { matchLabels: { missing: "x" } },
    {},
  ];

  test("selectorAnchors: matchLabels, In and Exists narrow; NotIn and DoesNotExist do not", () => {
    assert.deepEqual(selectorAnchors(undefined), []);
    assert.deepEqual(selectorAnchors(SELECTORS[6]), [
      { key: "zone", values: ["b", "c"] },
      { key: "tier", values: undefined },
    ]);
    assert.deepEqual(selectorAnchors(SELECTORS[7]), []);
  });

  test("random groups, replacements and selectors (seeded)", () => {
    const random = mulberry32(30);
    const oneOf = <T>(values: readonly T[]): T => values[Math.floor(random() * values.length)]!;
    for (let round = 0; round < 20; round++) {
      const group = new VolumeGroup<Sized & Labelled>();
      const model = new Map<string, Sized & Labelled>();
      for (let step = 0; step < 600; step++) {
        const name = `pv-${Math.floor(random() * 300)}`;
        const old = model.get(name);
        if (old) group.remove(old);
        if (old && random() < 0.3) {
          model.delete(name);
          continue;
        }
        const labels: Record<string, string> = {};
        if (random() < 0.5) labels.zone = oneOf(VALUES);
        if (random() < 0.2) labels.tier = "gold";
        if (random() < 0.2) labels.app = oneOf(VALUES);
        // A key with a value per volume: too many values for an Exists anchor.
        if (random() < 0.5) labels.host = name;
        // Hostile: a label that is not a string is no label to a selector.
        if (random() < 0.05) (labels as Record<string, unknown>).zone = 7;
        const added = item(name, oneOf(QUANTITIES.slice(0, 14)), labels);
        group.insert(added);
        model.set(name, added);
      }
      assert.equal(group.isEmpty, model.size === 0);
      const sorted = [...model.values()].sort(reference);
      for (const selector of SELECTORS) {
        const matches = compileLabelSelector(selector);
        if (matches instanceof Error) throw matches;
        const anchors = selectorAnchors(selector);
        for (const q of ["0", "1Gi", "10Gi", "1Ti"]) {
          const min = capacityProbe(parseQuantity(q));
          const accept = (s: Labelled): boolean => matches(s.labels);
          const expected: Sized | undefined = sorted.find(
            (s) => compareQuantities(s.capacity, min.capacity) >= 0 && accept(s),
          );
          assert.equal(group.first(min, anchors, accept), expected, `${JSON.stringify(selector)} ≥ ${q}`);
        }
      }
      for (const s of model.values()) group.remove(s);
      assert.equal(group.isEmpty, true);
    }
  });
});
