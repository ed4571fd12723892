import { readFileSync } from "node:fs";
import { request } from "node:https";
import { OUTCOMES } from "./comparator.js";
import type { ShadowSummary } from "./shadow-mode.js";

export interface ReportTarget {
  /** e.g. https://127.0.0.1:10257 */
  server: string;
  token: string | undefined;
  /** PEM file that signed the serving certificate; undefined: the system's roots. */
  caFile: string | undefined;
  insecureSkipTLSVerify: boolean;
  timeoutMs?: number;
}

/** GET /shadow of a running `kvc run --shadow`, with the same credentials as a /metrics scrape. */
export async function fetchSummary(t: ReportTarget): Promise<ShadowSummary> {
  const url = new URL("/shadow", t.server);
  if (url.protocol !== "https:") throw new Error(`--server ${t.server}: kvc serves HTTPS only`);
  const text = await new Promise<string>((resolve, reject) => {
    const req = request(
      url,
      {
        headers: { accept: "application/json", ...(t.token && { authorization: `Bearer ${t.token}` }) },
        ...(t.caFile && { ca: readFileSync(t.caFile) }),
        rejectUnauthorized: !t.insecureSkipTLSVerify,
        timeout: t.timeoutMs ?? 10_000,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("error", reject);
        res.on("end", () => {
          const body = Buffer.concat(chunks).toString("utf8");
          if (res.statusCode === 200) resolve(body);
          else reject(new Error(`GET ${url.href}: ${res.statusCode ?? "?"} ${body.trim()}`));
        });
      },
    );
    req.on("timeout", () => req.destroy(new Error(`GET ${url.href}: no answer in time`)));
    req.on("error", reject);
    req.end();
  });
  let summary: Partial<ShadowSummary> | undefined;
  try {
    summary = JSON.parse(text) as Partial<ShadowSummary>;
  } catch {
    summary = undefined;
  }
  const totals = summary?.totals;
  if (
    !summary ||
    typeof totals !== "object" ||
    !OUTCOMES.every((o) => typeof totals[o] === "number") ||
    !Array.isArray(summary.decisions) ||
    !Array.isArray(summary.disagreements) ||
    typeof summary.unparsed?.count !== "number" ||
    !Array.isArray(summary.unparsed.recent)
  ) {
    throw new Error(`GET ${url.href}: not a shadow summary (is it kvc run --shadow?)`);
  }
  return summary as ShadowSummary;
}

/** The summary as text tables: decisions by controller, kind and outcome, then the disagreements. */
export function formatReport(s: ShadowSummary): string {
  const lines = [
    `Shadow since ${s.since} (grace ${s.graceSeconds}s), ${s.pending} decision(s) within their grace window`,
    `Totals: ${OUTCOMES.map((o) => `${o} ${s.totals[o]}`).join(", ")}`,
    `Writes not understood (refused, compared with nothing): ${s.unparsed.count}`,
    "",
  ];
  const rows = [...s.decisions]
    .sort((a, b) => `${a.controller} ${a.kind}`.localeCompare(`${b.controller} ${b.kind}`))
    .map((d) => [d.controller, d.kind, d.outcome, String(d.count)]);
  lines.push(...table(["CONTROLLER", "KIND", "OUTCOME", "COUNT"], rows));
  if (s.disagreements.length > 0) {
    lines.push("", `Last ${s.disagreements.length} disagreement(s):`);
    lines.push(
      ...table(
        ["AT", "OUTCOME", "DECISION", "KVC", "UPSTREAM"],
        s.disagreements.map((d) => [d.at, d.outcome, d.key, d.kvc ?? "-", d.upstream ?? "-"]),
      ),
    );
  }
  if (s.unparsed.recent.length > 0) {
    lines.push("", `Last ${s.unparsed.recent.length} write(s) not understood:`);
    lines.push(
      ...table(
        ["AT", "METHOD", "PATH", "REASON"],
        s.unparsed.recent.map((u) => [u.at, u.method, u.path, u.reason]),
      ),
    );
  }
  return `${lines.join("\n")}\n`;
}

function table(header: string[], rows: string[][]): string[] {
  const all = [header, ...rows];
  const widths = header.map((_, i) => Math.max(...all.map((r) => (r[i] ?? "").length)));
  return all.map((r) =>
    r
      .map((c, i) => c.padEnd(widths[i] ?? 0))
      .join("  ")
      .trimEnd(),
  );
}
