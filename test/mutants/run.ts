/**
 * The mutant harness (`npm run mutants`): plants each bug of test/mutants/mutants.json (a unified diff
 * against the repository, test/mutants/<name>.patch) in a scratch copy of the working tree, runs the
 * test files named to catch it there, and reports caught / missed with the time each took. The working
 * tree is never written: the copy lives in a temporary directory with node_modules linked.
 *
 *   npm run mutants                 every mutant
 *   npm run mutants -- NAME...      only these
 *   npm run mutants -- --list       names, catching files and descriptions
 *   npm run mutants -- --markdown   also prints the results as docs/reliability.md's table
 *
 * Exit 1 when a mutant survives, a patch no longer applies, or a named test file fails unpatched
 * (then "caught" would prove nothing).
 */
import { spawn, spawnSync } from "node:child_process";
import { cpSync, mkdtempSync, readFileSync, realpathSync, rmSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

interface Mutant {
  readonly name: string;
  readonly area: string;
  /** What the planted bug breaks. */
  readonly description: string;
  /** Test files (relative to the repository) expected to fail with the bug planted. */
  readonly tests: readonly string[];
}

interface Outcome {
  readonly mutant: Mutant;
  readonly verdict: "caught" | "MISSED" | "NO-APPLY";
  readonly seconds: number;
  /** The first failing test, or why the patch did not apply. */
  readonly detail: string;
}

const HERE = fileURLToPath(new URL(".", import.meta.url));
const ROOT = realpathSync(join(HERE, "../.."));
/** A planted bug can make a test wait for what never comes; such a run counts as caught at the deadline. */
const TIMEOUT_MS = 10 * 60_000;

function loadManifest(): Mutant[] {
  const raw: unknown = JSON.parse(readFileSync(join(HERE, "mutants.json"), "utf8"));
  if (!Array.isArray(raw)) throw new Error("test/mutants/mutants.json: expected an array");
  const seen = new Set<string>();
  return raw.map((entry: unknown, i) => {
    const m = entry as Partial<Mutant>;
    const ok =
      typeof m.name === "string" &&
      /^[a-z0-9-]+$/.test(m.name) &&
      typeof m.area === "string" &&
      typeof m.description === "string" &&
      Array.isArray(m.tests) &&
      m.tests.length > 0 &&
      m.tests.every((t) => typeof t === "string");
    if (!ok)
      throw new Error(`test/mutants/mutants.json[${i}]: needs name (a-z0-9-), area, description, tests`);
    if (seen.has(m.name)) throw new Error(`test/mutants/mutants.json: ${m.name} twice`);
    seen.add(m.name);
    return m as Mutant;
  });
}

/** The working tree as it is (tracked and untracked, not ignored files), uncommitted edits included. */
function scratchCopy(): string {
  const dir = mkdtempSync(join(tmpdir(), "kvc-mutants-"));
  const listed = spawnSync("git", ["ls-files", "-z", "--cached", "--others", "--exclude-standard"], {
    cwd: ROOT,
    encoding: "utf8",
    maxBuffer: 64 << 20,
  });
  if (listed.status !== 0) throw new Error(`git ls-files: ${listed.stderr}`);
  for (const file of listed.stdout.split("\0")) {
    if (!file || file === "node_modules") continue;
    try {
      cpSync(join(ROOT, file), join(dir, file), { recursive: true, verbatimSymlinks: true });
    } catch (err) {
      // A tracked file deleted in the working tree is not part of it.
      if ((err as NodeJS.ErrnoException).code !== "ENOENT") throw err;
    }
  }
  symlinkSync(realpathSync(join(ROOT, "node_modules")), join(dir, "node_modules"));
  return dir;
}

/** `git apply` in a directory that is no repository: a plain patch(1) with git's strictness. */
function gitApply(dir: string, patch: string, reverse: boolean): string | undefined {
  const args = ["apply", ...(reverse ? ["-R"] : []), patch];
  const r = spawnSync("git", args, {
    cwd: dir,
    encoding: "utf8",
    env: { ...process.env, GIT_DIR: "/dev/null" },
  });
  return r.status === 0 ? undefined : (r.stderr || r.stdout).trim() || `git apply exited ${r.status}`;
}

/** A mutant plants a bug in the controller, never in the tests that should catch it. */
function outsideSrc(patch: string): string | undefined {
  let text: string;
  try {
    text = readFileSync(patch, "utf8");
  } catch (err) {
    return `cannot read ${patch}: ${(err as Error).message}`;
  }
  const files = [...text.matchAll(/^\+\+\+ b\/(\S+)/gm)].map((m) => m[1] ?? "");
  if (files.length === 0) return "no file in the patch";
  const outside = files.filter((f) => !f.startsWith("src/"));
  return outside.length ? `patches files outside src/: ${outside.join(", ")}` : undefined;
}

interface TestRun {
  readonly failed: boolean;
  readonly firstFailure: string;
  readonly timedOut: boolean;
}

async function runTests(dir: string, files: readonly string[]): Promise<TestRun> {
  const child = spawn(
    process.execPath,
    ["--import", "tsx", "--test", "--test-concurrency=1", "--test-reporter=tap", ...files],
    { cwd: dir, stdio: ["ignore", "pipe", "pipe"], detached: true },
  );
  let out = "";
  child.stdout.on("data", (chunk: Buffer) => (out += chunk.toString()));
  child.stderr.on("data", (chunk: Buffer) => (out += chunk.toString()));
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    // The whole group: integration tests start apiservers and controllers of their own.
    if (child.pid !== undefined) process.kill(-child.pid, "SIGKILL");
  }, TIMEOUT_MS);
  const code = await new Promise<number | null>((resolve) => child.on("close", resolve));
  clearTimeout(timer);
  // The innermost failing test: TAP reports it before the suites around it.
  const failure =
    /^\s*not ok \d+ - (.*)$/m.exec(out)?.[1]?.trim() ?? (code === 0 ? "" : out.trim().split("\n").at(-1));
  return { failed: code !== 0, firstFailure: timedOut ? "timed out" : (failure ?? ""), timedOut };
}

