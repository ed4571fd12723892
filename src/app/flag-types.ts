import type { Options } from "yargs";
import { parseDuration } from "../util/duration.js";

/**
 * pflag's value types for yargs flags: each parses the text as kube-controller-manager's flag of that
 * type does (Go duration syntax, whole numbers for int32, comma lists) and throws one sentence on
 * anything else. `withFlagNames` puts the flag's name in front of that sentence.
 */
type Coerce = (value: unknown) => unknown;

/** strconv.ParseBool, which pflag's bool flags use: the value, or undefined for anything else. */
export function parseGoBool(text: string): boolean | undefined {
  if (["1", "t", "T", "TRUE", "true", "True"].includes(text)) return true;
  if (["0", "f", "F", "FALSE", "false", "False"].includes(text)) return false;
  return undefined;
}

/** A Go time.Duration ("15s", "1m30s"), in milliseconds. */
export const duration: Coerce = (v) => parseDuration(String(v));

/**
 * A float (pflag float32: --kube-api-qps) of at least `min`. Number flags leave yargs' `type` unset:
 * its "number" turns "abc" into NaN before we could quote what was typed.
 */
export function float(min = -Infinity): Coerce {
  return named("float", (v) => number(v, min, "a number", (n) => Number.isFinite(n)));
}

/** A whole number (pflag int32) of at least `min`. */
export function int(min: number): Coerce {
  return named("int", (v) =>
    number(v, min, "an integer", (n) => Number.isInteger(n) && Math.abs(n) < 2 ** 31),
  );
}

/** A comma-separated list (pflag strings); repeating the flag adds to the list, as pflag does. */
export const strings: Coerce = (v) =>
  (Array.isArray(v) ? v : [v])
    .flatMap((s) => String(s).split(","))
    .map((s) => s.trim())
    .filter((s) => s !== "");

/**
 * A comma-separated list whose items `parse` checks and turns into the flag's value: pflag strings, or
 * another pflag type of the same syntax (--feature-gates' colonSeparatedMultimapStringString).
 */
export function list(parse: (items: string[]) => unknown, type = "strings"): Coerce {
  const coerce = named(type, (v) => parse(strings(v) as string[]));
  LISTS.add(coerce);
  return coerce;
}

/** The coerces of list flags: repeating one adds to its list. */
const LISTS = new WeakSet<Coerce>([strings]);

function number(v: unknown, min: number, want: string, ok: (n: number) => boolean): number {
  const text = String(v).trim();
  const n = text === "" ? NaN : Number(text);
  if (!ok(n) || n < min) {
    throw new Error(`want ${want}${min > -Infinity ? ` >= ${min}` : ""}, got "${text}"`);
  }
  return n;
}

const TYPE_NAMES = new WeakMap<Coerce, string>();
function named(type: string, coerce: Coerce): Coerce {
  TYPE_NAMES.set(coerce, type);
  return coerce;
}
named("duration", duration);
named("strings", strings);

/** The type docs/flags.md shows for a flag: pflag's name for it. */
export function typeName(flag: Options): string {
  return (flag.coerce && TYPE_NAMES.get(flag.coerce as Coerce)) ?? String(flag.type);
}

/**
 * The flags for yargs: a repeated flag keeps its last value as pflag does (yargs would make an
 * array), a value flag needs its value, and a bad value reads `--name: why`.
 */
export function withFlagNames<T extends Record<string, Options>>(
  flags: T,
): { [K in keyof T]: T[K] & { coerce: Coerce } } {
  return Object.fromEntries(
    Object.entries(flags).map(([name, flag]) => {
      const coerce: Coerce = flag.coerce ?? ((v) => v);
      const list = LISTS.has(coerce);
      return [
        name,
        {
          ...flag,
          // pflag: a value flag without its value is an error ("flag needs an argument"), not "".
          ...(flag.type !== "boolean" && { requiresArg: true }),
          coerce: (v: unknown) => {
            try {
              return coerce(!list && Array.isArray(v) ? v.at(-1) : v);
            } catch (err) {
              throw new Error(`--${name}: ${(err as Error).message}`, { cause: err });
            }
          },
        },
      ];
    }),
  ) as { [K in keyof T]: T[K] & { coerce: Coerce } };
}
