/** A seeded PRNG (mulberry32): deterministic, replayable runs. Returns floats in [0, 1). */
export function mulberry32(seed: number): () => number {
  let s = seed | 0;
  return () => {
    s = (s + 0x6d2b79f5) | 0;
    let t = Math.imul(s ^ (s >>> 15), 1 | s);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** One of `weighted`'s values, each as likely as its weight, drawn from `random`. */
export function weightedPick<T>(random: () => number, weighted: readonly (readonly [T, number])[]): T {
  let r = random() * weighted.reduce((sum, [, w]) => sum + w, 0);
  for (const [value, w] of weighted) if ((r -= w) < 0) return value;
  return weighted[0]![0];
}
