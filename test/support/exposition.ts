/**
 * The series names a Prometheus text exposition (a /metrics body) offers, each with its family's
 * type. Read from the `# TYPE` lines, so that a family with no sample yet (a labelled counter never
 * incremented) counts: a histogram offers `_bucket`, `_sum` and `_count` and not its bare name, a
 * summary its name, `_sum` and `_count`. Sample lines of a family with no TYPE line count as untyped.
 */
export function exposedSeries(body: string): Map<string, string> {
  const series = new Map<string, string>();
  for (const [, name = "", type = ""] of body.matchAll(/^# TYPE (\S+) (\S+)$/gm)) {
    const names =
      type === "histogram"
        ? [`${name}_bucket`, `${name}_sum`, `${name}_count`]
        : type === "summary"
          ? [name, `${name}_sum`, `${name}_count`]
          : [name];
    for (const n of names) series.set(n, type);
  }
  for (const [, name = ""] of body.matchAll(/^([A-Za-z_:][\w:]*)[{ ]/gm)) {
    if (!series.has(name)) series.set(name, "untyped");
  }
  return series;
}
