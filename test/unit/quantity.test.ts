import assert from "node:assert/strict";
import { test } from "node:test";
import {
  compareQuantities,
  parseQuantity,
  quantityValue,
  tryParseQuantity,
  ZERO_QUANTITY,
  type Quantity,
} from "../../src/util/quantity.js";

/** The value as sign·digits·10^exponent text, e.g. "1073741824e0". */
const show = (q: Quantity | undefined): string | undefined =>
  q && (q.sign === 0 ? "0" : `${q.sign < 0 ? "-" : ""}${q.digits}e${q.exponent}`);
const cmp = (a: string, b: string): number => compareQuantities(parseQuantity(a), parseQuantity(b));

test("parseQuantity reads binary, decimal, exponent and milli forms exactly", () => {
  assert.equal(show(parseQuantity("1Gi")), "1073741824e0");
  assert.equal(show(parseQuantity("1.5Gi")), "1610612736e0");
  assert.equal(show(parseQuantity("500M")), "5e8");
  assert.equal(show(parseQuantity("1e3")), "1e3");
  assert.equal(show(parseQuantity("100m")), "1e-1");
  assert.equal(show(parseQuantity("0")), "0");
  assert.equal(show(parseQuantity("-0.5n")), "-1e-9", "fractions of a nano round away from zero");
  assert.equal(show(parseQuantity("1.5e-9")), "2e-9");
  assert.equal(show(parseQuantity("0.1n")), "1e-9");
  assert.equal(show(parseQuantity("1.00000000001")), "1000000001e-9", "slow path rounds up too");
});

test("every suffix of suffix.go, each with its own exponent (StrykerJS found k, T, P, Ti, Pi, u untested)", () => {
  const decimal = { n: -9, u: -6, m: -3, k: 3, M: 6, G: 9, T: 12, P: 15, E: 18 };
  for (const [suffix, exponent] of Object.entries(decimal)) {
    assert.equal(show(parseQuantity(`7${suffix}`)), `7e${exponent}`, suffix);
  }
  const binary = { Ki: 10, Mi: 20, Gi: 30, Ti: 40, Pi: 50, Ei: 60 };
  for (const [suffix, power] of Object.entries(binary)) {
    assert.equal(cmp(`3${suffix}`, (3n * 2n ** BigInt(power)).toString()), 0, suffix);
  }
});

test("upstream's quirks: bare suffixes and signs are zero, the e exponent wraps as int32, BinarySI is capped", () => {
  for (const zero of ["Ki", "e5", "+", "-", ".", "m", "-000"])
    assert.equal(show(parseQuantity(zero)), "0", zero);
  assert.equal(show(parseQuantity("1e4294967296")), "1e0", "2^32 truncates to int32 0");
  assert.equal(show(parseQuantity("1e4294967299")), "1e3");
  assert.equal(show(parseQuantity("1E")), "1e18", "E alone is exa");
  assert.equal(show(parseQuantity("9Ei")), "9223372036854775807e0");
  assert.equal(show(parseQuantity("-9223372036854775807Ki")), "-9223372036854775807e0");
  assert.equal(show(parseQuantity("0.5Ki")), "512e0");
  assert.equal(show(parseQuantity("1e-9223372036854775808")), "1e0", "int64 minimum truncates to 0");
  assert.ok(cmp("1Gi", "1G") > 0);
  assert.ok(cmp("1025Mi", "1Gi") > 0);
  assert.equal(cmp("1Gi", "1073741824"), 0);
  assert.equal(cmp("1.5Gi", "1536Mi"), 0);
  assert.equal(cmp("-1", "-1000m"), 0);
  assert.ok(cmp("-2", "-1") < 0);
});

test("unparsable quantities are refused with upstream's message", () => {
  for (const bad of [
    "",
    " 1",
    "1 ",
    "1GB",
    "1 Gi",
    "one",
    "1.2.3",
    "1gi",
    "--1",
    "1e",
    "1e+",
    "1Ee3",
    "e-10",
    ".e-10",
  ])
    assert.throws(
      () => parseQuantity(bad),
      /^Error: quantity .*: (quantities must match|unable to parse)/,
      bad,
    );
  for (const bad of ["constructor", "toString", "__proto__", "1e9223372036854775808", "1٣", "１"])
    assert.equal(tryParseQuantity(bad), undefined, bad);
  assert.equal(tryParseQuantity(undefined), undefined);
  assert.equal(
    tryParseQuantity(42 as unknown as string),
    undefined,
    "a number where the API would have a string",
  );
});

test("huge and tiny exponents are compared without expanding them", (t) => {
  const start = performance.now();
  const huge = parseQuantity("1e30000000");
  t.diagnostic(`parsing 1e30000000 took ${(performance.now() - start).toFixed(3)} ms`);
  // The work is bounded by what is kept: one digit and an exponent, not 30 million digits.
  assert.deepEqual(huge, { sign: 1, digits: "1", exponent: 30_000_000 });
  assert.ok(cmp("1e30000000", "9Ei") > 0);
  assert.ok(cmp("1e30000000", "2e29999999") > 0);
  assert.ok(cmp("1e30000000", "10e29999999") === 0);
  assert.ok(cmp("-1e30000000", "1n") < 0);
  assert.equal(show(parseQuantity("1e-30000000")), "1e-9", "a positive value rounds up to one nano");
  assert.equal(show(parseQuantity("1e2147483647")), "1e2147483647");
  // Go's int32 shift wraps: 9 - (-2^31+...) overflows, and the value rounds to one nano.
  assert.equal(show(parseQuantity("1e-2147483648")), "1e-9");
  // A megabyte of digits: linear work, exact comparison.
  const many = "9".repeat(1 << 20);
  assert.ok(cmp(many, `1e${1 << 20}`) < 0);
  assert.ok(cmp(`${many}.5`, many) > 0);
  assert.equal(cmp(`0.${many}Ki`, "1Ki"), 0, "a Ki fraction rounds up to the nano");
});

test("quantityValue is Value(): rounded up, saturated to int64 instead of wrapping", () => {
  assert.equal(quantityValue(parseQuantity("1.5")), 2n);
  assert.equal(quantityValue(parseQuantity("-1.5")), -2n);
  assert.equal(quantityValue(parseQuantity("1Gi")), 1n << 30n);
  assert.equal(quantityValue(parseQuantity("1e30000000")), (1n << 63n) - 1n);
  assert.equal(quantityValue(parseQuantity("1n")), 1n);
  assert.equal(quantityValue(ZERO_QUANTITY), 0n);
});
