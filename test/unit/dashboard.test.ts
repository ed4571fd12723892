/*
 * The shape of charts/kube-volume-controller/files/dashboard.json; that its metrics exist is
 * test/integration/monitoring-metrics.test.ts's to check, against a real kvc.
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";
import { DASHBOARD_FILE, dashboardExpressions } from "../support/monitoring.js";

test("every panel has an id of its own and every target an expression", () => {
  const expressions = dashboardExpressions();
  assert.ok(expressions.length > 20, `${expressions.length} expressions`);
  for (const { where, expr } of expressions) assert.ok(expr.trim(), `${where}: empty expression`);
  const dashboard = JSON.parse(readFileSync(DASHBOARD_FILE, "utf8")) as { panels: { id: number }[] };
  const ids = dashboard.panels.map((p) => p.id);
  assert.equal(new Set(ids).size, ids.length, "panel ids repeat");
});
