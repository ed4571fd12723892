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

type Entry = Record<string, unknown>;

/**
 * For scenarios whose claims compete (`Scenario.competing`): PVs and claims as pools of equal shape,
 * so that equally good choices compare equal. A PV's claim becomes that claim's shape (its claimRef
 * UID "its claim" when it is the UID of the claim of that name), a claim's volume that volume's
 * shape; entries of one shape are a sorted list under `PVs <shape>` / `PVCs <shape>`. What the
 * matcher decides stays compared: how many claims of each shape bound, to volumes of which shape,
 * which stayed Pending and with which events.
 */
export function poolTies(snapshot: Snapshot): Snapshot {
  const entry = (key: string) => snapshot[key] as Entry | undefined;
  const pvShape = (e: Entry | undefined) =>
    e &&
    JSON.stringify([e.capacity, e.class, e.accessModes, e.volumeMode, e.labels, e.reclaim, e.nodeAffinity]);
  const pvcShape = (e: Entry | undefined) => e && JSON.stringify([e.request, e.class, e.requestedModes]);
  const pooled: Record<string, Entry[]> = {};
  const add = (key: string, value: Entry) => (pooled[key] ??= []).push(value);
  const out: Snapshot = {};
  for (const [key, value] of Object.entries(snapshot)) {
    const e = value as Entry;
    if (key.startsWith("PV ")) {
      const claim = typeof e.claim === "string" ? e.claim.slice(e.claim.indexOf("/") + 1) : undefined;
      add(`PVs ${pvShape(e)}`, {
        ...e,
        claim: claim && (pvcShape(entry(`PVC ${claim}`)) ?? e.claim),
        claimUID: claim && e.claimUID === `PersistentVolumeClaim ${claim}` ? "its claim" : e.claimUID,
      });
    } else if (key.startsWith("PVC ")) {
      const volume = e.volume as string | undefined;
      add(`PVCs ${pvcShape(e)}`, { ...e, volume: volume && (pvShape(entry(`PV ${volume}`)) ?? volume) });
    } else out[key] = value;
  }
  for (const [key, entries] of Object.entries(pooled))
    out[key] = entries.map((e) => JSON.stringify(e)).sort();
  return out;
}
