/**
 * Kubernetes resource.Quantity as k8s.io/apimachinery/pkg/api/resource (v0.37.2) parses and compares
 * it: the same strings are accepted (quantity.go ParseQuantity, suffix.go) and Cmp orders the
 * values exactly as upstream does. Written here because no npm library follows upstream's parser
 * quirks (int32 exponent wrap, nano round-up, the BinarySI cap).
 *
 * A value is kept as sign × digits × 10^exponent and never expanded: "1e30000000", which the
 * apiserver accepts, costs the length of its text to parse and compare, not a 30-million-digit
 * number (expanding it blocked the event loop for seconds per sync).
 */
export interface Quantity {
  /** -1, 0 or 1. */
  readonly sign: -1 | 0 | 1;
  /** The significant decimal digits, no leading or trailing zero; "" for zero. */
  readonly digits: string;
  /** Power of ten the digits are multiplied by. */
  readonly exponent: number;
}

/** Upstream's zero Quantity: what a missing request or capacity reads as. */
export const ZERO_QUANTITY: Quantity = { sign: 0, digits: "", exponent: 0 };

const SPLIT_RE = "^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$";
const ERR_FORMAT = `quantities must match the regular expression '${SPLIT_RE}'`;
const ERR_NUMERIC = "unable to parse numeric part of quantity";
const ERR_SUFFIX = "unable to parse quantity's suffix";

/** suffix.go: decimal SI suffixes (base 10) and binary SI ones (base 2), as exponents. */
const DECIMAL_SUFFIXES = new Map([
  ["", 0],
  ["n", -9],
  ["u", -6],
  ["m", -3],
  ["k", 3],
  ["M", 6],
  ["G", 9],
  ["T", 12],
  ["P", 15],
  ["E", 18],
]);
const BINARY_SUFFIXES = new Map([
  ["Ki", 10],
  ["Mi", 20],
  ["Gi", 30],
  ["Ti", 40],
  ["Pi", 50],
  ["Ei", 60],
]);
const SUFFIX_CHARS = "eEinumkKMGTP";
/** math.go maxInt64Factors: decimal digits an int64 always holds. */
const MAX_INT64_FACTORS = 18;
const NANO_SCALE = -9;
const MAX_INT64 = (1n << 63n) - 1n;
const MIN_INT64 = -(1n << 63n);
/** maxAllowed (2^63-1), the cap of a BinarySI quantity, in nano-units. */
const MAX_ALLOWED_NANO = MAX_INT64 * 1_000_000_000n;
/**
 * Fraction digits kept of a BinarySI number (plus a sticky 1 for any dropped non-zero digit): a
 * nano round-up boundary n/(2^60·10^9) has at most 69 fraction digits, so more cannot change it.
 */
const BINARY_FRACTION_DIGITS = 70;

/** Go's int32 conversion and arithmetic, which wrap. */
const int32 = (n: number): number => n | 0;
const isDigit = (c: string | undefined): boolean => c !== undefined && c >= "0" && c <= "9";

interface Split {
  readonly positive: boolean;
  /** What inf.Dec SetString reads on the slow path: sign, digits and point. */
  readonly value: string;
  readonly num: string;
  readonly denom: string;
  readonly suffix: string;
}

/** parseQuantityString, step by step (a regular expression would not split the same way). */
function splitQuantity(str: string): Split | undefined {
  let positive = true;
  let pos = 0;
  const end = str.length;
  if (str[0] === "-") {
    positive = false;
    pos++;
  } else if (str[0] === "+") pos++;
  while (str[pos] === "0") pos++;
  if (pos >= end) return { positive, value: "0", num: "0", denom: "", suffix: "" };
  let i = pos;
  while (i < end && isDigit(str[i])) i++;
  if (i >= end) return { positive, value: str, num: str.slice(pos), denom: "", suffix: "" };
  const num = str.slice(pos, i) || "0";
  pos = i;
  let denom = "";
  if (str[pos] === ".") {
    pos++;
    i = pos;
    while (i < end && isDigit(str[i])) i++;
    denom = str.slice(pos, i);
    if (i >= end) return { positive, value: str, num, denom, suffix: "" };
    pos = i;
  }
  const value = str.slice(0, pos);
  const suffixStart = pos;
  while (pos < end && SUFFIX_CHARS.includes(str[pos] ?? "")) pos++;
  if (str[pos] === "-" || str[pos] === "+") pos++;
  while (pos < end && isDigit(str[pos])) pos++;
  if (pos < end) return undefined;
  return { positive, value, num, denom, suffix: str.slice(suffixStart) };
}

