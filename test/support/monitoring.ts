import { readFileSync } from "node:fs";
import { join } from "node:path";
import { load } from "js-yaml";
import { repoRoot } from "../../src/controlplane/binaries.js";

/** The chart's monitoring files and their promtool tests. */
export const ALERTS_FILE = join(repoRoot(), "charts/kube-volume-controller/files/alerts.yaml");
export const DASHBOARD_FILE = join(repoRoot(), "charts/kube-volume-controller/files/dashboard.json");
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

interface Panel {
  title?: string;
  targets?: { expr?: string }[];
  panels?: Panel[];
}

/** Every PromQL expression of the dashboard with its panel's title: its targets, and those of rows' panels. */
export function dashboardExpressions(): { where: string; expr: string }[] {
  const dashboard = JSON.parse(readFileSync(DASHBOARD_FILE, "utf8")) as {
    panels: Panel[];
    templating?: { list: { name: string; type: string }[] };
  };
  const found: { where: string; expr: string }[] = [];
  const walk = (panels: Panel[]) => {
    for (const panel of panels) {
      for (const target of panel.targets ?? []) {
        found.push({ where: `panel "${panel.title ?? ""}"`, expr: target.expr ?? "" });
      }
      walk(panel.panels ?? []);
    }
  };
  walk(dashboard.panels);
  for (const variable of dashboard.templating?.list ?? []) {
    // label_values(metric, label) is Grafana's, not PromQL: it needs a reading of its own first.
    if (variable.type === "query") throw new Error(`query variable $${variable.name} is not read`);
  }
  return found;
}
