import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";
import { fileURLToPath } from "node:url";

/**
 * test/control-plane/build.sh against a stand-in `go` (the real build takes minutes to hours): which
 * binaries it builds, its per-binary stamps and its progress lines. The stand-in answers `go list`
 * with $FAKE_GO_PACKAGES stale packages and `go build -v` by naming that many packages, then writing
 * the binary; it logs each build to $FAKE_GO_LOG.
 */
const script = fileURLToPath(new URL("../../test/control-plane/build.sh", import.meta.url));
const dir = mkdtempSync(join(tmpdir(), "kvc-build-sh-"));
after(() => {
  rmSync(dir, { recursive: true, force: true });
});
writeFileSync(
  join(dir, "go"),
  `#!/usr/bin/env bash
set -eu
cmd=$1; shift
out=""; pkg=""
while [[ $# -gt 0 ]]; do
  case $1 in -o) out=$2; shift 2 ;; -tags|-ldflags|-f) shift 2 ;; -*) shift ;; *) pkg=$1; shift ;; esac
done
case $cmd in
list) for ((i = 0; i < FAKE_GO_PACKAGES; i++)); do echo x; done ;;
build)
  echo "$pkg" >>"$FAKE_GO_LOG"
  echo "$PWD" >>"$FAKE_GO_LOG.dirs"
  for ((i = 0; i < FAKE_GO_PACKAGES; i++)); do echo "example.com/$pkg/p$i" >&2; done
  if [[ -n \${FAKE_GO_FAIL:-} ]]; then echo "# example.com/broken" >&2; echo "broken.go:1: syntax error" >&2; exit 1; fi
  printf '#!/bin/sh\\n' >"$out"; chmod +x "$out" ;;
esac
`,
);
chmodSync(join(dir, "go"), 0o755);

function build(args: string[], env: Record<string, string> = {}) {
  const cache = join(dir, "cache");
  const log = join(dir, "builds.log");
  rmSync(log, { force: true });
  rmSync(`${log}.dirs`, { force: true });
  const r = spawnSync(script, args, {
    encoding: "utf8",
    env: {
      ...process.env,
      PATH: `${dir}:${process.env.PATH ?? ""}`,
      KVC_CACHE_DIR: cache,
      FAKE_GO_PACKAGES: "20",
      FAKE_GO_LOG: log,
      ...env,
    },
  });
  return {
    ...r,
    built: existsSync(log) ? readFileSync(log, "utf8").trim().split("\n") : [],
    /** The module directory of each build. */
    dirs: existsSync(`${log}.dirs`) ? readFileSync(`${log}.dirs`, "utf8").trim().split("\n") : [],
    outDir: r.stdout.trim().split("\n").at(-1) ?? "",
  };
}

test("build.sh builds only the binaries asked for, once each (a stamp per binary)", () => {
  const first = build(["kube-apiserver", "etcd"]);
  assert.equal(first.status, 0, first.stderr);
  assert.deepEqual(first.built, ["k8s.io/kubernetes/cmd/kube-apiserver", "go.etcd.io/etcd/server/v3"]);
  assert.ok(existsSync(join(first.outDir, "kube-apiserver")));
  assert.ok(!existsSync(join(first.outDir, "kube-controller-manager")), "kube-controller-manager not built");

  const again = build(["kube-apiserver", "etcd"]);
  assert.equal(again.status, 0, again.stderr);
  assert.deepEqual(again.built, [], "nothing rebuilt");
  assert.equal(again.stderr, "", "silent when everything is built");
  assert.equal(again.outDir, first.outDir);

  const all = build([]);
  assert.equal(all.status, 0, all.stderr);
  assert.deepEqual(all.built, ["k8s.io/kubernetes/cmd/kube-controller-manager"], "no argument: all three");
});

test("build.sh builds helm and promtool from modules of their own, each stamped by its own module", () => {
  const r = build(["helm", "promtool", "kube-apiserver"], { KVC_CACHE_DIR: join(dir, "tools-cache") });
  assert.equal(r.status, 0, r.stderr);
  assert.deepEqual(r.built, [
    "helm.sh/helm/v4/cmd/helm",
    "github.com/prometheus/prometheus/cmd/promtool",
    "k8s.io/kubernetes/cmd/kube-apiserver",
  ]);
  const stamp = (name: string) => readFileSync(join(r.outDir, `.stamp-${name}`), "utf8");
  // A new helm or promtool must not relink the control plane, nor a new control plane the tools.
  assert.equal(new Set([stamp("helm"), stamp("promtool"), stamp("kube-apiserver")]).size, 3);
});

