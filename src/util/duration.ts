const UNITS: Record<string, number> = {
  ns: 1e-6,
  us: 1e-3,
  µs: 1e-3,
  ms: 1,
  s: 1000,
  m: 60_000,
  h: 3_600_000,
};

/**
 * Parses a Go time.Duration string ("15s", "1m30s", "500ms", "0") into milliseconds, so that
 * duration flags read exactly as kube-controller-manager's. Throws on anything else.
 */
export function parseDuration(text: string): number {
  const s = text.trim();
  if (s === "0") return 0;
  const re = /(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)/gy;
  let total = 0;
  let matched = 0;
  for (let m = re.exec(s); m; m = re.exec(s)) {
    total += Number(m[1]) * (UNITS[m[2] ?? ""] ?? NaN);
    matched = re.lastIndex;
  }
  if (s === "" || matched !== s.length || !Number.isFinite(total)) {
    throw new Error(`invalid duration "${text}" (want e.g. 15s, 1m30s, 500ms)`);
  }
  return total;
}

/** Formats milliseconds as a Go duration string, for defaults shown in help. */
export function formatDuration(ms: number): string {
  if (ms === 0) return "0s";
  if (ms < 1000) return `${ms}ms`;
  const h = Math.floor(ms / 3_600_000);
  const m = Math.floor((ms % 3_600_000) / 60_000);
  const s = (ms % 60_000) / 1000;
  return `${h ? `${h}h` : ""}${h || m ? `${m}m` : ""}${s}s`;
}
