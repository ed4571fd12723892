/**
 * src/util/quantity.ts, and the matcher oracle's own port, against upstream's resource.Quantity (Go,
 * apimachinery at the pinned release): the same strings parse, and every comparison agrees. Exponents Go would expand for minutes
 * (|exponent| in the millions, or wrapped near ±2^31) stay out; the unit test covers those.
 */
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import fc from "fast-check";
import { compareQuantities, tryParseQuantity } from "../../src/util/quantity.js";
import { startQuantityOracle, type QuantityOracle } from "../support/quantity-oracle.js";
import * as matcherOracle from "../unit/matcher-reference.js";

let oracle: QuantityOracle;
before(() => {
  oracle = startQuantityOracle();
});
after(() => oracle.close());

const SUFFIXES = ["", "n", "u", "m", "k", "M", "G", "T", "P", "E", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"];
const digits = (maxLength: number): fc.Arbitrary<string> =>
  fc.oneof(
    fc.string({ unit: fc.constantFrom(..."0123456789"), maxLength }),
    fc.string({ unit: fc.constantFrom("0", "9"), maxLength }),
  );
/** Exponents Go computes quickly, plus ones that only look huge (int32 truncation of an int64). */
const exponent = fc.oneof(
  fc.integer({ min: -40, max: 40 }),
  fc.integer({ min: -3000, max: 3000 }),
  fc
    .tuple(fc.integer({ min: -2, max: 2 }), fc.integer({ min: -30, max: 30 }))
    .map(([k, e]) => Number(BigInt.asIntN(64, BigInt(k) * 2n ** 32n + BigInt(e)))),
);
const exponentSuffix = fc
  .tuple(fc.constantFrom("e", "E"), fc.constantFrom("", "+", "-"), exponent, fc.constantFrom("", "0", "00"))
  .map(([e, sign, n, zeros]) => `${e}${n < 0 ? "-" : sign}${zeros}${Math.abs(n)}`);
const wellFormed = fc
  .tuple(
    fc.constantFrom("", "", "+", "-"),
    digits(25),
    fc.constantFrom("", "", "."),
    digits(25),
    fc.oneof(fc.constantFrom(...SUFFIXES), exponentSuffix),
  )
  .map((parts) => parts.join(""));
/** Short strings of the characters the parser looks at, and some it must refuse. */
const junk = fc.string({ unit: fc.constantFrom(..."0123456789.+-eEinumkKMGTPi xé\t٣"), maxLength: 6 });
const whitespace = fc
  .tuple(fc.constantFrom(" ", "\t", "\n", "\u00a0"), wellFormed, fc.boolean())
  .map(([space, text, before]) => (before ? space + text : text + space));
const quantityText = fc.oneof(
  { arbitrary: wellFormed, weight: 6 },
  { arbitrary: junk, weight: 3 },
  { arbitrary: whitespace, weight: 1 },
  {
    arbitrary: fc.constantFrom("0", "1e30000", "-1e-30000", "9Ei", "8Ei", "0.5Ki", ".", "+", "Ki", "e"),
    weight: 1,
  },
);

test("parse success and every Cmp agree with upstream's resource.Quantity", async () => {
  await fc.assert(
    fc.asyncProperty(fc.array(quantityText, { minLength: 1, maxLength: 12 }), async (texts) => {
      const go = await oracle.ask(texts);
      const ours = texts.map((text) => tryParseQuantity(text));
      assert.deepEqual(
        ours.map((q) => q !== undefined),
        go.ok,
        "parse success",
      );
      texts.forEach((a, i) => {
        texts.forEach((b, j) => {
          const [x, y] = [ours[i], ours[j]];
          const expected = go.cmp[i]?.[j] ?? null;
          const actual = x && y ? compareQuantities(x, y) : null;
          assert.equal(actual, expected, `Cmp(${JSON.stringify(a)}, ${JSON.stringify(b)})`);
        });
      });
    }),
    { numRuns: 2000, seed: 12 },
  );
});

test("the matcher's oracle (test/unit/matcher-reference.ts) parses and compares as upstream within its domain", async () => {
  // Its own port of ParseQuantity refuses exponents beyond ±999, which its property tests never make.
  const small = fc.integer({ min: -999, max: 999 });
  const smallExponent = fc
    .tuple(fc.constantFrom("e", "E"), fc.constantFrom("", "+", "-"), small)
    .map(([e, sign, n]) => `${e}${n < 0 ? "-" : sign}${Math.abs(n)}`);
  const text = fc.oneof(
    {
      arbitrary: fc
        .tuple(
          fc.constantFrom("", "", "+", "-"),
          digits(25),
          fc.constantFrom("", "", "."),
          digits(25),
          fc.oneof(fc.constantFrom(...SUFFIXES), smallExponent),
        )
        .map((parts) => parts.join("")),
      weight: 6,
    },
    { arbitrary: junk, weight: 3 },
    { arbitrary: fc.constantFrom("9Ei", "8Ei", "0.5Ki", ".", "+", "Ki", "e", "1.5Gi", "800E"), weight: 1 },
  );
  await fc.assert(
    fc.asyncProperty(fc.array(text, { minLength: 1, maxLength: 12 }), async (texts) => {
      const go = await oracle.ask(texts);
      const ours = texts.map((t) => matcherOracle.parseQuantity(t));
      assert.deepEqual(
        ours.map((q) => q !== undefined),
        go.ok,
        `parse success of ${JSON.stringify(texts)}`,
      );
      texts.forEach((a, i) => {
        texts.forEach((b, j) => {
          const [x, y] = [ours[i], ours[j]];
          const actual = x !== undefined && y !== undefined ? matcherOracle.cmp(x, y) : null;
          assert.equal(actual, go.cmp[i]?.[j] ?? null, `Cmp(${JSON.stringify(a)}, ${JSON.stringify(b)})`);
        });
      });
    }),
    { numRuns: 2000, seed: 12 },
  );
});