test("build.sh reports packages compiled of total, elapsed and an estimate of what is left", () => {
  const r = build(["kube-controller-manager"], { KVC_CACHE_DIR: join(dir, "progress-cache") });
  assert.equal(r.status, 0, r.stderr);
  const lines = r.stderr.split("\n");
  assert.ok(
    lines.includes(
      "building kube-controller-manager: 20 packages to compile (a cold build takes many minutes) ...",
    ),
    r.stderr,
  );
  const progress = lines.filter((l) => /^building kube-controller-manager: \d+\/20 packages/.test(l));
  assert.equal(progress.length, 10, `one line per tenth:\n${r.stderr}`);
  assert.match(
    progress[0] ?? "",
    /^building kube-controller-manager: 2\/20 packages, 0m0\ds elapsed, about 0m\d\ds left$/,
  );
  assert.match(progress.at(-1) ?? "", /^building kube-controller-manager: 20\/20 packages, 0m0\ds elapsed$/);
  assert.match(r.stderr, /^built kube-controller-manager in 0m0\ds$/m);
});

test("build.sh passes a failed build's errors on, leaves no binary and fails", () => {
  const r = build(["etcd"], { KVC_CACHE_DIR: join(dir, "failed-cache"), FAKE_GO_FAIL: "1" });
  assert.notEqual(r.status, 0);
  assert.match(r.stderr, /^broken\.go:1: syntax error$/m);
  assert.ok(!r.stderr.includes("example.com/go.etcd.io"), "package names are counted, not printed");
  const out = join(dir, "failed-cache", "k8s");
  const files = spawnSync("find", [out, "-type", "f"], { encoding: "utf8" }).stdout.trim();
  assert.equal(files, "", "no binary, no stamp, no temporary file");
});

test("build.sh refuses a binary it does not know", () => {
  const r = build(["kube-dns"]);
  assert.equal(r.status, 2);
  assert.match(
    r.stderr,
    /unknown binary "kube-dns" \(want kube-apiserver, kube-controller-manager, etcd, kube-scheduler, kube-proxy, kubelet, kubectl, e2e.test, ginkgo, helm or promtool\)/,
  );
  assert.deepEqual(r.built, []);
});

test("build.sh --skew builds kube-apiserver from skew/ at its version, into a directory and stamp of its own", () => {
  const controlPlane = fileURLToPath(new URL("../../test/control-plane/", import.meta.url));
  const skew = readFileSync(join(controlPlane, "skew", "K8S_VERSION"), "utf8").trim();
  const pinned = readFileSync(join(controlPlane, "K8S_VERSION"), "utf8").trim();
  assert.notEqual(skew, pinned);
  const cache = join(dir, "skew-cache");
  const pinnedBuild = build(["kube-apiserver"], { KVC_CACHE_DIR: cache });
  assert.equal(pinnedBuild.status, 0, pinnedBuild.stderr);
  assert.equal(pinnedBuild.outDir, join(cache, "k8s", pinned));

  const first = build(["--skew", "kube-apiserver"], { KVC_CACHE_DIR: cache });
  assert.equal(first.status, 0, first.stderr);
  assert.equal(first.outDir, join(cache, "k8s", skew));
  assert.deepEqual(
    first.built,
    ["k8s.io/kubernetes/cmd/kube-apiserver"],
    "built, though the pinned one is cached",
  );
  assert.deepEqual(first.dirs, [join(controlPlane, "skew")], "from the skew module");
  assert.match(first.stderr, new RegExp(`^building kube-apiserver \\(${skew.replaceAll(".", "\\.")}, `, "m"));

  const again = build(["--skew"], { KVC_CACHE_DIR: cache });
  assert.equal(again.status, 0, again.stderr);
  assert.deepEqual(again.built, [], "no argument: kube-apiserver, cached");
  assert.equal(again.outDir, first.outDir);
  assert.deepEqual(
    build(["kube-apiserver"], { KVC_CACHE_DIR: cache }).built,
    [],
    "the pinned one still cached",
  );

  const etcd = build(["--skew", "etcd"], { KVC_CACHE_DIR: cache });
  assert.equal(etcd.status, 2);
  assert.match(
    etcd.stderr,
    /build\.sh --skew: unknown binary "etcd" \(want kube-apiserver; etcd is the pinned one\)/,
  );
  assert.deepEqual(etcd.built, []);
});
