/** PromQL keywords that read as identifiers: modifiers, set operators, number literals. */
const KEYWORDS = new Set(["bool", "offset", "and", "or", "unless", "inf", "nan"]);

/**
 * The metric names a PromQL expression selects (a small parser, not a full one): string literals,
 * label matchers `{…}`, ranges and subqueries `[…]` and the label lists of by/without/on/ignoring/
 * group_left/group_right are dropped; of the identifiers left, a function or aggregation is one
 * followed by `(`, a number or duration starts with a digit. A Grafana variable (`$job`,
 * `${job}`, `$__rate_interval`) names no metric. A selector by `__name__` throws: it would be
 * missed.
 */
export function metricNames(expr: string): string[] {
  if (expr.includes("__name__")) throw new Error(`a selector by __name__ is not understood: ${expr}`);
  const stripped = expr
    .replace(/"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|`[^`]*`/g, " ")
    .replace(/\{[^{}]*\}/g, " ")
    .replace(/\[[^\]]*\]/g, " ")
    .replace(/\$\{\w+\}|\$\w+/g, " ")
    .replace(/\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, " ")
    // group_left/group_right without a label list.
    .replace(/\b(?:group_left|group_right)\b/g, " ");
  const names = new Set<string>();
  for (const [, token = "", call] of stripped.matchAll(/(\d[\w.]*|[A-Za-z_:][\w:]*)(\s*\()?/g)) {
    if (/^\d/.test(token) || call !== undefined || KEYWORDS.has(token.toLowerCase())) continue;
    names.add(token);
  }
  return [...names].sort();
}
