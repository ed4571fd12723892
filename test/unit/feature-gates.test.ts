import assert from "node:assert/strict";
import { test } from "node:test";
import { parseFeatureGates } from "../../src/app/feature-gates.js";
import { withFlagNames } from "../../src/app/flag-types.js";
import { RUN_FLAGS } from "../../src/app/options.js";

const UNUSED = "PersistentVolumeClaimUnusedSinceTime";

test("no gates set: each at its v1.37 default", () => {
  const gates = parseFeatureGates([]);
  assert.equal(gates.enabled(UNUSED), true);
  assert.deepEqual([gates.withoutEffect, gates.warnings], [[], []]);
});

test("a gate set with or without the kube: component, in any of Go's bool spellings; the last one wins", () => {
  assert.equal(parseFeatureGates([`${UNUSED}=false`]).enabled(UNUSED), false);
  assert.equal(parseFeatureGates([` kube:${UNUSED} = F `]).enabled(UNUSED), false);
  assert.equal(parseFeatureGates([`${UNUSED}=0`, `${UNUSED}=True`]).enabled(UNUSED), true);
});

test("AllBeta sets the beta gates not set themselves; a gate set itself wins", () => {
  assert.equal(parseFeatureGates(["AllBeta=false"]).enabled(UNUSED), false);
  assert.equal(parseFeatureGates([`${UNUSED}=true`, "AllBeta=false"]).enabled(UNUSED), true);
  assert.equal(parseFeatureGates(["AllAlpha=false"]).enabled(UNUSED), true);
});

test("gates the volume loops do not read are accepted and named; GA and deprecated ones warned of as KCM does", () => {
  const gates = parseFeatureGates(["CSIVolumeHealth=true", "VolumeAttributesClass=true", "AllBeta=true"]);
  assert.deepEqual(gates.withoutEffect, ["CSIVolumeHealth", "VolumeAttributesClass"]);
  assert.deepEqual(gates.warnings, [
    "setting GA feature gate VolumeAttributesClass=true: it will be removed in a future release",
  ]);
});

test("what KCM refuses to start with is refused in its words", () => {
  const refused = (items: string[], message: string) => {
    assert.throws(() => parseFeatureGates(items), { message });
  };
  refused(["NoSuchGate=true"], "unrecognized feature gate: NoSuchGate");
  refused([UNUSED], `missing bool value for ${UNUSED}`);
  refused(
    [`${UNUSED}=yes`],
    `invalid value of ${UNUSED}=yes, err: strconv.ParseBool: parsing "yes": invalid syntax`,
  );
  // Locked to true since v1.36.
  refused(
    ["VolumeAttributesClass=false"],
    "cannot set feature gate VolumeAttributesClass to false, feature is locked to true",
  );
  refused([`wardle:${UNUSED}=true`], "component not registered: wardle");
  refused(
    [`kube:${UNUSED}=true`, "AllBeta=true"],
    "set kube feature gates with default empty prefix or kube: prefix consistently, do not mix use",
  );
});

test("--feature-gates: comma lists, repeatable (pflag's colonSeparatedMultimapStringString), errors naming the flag", () => {
  const coerce = withFlagNames(RUN_FLAGS)["feature-gates"].coerce;
  const gates = coerce([`AllBeta=false,CSIVolumeHealth=true`, `${UNUSED}=true`]) as ReturnType<
    typeof parseFeatureGates
  >;
  assert.equal(gates.enabled(UNUSED), true);
  assert.deepEqual(gates.withoutEffect, ["CSIVolumeHealth"]);
  assert.throws(() => coerce("Nope=true"), { message: "--feature-gates: unrecognized feature gate: Nope" });
});
