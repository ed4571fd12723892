import assert from "node:assert/strict";
import { test } from "node:test";
import type { Options } from "yargs";
import { duration, float, int, strings, typeName, withFlagNames } from "../../src/app/flag-types.js";
import { KCM_FLAGS } from "../../src/app/kcm-flags.js";
import { RUN_FLAGS } from "../../src/app/options.js";

test("values parse as pflag's types do, and a bad one says what was typed", () => {
  assert.equal(duration("1m30s"), 90_000);
  assert.equal(float()("-1"), -1);
  assert.equal(float()(0.5), 0.5);
  assert.throws(() => float()("abc"), /^Error: want a number, got "abc"$/);
  assert.throws(() => float()(""), /want a number, got ""/);
  assert.equal(int(1)("30"), 30);
  assert.throws(() => int(1)("1.5"), /^Error: want an integer >= 1, got "1.5"$/);
  assert.throws(() => int(0)("-1"), /want an integer >= 0, got "-1"/);
  assert.throws(() => int(0)(String(2 ** 31)), /want an integer/);
  assert.deepEqual(strings("*,-a, b,"), ["*", "-a", "b"]);
  assert.deepEqual(strings(["a,b", "c"]), ["a", "b", "c"]);
});

test("a flag's error names it; a repeated flag keeps its last value, a list adds up", () => {
  const flags = withFlagNames({
    period: { type: "string", coerce: duration },
    qps: { coerce: float() },
    list: { type: "string", coerce: strings },
    on: { type: "boolean" },
  } satisfies Record<string, Options>);
  assert.equal(flags.period.coerce(["1s", "2s"]), 2000);
  assert.equal(flags.on.coerce([true, false]), false);
  assert.deepEqual(flags.list.coerce(["a", "b,c"]), ["a", "b", "c"]);
  assert.throws(() => flags.qps.coerce("abc"), /^Error: --qps: want a number, got "abc"$/);
  assert.throws(() => flags.period.coerce("soon"), /^Error: --period: invalid duration "soon"/);
});

/** Where kvc means something else than KCM on purpose, and why. */
const DIFFERENT_DEFAULT: Record<string, string> = {
  // KCM holds the kube-controller-manager Lease; kvc must not contend for it.
  "leader-elect-resource-name": "kube-volume-controller",
  // kvc logs Kubernetes-style JSON by default; "text" is pino-pretty, not klog's text format.
  "logging-format": "json",
};

test("every flag kvc shares with KCM has KCM's type and default (durations, int32, float32, lists)", () => {
  const family: Record<string, string[]> = {
    duration: ["duration"],
    float: ["float32", "float"],
    int: ["int32", "int", "Level"],
    boolean: ["bool"],
    strings: ["strings"],
    string: ["string", "ip"],
    colonSeparatedMultimapStringString: ["colonSeparatedMultimapStringString"],
  };
  const normalise = (d: string | undefined) =>
    (d ?? "").replace(/^"(.*)"$/, "$1").replace(/^\[(.*)\]$/, "$1");
  for (const [name, flag] of Object.entries(RUN_FLAGS) as [string, Options][]) {
    const kcm = KCM_FLAGS.find((f) => f.name === name);
    if (!kcm) continue;
    assert.ok(
      family[typeName(flag)]?.includes(kcm.type),
      `--${name}: kvc ${typeName(flag)}, KCM ${kcm.type}`,
    );
    const ours = String(flag.default ?? "");
    const theirs =
      normalise(kcm.default) || (kcm.type === "bool" ? "false" : kcm.type === "Level" ? "0" : "");
    assert.equal(ours, DIFFERENT_DEFAULT[name] ?? theirs, `--${name}: default`);
  }
});
