import assert from "node:assert/strict";
import { test } from "node:test";
import { separateIgnoredFlags } from "../../src/app/kcm-command-line.js";
import { KCM_FLAGS } from "../../src/app/kcm-flags.js";
import { RUN_FLAGS } from "../../src/app/options.js";
import { kubeadmKcmFlags } from "../support/kubeadm.js";

const declared = new Set(Object.keys(RUN_FLAGS));
const separate = (...args: string[]) => separateIgnoredFlags(["run", ...args], declared);

test("a kubeadm KCM command line: kvc's flags go on, the others are ignored, each named once", () => {
  const flags = kubeadmKcmFlags({ kubeconfig: "/k.conf", caFile: "/ca.crt", keyFile: "/ca.key" });
  const { args, ignored } = separate(...flags);
  const kept = flags.filter((f) => declared.has(/^--([^=]+)/.exec(f)?.[1] ?? ""));
  assert.deepEqual(args, ["run", ...kept]);
  assert.ok(kept.includes("--kubeconfig=/k.conf") && kept.includes("--leader-elect=true"));
  assert.deepEqual(
    ignored,
    flags.map((f) => f.replace(/=.*/, "")).filter((f) => !declared.has(f.slice(2))),
  );
  assert.ok(ignored.includes("--cluster-signing-key-file"));
});

test("an ignored flag given as `--flag value` takes its value with it, whatever it looks like", () => {
  const { args, ignored } = separate("--cluster-cidr", "10.0.0.0/8", "--concurrent-gc-syncs", "-5", "--v=2");
  assert.deepEqual(args, ["run", "--v=2"]);
  assert.deepEqual(ignored, ["--cluster-cidr", "--concurrent-gc-syncs"]);
  assert.throws(() => separate("--cluster-cidr"), /^Error: --cluster-cidr: flag needs an argument$/);
});

test("an ignored bool flag never takes the next argument; --flag=value must be a Go bool", () => {
  const { args, ignored } = separate("--allocate-node-cidrs", "--kubeconfig=/k", "--profiling=F");
  assert.deepEqual(args, ["run", "--kubeconfig=/k"]);
  assert.deepEqual(ignored, ["--allocate-node-cidrs", "--profiling"]);
  assert.throws(
    () => separate("--allocate-node-cidrs=yes"),
    /--allocate-node-cidrs: invalid boolean "yes" \(want true or false\)/,
  );
  // --version takes an optional value only (pflag NoOptDefVal), so the next argument stays.
  assert.deepEqual(separate("--version", "--v=1").args, ["run", "--v=1"]);
});

test("a repeated ignored flag is named once; names KCM does not know stay for the parser to reject", () => {
  const { args, ignored } = separate(
    "--cluster-cidr=a",
    "--no-such-flag",
    "--cluster-cidr=b",
    "-x",
    "--no-leader-elect",
  );
  assert.deepEqual(args, ["run", "--no-such-flag", "-x", "--no-leader-elect"]);
  assert.deepEqual(ignored, ["--cluster-cidr"]);
});

test("after `--` nothing is taken out", () => {
  assert.deepEqual(separate("--", "--cluster-cidr=a").args, ["run", "--", "--cluster-cidr=a"]);
});

test("what is ignored is every KCM flag minus the declared ones: declaring a flag is the only edit", () => {
  const every = KCM_FLAGS.map((f) => `--${f.name}=${f.type === "bool" ? "true" : "x"}`);
  const ignoredNow = separate(...every).ignored;
  const expected = KCM_FLAGS.map((f) => f.name).filter((n) => !declared.has(n) && n !== "help");
  assert.deepEqual(
    ignoredNow,
    expected.map((n) => `--${n}`),
  );
  const more = separateIgnoredFlags(["run", ...every], new Set([...declared, "cluster-cidr"])).ignored;
  assert.deepEqual(
    more,
    ignoredNow.filter((f) => f !== "--cluster-cidr"),
  );
});