interface Suffix {
  readonly base: 2 | 10;
  readonly exponent: number;
  readonly binary: boolean;
}

/** suffixHandler.interpret: an e/E exponent is a strconv.ParseInt int64 truncated to int32. */
function interpretSuffix(suffix: string): Suffix | undefined {
  const decimal = DECIMAL_SUFFIXES.get(suffix);
  if (decimal !== undefined) return { base: 10, exponent: decimal, binary: false };
  const binary = BINARY_SUFFIXES.get(suffix);
  if (binary !== undefined) return { base: 2, exponent: binary, binary: true };
  if (suffix.length > 1 && (suffix[0] === "e" || suffix[0] === "E")) {
    const text = suffix.slice(1);
    if (!/^[+-]?[0-9]+$/.test(text)) return undefined;
    const sign = text[0] === "-" ? -1n : 1n;
    const digits = stripLeadingZeros(text.replace(/^[+-]/, ""));
    if (digits.length > 19) return undefined;
    const parsed = sign * BigInt(digits || "0");
    if (parsed > MAX_INT64 || parsed < MIN_INT64) return undefined;
    return { base: 10, exponent: Number(BigInt.asIntN(32, parsed)), binary: false };
  }
  return undefined;
}

function stripLeadingZeros(digits: string): string {
  let i = 0;
  while (digits[i] === "0") i++;
  return digits.slice(i);
}

/** sign × digits × 10^exponent with digits made canonical. */
function quantity(negative: boolean, digits: string, exponent: number): Quantity {
  const significant = stripLeadingZeros(digits);
  if (significant === "") return ZERO_QUANTITY;
  let end = significant.length;
  while (significant[end - 1] === "0") end--;
  return {
    sign: negative ? -1 : 1,
    digits: significant.slice(0, end),
    exponent: exponent + significant.length - end,
  };
}

/** ⌈digits / 10^drop⌉ (digits without leading zeros, not zero). */
function ceilShift(digits: string, drop: number): string {
  if (drop >= digits.length) return "1";
  const head = digits.slice(0, digits.length - drop);
  for (let i = head.length; i < digits.length; i++) if (digits[i] !== "0") return increment(head);
  return head;
}

function increment(digits: string): string {
  let i = digits.length - 1;
  while (digits[i] === "9") i--;
  if (i < 0) return "1" + "0".repeat(digits.length);
  return (
    digits.slice(0, i) + String.fromCharCode(digits.charCodeAt(i) + 1) + "0".repeat(digits.length - i - 1)
  );
}

/** The inf.Dec path of ParseQuantity: exact value, rounded up (away from zero) to nano-units. */
function parseSlow(split: Split, suffix: Suffix): Quantity | string {
  if (!/[0-9]/.test(split.value)) return ERR_NUMERIC; // inf.Dec SetString: "no digits read"
  const negative = !split.positive;
  const unscaled = stripLeadingZeros(split.num + split.denom);
  if (unscaled === "") return ZERO_QUANTITY;
  if (suffix.base === 10) {
    const scale = int32(split.denom.length + int32(-suffix.exponent));
    // Round(amount, Nano, RoundUp): the int32 shift wraps as in Go.
    const shift = int32(-NANO_SCALE - scale);
    if (shift >= 0) return quantity(negative, unscaled, shift + NANO_SCALE);
    return quantity(negative, ceilShift(unscaled, -shift), NANO_SCALE);
  }
  // BinarySI: a value ≥ 10^19 is over the cap whatever its fraction.
  if (stripLeadingZeros(split.num).length > 19)
    return quantity(negative, MAX_ALLOWED_NANO.toString(), NANO_SCALE);
  let fraction = split.denom;
  let end = fraction.length;
  while (fraction[end - 1] === "0") end--;
  fraction = fraction.slice(0, end);
  if (fraction.length > BINARY_FRACTION_DIGITS) fraction = fraction.slice(0, BINARY_FRACTION_DIGITS) + "1";
  const scaled = (BigInt(split.num + fraction) << BigInt(suffix.exponent)) * 1_000_000_000n;
  const divisor = 10n ** BigInt(fraction.length);
  let nano = scaled / divisor + (scaled % divisor === 0n ? 0n : 1n);
  if (nano > MAX_ALLOWED_NANO) nano = MAX_ALLOWED_NANO;
  return quantity(negative, nano.toString(), NANO_SCALE);
}

