const BINARY: Record<string, bigint> = {
  Ki: 1n << 10n,
  Mi: 1n << 20n,
  Gi: 1n << 30n,
  Ti: 1n << 40n,
  Pi: 1n << 50n,
  Ei: 1n << 60n,
};
const DECIMAL_EXP: Record<string, number> = {
  n: -9,
  u: -6,
  m: -3,
  "": 0,
  k: 3,
  M: 6,
  G: 9,
  T: 12,
  P: 15,
  E: 18,
};
const NANO = 9;

/**
 * Parses a Kubernetes resource.Quantity ("1Gi", "500M", "1.5Ti", "100m", "1e3") into nano-units
 * as a bigint, so comparisons are exact at any size (a float loses bytes above 2^53). Fractions
 * below a nano-unit round up, as Quantity does. Throws on anything resource.ParseQuantity rejects.
 */
export function parseQuantity(text: string): bigint {
  const m = /^([+-]?)(\d+\.?\d*|\.\d+)(?:(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E)|[eE]([+-]?\d+))?$/.exec(
    text.trim(),
  );
  if (!m || text.trim() === "")
    throw new Error(`quantity "${text}" does not match the regular expression of a Kubernetes quantity`);
  const [, sign = "", number = "", suffix = "", exponent] = m;
  const [whole = "", frac = ""] = number.split(".");
  const digits = BigInt((whole + frac).replace(/^0+(?=\d)/, "") || "0");
  let exp10 = -frac.length + NANO;
  let factor = 1n;
  if (suffix in BINARY) factor = BINARY[suffix] ?? 1n;
  else if (exponent !== undefined) exp10 += Number(exponent);
  else exp10 += DECIMAL_EXP[suffix] ?? 0;
  let value: bigint;
  if (exp10 >= 0) value = digits * factor * 10n ** BigInt(exp10);
  else {
    const divisor = 10n ** BigInt(-exp10);
    const product = digits * factor;
    value = product / divisor + (product % divisor === 0n ? 0n : 1n);
  }
  return sign === "-" ? -value : value;
}

/** parseQuantity that answers undefined for a missing or unparsable quantity instead of throwing. */
export function tryParseQuantity(text: string | undefined): bigint | undefined {
  if (text === undefined) return undefined;
  try {
    return parseQuantity(text);
  } catch {
    return undefined;
  }
}
