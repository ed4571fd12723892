import { parseGoBool } from "./flag-types.js";
import { KCM_FLAGS } from "./kcm-flags.js";

/**
 * A kube-controller-manager command line for `kvc run`: the flags kvc declares go on to its parser;
 * every other flag KCM has (its other controllers, generic ones kvc does not implement) is taken out
 * here, with its value, so that kvc starts from a KCM manifest's command line and names what it
 * ignores in one warning (run.ts). What is ignored is always "every KCM flag minus the ones kvc
 * declares": declaring a flag is all it takes to stop ignoring it.
 * A name KCM does not know stays in, for the parser to reject as unknown.
 */
export function separateIgnoredFlags(
  args: readonly string[],
  declared: ReadonlySet<string>,
): { args: string[]; ignored: string[] } {
  const kept: string[] = [];
  const ignored = new Set<string>();
  for (let i = 0; i < args.length; i++) {
    const arg = args[i] ?? "";
    if (arg === "--") {
      kept.push(...args.slice(i));
      break;
    }
    const m = /^--([^=]+)(?:=(.*))?$/s.exec(arg);
    const name = m?.[1] ?? "";
    const flag = KCM_FLAGS_BY_NAME.get(name);
    if (!m || !flag || declared.has(name) || name === "help") {
      kept.push(arg);
      continue;
    }
    ignored.add(`--${name}`);
    const inline = m[2];
    if (flag.type === "bool") {
      // pflag: a bool flag never takes the next argument; `--flag=v` must be a Go bool.
      if (inline !== undefined && parseGoBool(inline) === undefined) {
        throw new Error(`--${name}: invalid boolean "${inline}" (want true or false)`);
      }
    } else if (inline === undefined && !flag.type.endsWith("[=true]")) {
      // pflag: `--flag value` takes the next argument as the value, whatever it looks like.
      if (i + 1 >= args.length) throw new Error(`--${name}: flag needs an argument`);
      i++;
    }
  }
  return { args: kept, ignored: [...ignored] };
}

const KCM_FLAGS_BY_NAME = new Map(KCM_FLAGS.map((f) => [f.name, f]));
