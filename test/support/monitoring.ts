import { readFileSync } from "node:fs";
import { join } from "node:path";
import { load } from "js-yaml";
import { repoRoot } from "../../src/controlplane/binaries.js";

/** The chart's alert rules and their promtool tests. */
export const ALERTS_FILE = join(repoRoot(), "charts/kube-volume-controller/files/alerts.yaml");
export const ALERT_TESTS_FILE = join(repoRoot(), "test/monitoring/alerts.test.yaml");

/** A rule of a Prometheus rule file: an alert or a recording rule. */
export interface Rule {
  alert?: string;
  record?: string;
  expr: string;
  for?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
}

/** The rules of the chart's rule file, every group's. */
export function rules(): Rule[] {
  const file = load(readFileSync(ALERTS_FILE, "utf8")) as { groups: { rules: Rule[] }[] };
  return file.groups.flatMap((g) => g.rules);
}
