import assert from "node:assert/strict";
import { test } from "node:test";
import { parseQuantity, tryParseQuantity } from "../../src/util/quantity.js";

const G = 1_000_000_000n;

test("parseQuantity reads binary, decimal, exponent and milli forms exactly", () => {
  assert.equal(parseQuantity("1Gi"), (1n << 30n) * G);
  assert.equal(parseQuantity("1.5Gi"), 3n * (1n << 29n) * G);
  assert.equal(parseQuantity("500M"), 500_000_000n * G);
  assert.equal(parseQuantity("1e3"), 1000n * G);
  assert.equal(parseQuantity("100m"), 100_000_000n);
  assert.equal(parseQuantity("8Ei"), (1n << 63n) * G, "beyond float precision");
  assert.equal(parseQuantity("0"), 0n);
  assert.equal(parseQuantity("1n"), 1n);
  assert.equal(parseQuantity("0.1n"), 1n, "fractions of a nano round up");
  assert.ok(parseQuantity("1Gi") > parseQuantity("1G"));
  assert.ok(parseQuantity("1025Mi") > parseQuantity("1Gi"));
});

test("unparsable or missing quantities are refused", () => {
  for (const bad of ["", "Gi", "1GB", "1 Gi", "one", "1.2.3", "1gi", "--1"]) {
    assert.throws(() => parseQuantity(bad), /quantity/, bad);
    assert.equal(tryParseQuantity(bad), undefined);
  }
  assert.equal(tryParseQuantity(undefined), undefined);
});
