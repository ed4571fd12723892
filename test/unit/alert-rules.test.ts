/*
 * The shape every alert of charts/kube-volume-controller/files/alerts.yaml must have, and that its
 * promtool tests (test/monitoring/alerts.test.yaml, run by test/integration/alerts.test.ts) fire it
 * at least once and leave it silent at least once. What the rules do is promtool's to check.
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { load } from "js-yaml";
import { repoRoot } from "../../src/controlplane/binaries.js";
import { ALERT_TESTS_FILE, rules } from "../support/monitoring.js";

const alerts = rules().filter((r) => r.alert !== undefined);

/** GitHub's anchors for the headings of a Markdown file. */
function anchors(markdown: string): Set<string> {
  const slugs = [...markdown.matchAll(/^#+ (.+)$/gm)].map(([, heading = ""]) =>
    heading
      .trim()
      .toLowerCase()
      .replace(/[^\w\- ]/g, "")
      .replace(/ /g, "-"),
  );
  return new Set(slugs);
}

test("every alert has a threshold, a for:, a severity, a summary, a description and a runbook in docs/operations.md", () => {
  assert.ok(alerts.length > 0);
  const docs = anchors(readFileSync(join(repoRoot(), "docs/operations.md"), "utf8"));
  const names = new Set<string>();
  for (const rule of alerts) {
    const name = rule.alert ?? "";
    assert.ok(!names.has(name), `${name} twice`);
    names.add(name);
    // A comparison with a number at the end, or absent(), whose answer is the threshold.
    assert.match(rule.expr.trim(), /(?:[<>]=?|[!=]=)\s*-?[\d.]+$|^absent\(/, `${name} has no threshold`);
    assert.match(rule.for ?? "", /^\d+[smh]$/, `${name} has no for:`);
    assert.match(rule.labels?.severity ?? "", /^(?:critical|warning)$/, `${name} severity`);
    assert.ok(rule.annotations?.summary, `${name} summary`);
    assert.ok(rule.annotations?.description, `${name} description`);
    const runbook = /\/docs\/operations\.md#([\w-]+)$/.exec(rule.annotations?.runbook_url ?? "");
    assert.ok(runbook, `${name} runbook_url is no anchor of docs/operations.md`);
    assert.ok(docs.has(runbook[1] ?? ""), `${name}: docs/operations.md has no heading #${runbook[1] ?? ""}`);
  }
});

test("the promtool tests fire every alert at least once and leave it silent at least once", () => {
  const file = load(readFileSync(ALERT_TESTS_FILE, "utf8")) as {
    tests: { alert_rule_test?: { alertname: string; exp_alerts?: unknown[] }[] }[];
  };
  const checks = file.tests.flatMap((t) => t.alert_rule_test ?? []);
  for (const { alert } of alerts) {
    const of = checks.filter((c) => c.alertname === alert);
    assert.ok(
      of.some((c) => (c.exp_alerts ?? []).length > 0),
      `no test fires ${alert ?? ""}`,
    );
    assert.ok(
      of.some((c) => (c.exp_alerts ?? []).length === 0),
      `no test leaves ${alert ?? ""} silent`,
    );
  }
});
