import type { Scenario, Snapshot } from "./runner.js";

/* What fails a differential scenario, from the two sides' snapshots. */

/** The keys whose values differ, as "key: upstream … | kvc …" lines. */
export function diff(upstream: Snapshot, ours: Snapshot): string[] {
  const keys = [...new Set([...Object.keys(upstream), ...Object.keys(ours)])].sort();
  return keys
    .filter((k) => JSON.stringify(upstream[k]) !== JSON.stringify(ours[k]))
    .map(
      (k) => `${k}:\n    upstream ${JSON.stringify(upstream[k])}\n    kvc      ${JSON.stringify(ours[k])}`,
    );
}

/** The handover writes a scenario does not allow, as "side: write" lines. */
export function unexpectedHandoverWrites(scenario: Scenario, sides: Record<string, Snapshot>): string[] {
  const allowed = new Set(scenario.handoverWrites ?? []);
  return Object.entries(sides).flatMap(([side, snapshot]) =>
    ((snapshot.Handover ?? []) as string[][])
      .flat()
      .flatMap((w) => (allowed.has(w) ? [] : [`${side}: ${w}`])),
  );
}
