/*
 * promtool (built from the Go module proxy by test/control-plane/build.sh, cached) on the chart's
 * alert rules: `check rules` for the file, `test rules` for test/monitoring/alerts.test.yaml, in which
 * every alert fires on some series and stays silent on others (test/unit/alert-rules.test.ts).
 */
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { join } from "node:path";
import { before, describe, test } from "node:test";
import { promisify } from "node:util";
import { buildControlPlane } from "../../src/controlplane/binaries.js";
import { ALERT_TESTS_FILE, ALERTS_FILE } from "../support/monitoring.js";

/** promtool's exit code and output; a failure is an answer here, not an exception. */
async function promtool(bin: string, ...args: string[]): Promise<{ code: number; output: string }> {
  try {
    const { stdout, stderr } = await promisify(execFile)(bin, args);
    return { code: 0, output: stdout + stderr };
  } catch (err) {
    const e = err as { code?: number; stdout?: string; stderr?: string };
    if (typeof e.code !== "number") throw err;
    return { code: e.code, output: `${e.stdout ?? ""}${e.stderr ?? ""}` };
  }
}

describe("alert rules under promtool", () => {
  let bin: string;

  before(async () => {
    bin = join(await buildControlPlane(["promtool"]), "promtool");
  });

  test("promtool check rules accepts the rule file", async () => {
    const { code, output } = await promtool(bin, "check", "rules", ALERTS_FILE);
    assert.equal(code, 0, output);
    assert.match(output, /SUCCESS: \d+ rules found/);
  });

  test("promtool test rules: every alert fires on its series and stays silent on the others", async () => {
    const { code, output } = await promtool(bin, "test", "rules", ALERT_TESTS_FILE);
    assert.equal(code, 0, output);
    assert.match(output, /SUCCESS/);
  });
});