function seconds(since: bigint): number {
  return Number(process.hrtime.bigint() - since) / 1e9;
}

/** docs/reliability.md's table of mutants. */
function markdownTable(outcomes: readonly Outcome[]): string {
  const cell = (text: string) => text.replaceAll("|", "\\|");
  const rows = outcomes.map(
    ({ mutant, verdict, seconds, detail }) =>
      `| ${mutant.name} | ${cell(mutant.description)} | ${mutant.tests.map((t) => `\`${t}\``).join(", ")} | ${cell(detail)} | ${verdict} | ${seconds.toFixed(1)} s |`,
  );
  return [
    "| mutant | what it breaks | test file | first failing test | verdict | time |",
    "| --- | --- | --- | --- | --- | --- |",
    ...rows,
  ].join("\n");
}

async function main(): Promise<number> {
  const options = process.argv.slice(2).filter((a) => a.startsWith("--"));
  const args = process.argv.slice(2).filter((a) => !a.startsWith("--"));
  const badOption = options.find((o) => o !== "--list" && o !== "--markdown");
  if (badOption) {
    console.error(`unknown option ${badOption} (--list, --markdown)`);
    return 2;
  }
  const all = loadManifest();
  if (options.includes("--list")) {
    for (const m of all)
      console.log(`${m.name.padEnd(34)} ${m.area.padEnd(16)} ${m.tests.join(" ")}\n    ${m.description}`);
    return 0;
  }
  const unknown = args.filter((a) => !all.some((m) => m.name === a));
  if (unknown.length) {
    console.error(`unknown mutant(s): ${unknown.join(", ")} (see --list)`);
    return 2;
  }
  const chosen = args.length ? all.filter((m) => args.includes(m.name)) : all;
  const started = process.hrtime.bigint();
  const dir = scratchCopy();
  console.log(`scratch copy: ${dir}`);
  const outcomes: Outcome[] = [];
  let baselineFailed = false;
  try {
    // Unpatched, every named file must pass: a file that fails anyway catches nothing.
    const files = [...new Set(chosen.flatMap((m) => m.tests))];
    const t0 = process.hrtime.bigint();
    const base = await runTests(dir, files);
    console.log(
      `baseline (${files.length} files, unpatched): ${base.failed ? "FAILED" : "pass"} ${seconds(t0).toFixed(1)}s`,
    );
    if (base.failed) {
      console.log(`  first failure: ${base.firstFailure}`);
      baselineFailed = true;
      return 1;
    }
    for (const mutant of chosen) {
      const patch = join(HERE, `${mutant.name}.patch`);
      const t = process.hrtime.bigint();
      const applyError = outsideSrc(patch) ?? gitApply(dir, patch, false);
      if (applyError !== undefined) {
        outcomes.push({
          mutant,
          verdict: "NO-APPLY",
          seconds: seconds(t),
          detail: applyError.split("\n")[0] ?? "",
        });
      } else {
        const run = await runTests(dir, mutant.tests);
        const restoreError = gitApply(dir, patch, true);
        if (restoreError !== undefined)
          throw new Error(`cannot revert ${mutant.name} in the scratch copy: ${restoreError}`);
        outcomes.push({
          mutant,
          verdict: run.failed ? "caught" : "MISSED",
          seconds: seconds(t),
          detail: run.failed ? run.firstFailure : "",
        });
      }
      const o = outcomes.at(-1)!;
      console.log(
        `${o.verdict.padEnd(8)} ${mutant.name.padEnd(34)} ${o.seconds.toFixed(1).padStart(6)}s  ${o.detail}`,
      );
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  if (baselineFailed) return 1;
  const caught = outcomes.filter((o) => o.verdict === "caught").length;
  const missed = outcomes.filter((o) => o.verdict === "MISSED").map((o) => o.mutant.name);
  const broken = outcomes.filter((o) => o.verdict === "NO-APPLY").map((o) => o.mutant.name);
  if (options.includes("--markdown")) console.log(`\n${markdownTable(outcomes)}`);
  console.log(`\n${caught}/${outcomes.length} caught in ${seconds(started).toFixed(1)}s`);
  if (missed.length) console.log(`survived: ${missed.join(", ")}`);
  if (broken.length) console.log(`patch no longer applies: ${broken.join(", ")}`);
  return missed.length || broken.length ? 1 : 0;
}

process.exitCode = await main();
