import assert from "node:assert/strict";
import { test } from "node:test";
import fc from "fast-check";
import { formatDuration, parseDuration } from "../../src/util/duration.js";

test("parseDuration reads Go duration strings", () => {
  assert.equal(parseDuration("15s"), 15_000);
  assert.equal(parseDuration("1m30s"), 90_000);
  assert.equal(parseDuration("500ms"), 500);
  assert.equal(parseDuration("1.5h"), 5_400_000);
  assert.equal(parseDuration("0"), 0);
  assert.equal(parseDuration("2m0s"), 120_000);
});

test("parseDuration rejects what Go rejects", () => {
  for (const bad of ["", "15", "s", "1x", "-1s", "1s x", "1 s", "abc", "1s2"]) {
    assert.throws(() => parseDuration(bad), /invalid duration/, bad);
  }
});

test("formatDuration round-trips through parseDuration", () => {
  fc.assert(
    fc.property(fc.integer({ min: 0, max: 10 * 3_600_000 }), (ms) => {
      assert.equal(parseDuration(formatDuration(ms)), ms);
    }),
  );
  assert.equal(formatDuration(15_000), "15s");
  assert.equal(formatDuration(60_000), "1m0s");
  assert.equal(formatDuration(3_600_000), "1h0m0s");
});
