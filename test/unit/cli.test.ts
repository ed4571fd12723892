import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { test } from "node:test";
import { fileURLToPath } from "node:url";

const cli = fileURLToPath(new URL("../../src/cli.ts", import.meta.url));

function kvc(...args: string[]) {
  const r = spawnSync(process.execPath, ["--import", "tsx", cli, ...args], {
    encoding: "utf8",
    timeout: 60_000,
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
      ["--controllers=*,-nodelifecycle"],
      /^kvc: --controllers: "-nodelifecycle" is not in the list of known controllers/,
    ],
    [["--kube-api-burst=many"], /^kvc: --kube-api-burst: want a number >= 1, got NaN/],
    [
      ["--leader-elect-renew-deadline=20s"],
      /^kvc: --leader-elect-lease-duration must exceed --leader-elect-renew-deadline/,
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
  assert.equal(r.stderr, "kvc: --kubeconfig: /nonexistent/kubeconfig: no such file\n");
});

test("kvc version prints the package version; no command is a usage error", () => {
  const v = kvc("version");
  assert.equal(v.code, 0);
  assert.match(v.stdout, /^kube-volume-controller v\d+\.\d+\.\d+ \(node v24\./);
  const none = kvc();
  assert.equal(none.code, 2);
  assert.match(none.stderr, /^kvc: name a command: run, dev or version/);
});
