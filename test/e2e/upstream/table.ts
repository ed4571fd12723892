/*
 * The side-by-side table of docs/e2e.md from two runs of run.sh: each selected test (the names
 * `run.sh --list` prints, on stdin), its result and time with kvc and with KCM's loops, then the
 * counts, and the tests whose results differ. Exits 1 when a test passes with KCM and not with kvc.
 *
 *   test/e2e/upstream/run.sh --list | tsx test/e2e/upstream/table.ts [REPORT_DIR]
 *
 * REPORT_DIR (default /tmp/kvc-e2e-report) holds kvc/junit.xml and kcm/junit.xml.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";

type Result = { status: string; seconds: number; message?: string };

const dir = process.argv[2] ?? "/tmp/kvc-e2e-report";

/** Ginkgo's JUnit report: one testcase per spec, named `[It] <full name> [<labels>]`. */
function results(file: string): Map<string, Result> {
  const xml = readFileSync(file, "utf8");
  const out = new Map<string, Result>();
  const testcase =
    /<testcase name="([^"]*)"[^>]*status="([a-z]+)" time="([0-9.]+)"[^>]*>([\s\S]*?)<\/testcase>/g;
  for (const [, rawName = "", status = "", time = "0", body = ""] of xml.matchAll(testcase)) {
    const name = unescape(rawName)
      .replace(/^\[It\] /, "")
      .replace(/ \[sig-storage[^\]]*\]$/, "");
    const failure = /<failure message="([^"]*)"/.exec(body)?.[1];
    const skipped = /<skipped message="([^"]*)"/.exec(body)?.[1];
    const message = failure ?? (skipped === "skipped" ? undefined : skipped);
    out.set(name, {
      status,
      seconds: Number(time),
      ...(message !== undefined && { message: unescape(message) }),
    });
  }
  return out;
}

function unescape(s: string): string {
  return s
    .replace(/&#34;|&quot;/g, '"')
    .replace(/&#39;|&apos;/g, "'")
    .replace(/&lt;/g, "<")
    .replace(/&gt;/g, ">")
    .replace(/&#xA;|&#10;/g, " ")
    .replace(/&amp;/g, "&");
}

const cell = (r: Result | undefined) =>
  !r ? "not run" : r.status === "skipped" ? "skipped" : `${r.status} (${Math.round(r.seconds)} s)`;

const selected = readFileSync(0, "utf8")
  .split("\n")
  .map((l) => l.trim())
  .filter((l) => l.startsWith("[sig-storage] "));
const kvc = results(join(dir, "kvc", "junit.xml"));
const kcm = results(join(dir, "kcm", "junit.xml"));

const rows = selected.map(
  (name) => [name.replace(/^\[sig-storage\] /, ""), kvc.get(name), kcm.get(name)] as const,
);
console.log("| test | kvc | KCM |");
console.log("| --- | --- | --- |");
for (const [name, a, b] of rows) console.log(`| ${name.replace(/\|/g, "\\|")} | ${cell(a)} | ${cell(b)} |`);

const count = (side: 1 | 2, status: string) => rows.filter((r) => r[side]?.status === status).length;
console.log();
for (const status of ["passed", "failed", "skipped"]) {
  console.log(`- ${status}: kvc ${count(1, status)}, KCM ${count(2, status)}`);
}
const differ = rows.filter(([, a, b]) => a?.status !== b?.status);
for (const [name, a, b] of differ) {
  console.log(
    `- differs: ${name}: kvc ${cell(a)}${a?.message ? ` (${a.message.slice(0, 200)})` : ""}, KCM ${cell(b)}`,
  );
}
const total = (m: Map<string, Result>) =>
  Math.round(selected.reduce((s, n) => s + (m.get(n)?.seconds ?? 0), 0));
console.log(`- test time summed: kvc ${total(kvc)} s, KCM ${total(kcm)} s`);
process.exitCode = differ.some(([, a, b]) => b?.status === "passed" && a?.status !== "passed") ? 1 : 0;