/** ParseQuantity: the Quantity, or the error message upstream gives. */
function parse(str: string): Quantity | string {
  if (str.length === 0) return ERR_FORMAT;
  if (str === "0") return ZERO_QUANTITY;
  const split = splitQuantity(str);
  if (!split) return ERR_FORMAT;
  const suffix = interpretSuffix(split.suffix);
  if (!suffix) return ERR_SUFFIX;
  const { num, denom } = split;
  let precision: number;
  let scale = 0;
  let mantissa = 1n;
  if (!suffix.binary) {
    scale = suffix.exponent;
    precision = MAX_INT64_FACTORS - (num.length + denom.length);
  } else if (denom.length === 0) {
    mantissa = 1n << BigInt(suffix.exponent);
    const digitsOfMantissa = Math.trunc(Math.fround(Math.fround(suffix.exponent * 3) / 10));
    precision = 15 - num.length - digitsOfMantissa - 1;
  } else precision = -1;
  if (precision >= 0) {
    // The int64Amount fast path: exact, at most 18 digits.
    scale = int32(scale - denom.length);
    if (scale >= NANO_SCALE) {
      const result = BigInt(num + denom) * mantissa;
      if (result <= MAX_INT64) return quantity(!split.positive, result.toString(), scale);
    }
  }
  return parseSlow(split, suffix);
}

/** A quantity's text quoted for a message: an object may carry a megabyte of digits. */
export function quoteQuantity(text: string): string {
  return JSON.stringify(text.length > 64 ? `${text.slice(0, 64)}…` : text);
}

/** ParseQuantity; throws upstream's error for anything it refuses. */
export function parseQuantity(text: string): Quantity {
  const result = parse(text);
  if (typeof result === "string") throw new Error(`quantity ${quoteQuantity(text)}: ${result}`);
  return result;
}

/** parseQuantity that answers undefined for a missing or unparsable quantity instead of throwing. */
export function tryParseQuantity(text: string | undefined): Quantity | undefined {
  if (typeof text !== "string") return undefined;
  const result = parse(text);
  return typeof result === "string" ? undefined : result;
}

/** Quantity.Cmp: -1, 0 or 1 as a is less than, equal to or greater than b. */
export function compareQuantities(a: Quantity, b: Quantity): -1 | 0 | 1 {
  if (a.sign !== b.sign) return a.sign < b.sign ? -1 : 1;
  if (a.sign === 0) return 0;
  // Same sign: the magnitude with more digits before the point is larger; else, digit by digit.
  const orderA = a.digits.length + a.exponent;
  const orderB = b.digits.length + b.exponent;
  let magnitude: -1 | 0 | 1;
  if (orderA !== orderB) magnitude = orderA < orderB ? -1 : 1;
  else magnitude = a.digits === b.digits ? 0 : a.digits < b.digits ? -1 : 1;
  return a.sign > 0 ? magnitude : magnitude === 0 ? 0 : magnitude === 1 ? -1 : 1;
}

/**
 * Quantity.Value: the integer rounded up (away from zero). Upstream's int64 wraps for values out of
 * its range; this saturates there instead, without expanding a huge exponent.
 */
export function quantityValue(q: Quantity): bigint {
  if (q.sign === 0) return 0n;
  const order = q.digits.length + q.exponent;
  if (order > 19) return q.sign > 0 ? MAX_INT64 : MIN_INT64;
  const magnitude =
    q.exponent >= 0 ? BigInt(q.digits) * 10n ** BigInt(q.exponent) : BigInt(ceilShift(q.digits, -q.exponent));
  const value = q.sign > 0 ? magnitude : -magnitude;
  return value > MAX_INT64 ? MAX_INT64 : value < MIN_INT64 ? MIN_INT64 : value;
}
