import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { test } from "node:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { RUN_FLAGS } from "../../src/app/options.js";
import { kubeadmKcmFlags } from "../support/kubeadm.js";

const cli = fileURLToPath(new URL("../../src/app/cli.ts", import.meta.url));

function kvc(...args: string[]) {
  return kvcWithEnv({}, ...args);
}

/** kvc with `env` over a process environment that names no cluster (no KUBECONFIG, not in a pod). */
function kvcWithEnv(env: Record<string, string>, ...args: string[]) {
  const unset = new Set(["KUBECONFIG", "KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT"]);
  const rest = Object.fromEntries(Object.entries(process.env).filter(([k]) => !unset.has(k)));
  const r = spawnSync(process.execPath, ["--import", "tsx", cli, ...args], {
    encoding: "utf8",
    // A guard against a hang only: tsx compiling the CLI took over 60 s at load average 30-54 (several
    // suites on 2 cores), and every such timeout was a failure of a command that was merely slow.
    timeout: 5 * 60_000,
    env: { ...rest, ...env },
  });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

test("kvc run --help lists KCM's flag names in groups", () => {
  const r = kvc("run", "--help");
  assert.equal(r.code, 0, r.stderr);
  for (const flag of [
    "--kubeconfig",
    "--master",
    "--controllers",
    "--leader-elect",
    "--leader-elect-resource-name",
    "--kube-api-qps",
    "--kube-api-burst",
    "--pvclaimbinder-sync-period",
    "--attach-detach-reconcile-sync-period",
    "--disable-force-detach-on-timeout",
    "--enable-hostpath-provisioner",
    "--flex-volume-plugin-dir",
  ]) {
    assert.match(r.stdout, new RegExp(`${flag}\\b`), flag);
  }
  assert.match(r.stdout, /Leader election:/);
  assert.match(r.stdout, /\[default: "kube-volume-controller"\]/);
});

test("an unknown flag is one line on stderr and exit code 2", () => {
  const r = kvc("run", "--no-such-flag");
  assert.equal(r.code, 2);
  assert.equal(r.stdout, "");
  assert.equal(r.stderr, "kvc: Unknown argument: no-such-flag (see kvc --help)\n");
});

test("a bad value is one line naming the flag, exit code 2", () => {
  for (const [args, message] of [
    [["--pvclaimbinder-sync-period=soon"], /^kvc: --pvclaimbinder-sync-period: invalid duration "soon"/],
    [
      ["--controllers=*,-nosuchcontroller"],
      /^kvc: --controllers: "-nosuchcontroller" is not in the list of known controllers/,
    ],
    [["--kube-api-burst=many"], /^kvc: --kube-api-burst: want an integer >= 1, got "many"/],
    [["--kube-api-burst=1.5"], /^kvc: --kube-api-burst: want an integer >= 1, got "1.5"/],
    [["--kube-api-qps=abc"], /^kvc: --kube-api-qps: want a number, got "abc" \(see kvc --help\)\n$/],
    [
      ["--attach-detach-reconcile-sync-period=90"],
      /^kvc: --attach-detach-reconcile-sync-period: invalid duration "90"/,
    ],
    [["--controllers"], /^kvc: Not enough arguments following: controllers \(see kvc --help\)\n$/],
    [["--cluster-cidr"], /^kvc: --cluster-cidr: flag needs an argument \(see kvc --help\)\n$/],
    [
      ["--allocate-node-cidrs=yes"],
      /^kvc: --allocate-node-cidrs: invalid boolean "yes" \(want true or false\)/,
    ],
    [
      ["--leader-elect-renew-deadline=20s"],
      /^kvc: --leader-elect-lease-duration must exceed --leader-elect-renew-deadline/,
    ],
    [
      ["--leader-elect-resource-name=kube-controller-manager"],
      /^kvc: --leader-elect-resource-name: "kube-controller-manager" is kube-controller-manager's own Lease/,
    ],
    [
      ["--leader-elect-resource-name=kube-controller-manager", "--leader-elect-resource-namespace=kvc"],
      /^kvc: --leader-elect-resource-name: "kube-controller-manager" is kube-controller-manager's own Lease/,
    ],
    [["--logging-format=xml"], /^kvc: Invalid values:/],
    [
      ["--pv-recycler-pod-template-filepath-hostpath=/nonexistent.yaml"],
      /^kvc: --pv-recycler-pod-template-filepath-hostpath: \/nonexistent\.yaml: ENOENT/,
    ],
  ] as const) {
    const r = kvc("run", ...args);
    assert.equal(r.code, 2, args.join(" "));
    assert.match(r.stderr, message);
    assert.equal(r.stderr.trim().split("\n").length, 1, `one line: ${r.stderr}`);
  }
});

test("a kubeconfig path that does not exist is one line, exit code 2", () => {
  const r = kvc("run", "--kubeconfig=/nonexistent/kubeconfig");
  assert.equal(r.code, 2);
  assert.equal(r.stderr, "kvc: --kubeconfig: /nonexistent/kubeconfig: no such file (see kvc --help)\n");
});

test("kvc version prints the package version; no command is a usage error", () => {
  const v = kvc("version");
  assert.equal(v.code, 0);
  assert.match(v.stdout, /^kube-volume-controller v\d+\.\d+\.\d+ \(node v24\./);
  const none = kvc();
  assert.equal(none.code, 2);
  assert.match(none.stderr, /^kvc: name a command: run, dev, explain, shadow report or version/);
});

test("kvc run with no cluster given says what is missing and how to give it", () => {
  const r = kvc("run", "--leader-elect=false", "--secure-port=0");
  assert.equal(r.code, 1);
  assert.equal(
    r.stderr,
    "kvc: error: no cluster to talk to: not running in a pod (KUBERNETES_SERVICE_HOST/PORT unset); " +
      "give --kubeconfig=<file> (or set KUBECONFIG) or --master=<url>\n",
  );
  const env = kvcWithEnv({ KUBECONFIG: "/nonexistent/a:/nonexistent/b" }, "run", "--secure-port=0");
  assert.equal(env.code, 1);
  assert.equal(env.stderr, "kvc: error: KUBECONFIG=/nonexistent/a:/nonexistent/b: no such file\n");
});

test("a kubeadm KCM command line starts kvc run: KCM's other flags and controllers are ignored, named once", () => {
  const dir = mkdtempSync(join(tmpdir(), "kvc-cli-"));
  try {
    // A kubeconfig without a cluster: kvc gets past the command line, warns, and stops there.
    const kubeconfig = join(dir, "controller-manager.conf");
    writeFileSync(kubeconfig, "apiVersion: v1\nkind: Config\nclusters: []\ncontexts: []\nusers: []\n");
    for (const f of ["ca.crt", "ca.key"]) writeFileSync(join(dir, f), "");
    const flags = kubeadmKcmFlags({ kubeconfig, caFile: join(dir, "ca.crt"), keyFile: join(dir, "ca.key") });
    const r = kvc("run", ...flags, "--secure-port=0", "--concurrent-gc-syncs", "5");
    assert.equal(r.code, 1, r.stderr);
    assert.match(r.stderr, /kvc: error: the kubeconfig has no current cluster\n$/);
    const warnings = r.stderr.split("\n").filter((l) => l.includes("kube-controller-manager flags"));
    assert.equal(warnings.length, 1, r.stderr);
    const warning = JSON.parse(warnings[0] ?? "") as { level: number; flags: string[] };
    assert.equal(warning.level, 40);
    const expected = [...flags.map((f) => f.replace(/=.*/, "")), "--concurrent-gc-syncs"].filter(
      (f) => !(f.slice(2) in RUN_FLAGS),
    );
    assert.deepEqual(warning.flags, expected);
    assert.ok(warning.flags.includes("--use-service-account-credentials"));

    // A name KCM does not know is still a usage error, wherever it is on the line.
    const bad = kvc("run", ...flags, "--cluster-cidr", "10.0.0.0/8", "--no-such-flag");
    assert.equal(bad.code, 2);
    assert.equal(bad.stderr, "kvc: Unknown argument: no-such-flag (see kvc --help)\n");
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("kvc dev takes --no-demo, as the README says", () => {
  // The template error comes from the handler, after the parser accepted every flag.
  const r = kvc("dev", "--no-demo", "--pv-recycler-pod-template-filepath-hostpath=/nonexistent.yaml");
  assert.equal(r.code, 2);
  assert.match(r.stderr, /^kvc: --pv-recycler-pod-template-filepath-hostpath: \/nonexistent\.yaml: ENOENT/);
});
