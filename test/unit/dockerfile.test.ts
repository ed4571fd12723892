import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import { dockerfileEntrypoint, imageEntrypoint } from "../support/image.js";

// No Docker engine runs here: check what can be checked without one.
const root = fileURLToPath(new URL("../../", import.meta.url));
const dockerfile = readFileSync(join(root, "Dockerfile"), "utf8");
const pkg = JSON.parse(readFileSync(join(root, "package.json"), "utf8")) as { bin: { kvc: string } };
const nodeVersion = (
  JSON.parse(readFileSync(join(root, "node_modules/node/package.json"), "utf8")) as { version: string }
).version;

test("both stages run the exact Node 24 release the tests run, on an exact Debian release", () => {
  const froms = [...dockerfile.matchAll(/^FROM (\S+)/gm)].map((m) => m[1]);
  assert.match(nodeVersion, /^24\./);
  assert.deepEqual(froms, [`node:${nodeVersion}-trixie-slim`, `node:${nodeVersion}-trixie-slim`]);
});

test("PID 1 is Debian's tini, running node: it reaps orphaned driver children and forwards signals", () => {
  assert.match(dockerfile, /apt-get install -y --no-install-recommends tini\b/);
  assert.match(dockerfile, /^COPY --from=build \/usr\/bin\/tini-static \/usr\/bin\/tini$/m);
  const entrypoint = dockerfileEntrypoint();
  assert.deepEqual(entrypoint.slice(0, 2), ["/usr/bin/tini", "--"]);
  assert.equal(entrypoint[2], "node");
});

test("the runtime is non-root with a kvc run entrypoint", () => {
  assert.match(dockerfile, /^USER 65532:65532$/m);
  assert.match(dockerfile, /npm prune --omit=dev/);
  const entrypoint = imageEntrypoint();
  assert.equal(entrypoint[0], "node");
  assert.equal(entrypoint.at(-1), pkg.bin.kvc);
  assert.ok(
    entrypoint.slice(1, -1).every((flag) => flag.startsWith("--")),
    "between node and the script only Node options",
  );
  assert.match(dockerfile, /^CMD \["run"\]$/m);
});

test("every file the build stage copies from the context exists", () => {
  const sources = [...dockerfile.matchAll(/^COPY (?!--from)(.+) \S+$/gm)].flatMap((m) => m[1]!.split(" "));
  assert.ok(sources.length >= 4);
  for (const source of sources) assert.ok(existsSync(join(root, source)), source);
});

test("the entrypoint the image runs starts: the build output answers `version` and `run --help`", () => {
  // Below node_modules, so the build output resolves its packages as the image's /app does.
  mkdirSync(join(root, "node_modules/.cache"), { recursive: true });
  const out = mkdtempSync(join(root, "node_modules/.cache/kvc-build-"));
  try {
    execFileSync(
      process.execPath,
      [join(root, "node_modules/typescript/bin/tsc"), "-p", "tsconfig.build.json", "--outDir", out],
      {
        cwd: root,
      },
    );
    const cli = join(out, pkg.bin.kvc.replace(/^dist\//, ""));
    const nodeOptions = imageEntrypoint().slice(1, -1);
    assert.match(
      execFileSync(process.execPath, [...nodeOptions, cli, "version"], { encoding: "utf8" }),
      /^kube-volume-controller v/,
    );
    assert.match(
      execFileSync(process.execPath, [cli, "run", "--help"], { encoding: "utf8" }),
      /--leader-elect/,
    );
  } finally {
    rmSync(out, { recursive: true, force: true });
  }
});
