#!/usr/bin/env node
import { readFileSync } from "node:fs";
import yargs, { type CommandModule } from "yargs";
import { hideBin } from "yargs/helpers";
import { withFlagNames } from "./flag-types.js";
import { separateIgnoredFlags } from "./kcm-command-line.js";
import { KCM_VERSION } from "./kcm-flags.js";
import { DEV_FLAGS, RUN_FLAGS, toRunConfig, type RunArgs } from "./options.js";
import { versionInfo } from "../version.js";
import { ExitError } from "./exit-error.js";

/** Usage errors (unknown flags, bad values) exit 2 with one line, never a stack trace. */
const USAGE_ERROR = 2;

function fail(message: string, code: number): never {
  process.stderr.write(`kvc: ${message}\n`);
  process.exit(code);
}

/** A command that failed: its ExitError's code (lease lost, controllers failed), else 1. */
function failed(err: unknown): never {
  const code = err instanceof ExitError ? err.exitCode : 1;
  fail(`error: ${err instanceof Error ? err.message : String(err)}`, code);
}

/** `kvc run` takes a whole KCM command line: KCM's flags that kvc does not declare are set aside. */
function kcmCommandLine(argv: string[]): { args: string[]; ignored: string[] } {
  if (argv[0] !== "run") return { args: argv, ignored: [] };
  try {
    return separateIgnoredFlags(argv, new Set(Object.keys(RUN_FLAGS)));
  } catch (err) {
    fail(`${(err as Error).message} (see kvc --help)`, USAGE_ERROR);
  }
}
const { args, ignored: ignoredFlags } = kcmCommandLine(hideBin(process.argv));

/**
 * kvc's commands, in the order `--help` lists them. A new command is one more entry here: its
 * builder declares its flags (typed where declared), its handler returns, or throws an ExitError.
 */
const COMMANDS: CommandModule[] = [
  {
    command: "run",
    describe: "Run the volume controllers against a cluster (the production command).",
    builder: (y) =>
      y
        .options(withFlagNames(RUN_FLAGS))
        .strictOptions()
        .epilogue(
          `Every other kube-controller-manager ${KCM_VERSION} flag is accepted and ignored (named in one warning).`,
        ),
    handler: async (argv) => {
      const config = usage(() => toRunConfig(argv as RunArgs, ignoredFlags));
      const { run } = await import("./run.js");
      await run(config).catch(failed);
    },
  },
  {
    command: "dev",
    describe:
      "Start an embedded etcd + kube-apiserver on loopback (built from source, cached) and run the controllers against it.",
    // The playground is not a KCM command line: --no-demo (and --no-<flag>) read as they do elsewhere.
    builder: (y) =>
      y
        .parserConfiguration({ "boolean-negation": true, "camel-case-expansion": false })
        .options(withFlagNames(DEV_FLAGS))
        .strictOptions(),
    handler: async (argv) => {
      const config = usage(() => toRunConfig({ ...argv, "leader-elect": false }));
      const { runDev } = await import("./dev.js");
      await runDev(config, { demo: argv.demo === true }).catch(failed);
    },
  },
  {
    command: "explain",
    describe:
      "Explain, read-only, why a claim is Pending or a pod's volume is not attached (kubectl's connection flags; see docs/explain.md).",
    builder: async (y) => (await import("../explain/command.js")).explainCommand(y),
    handler: () => {},
  },
  // Shadow mode (src/shadow).
  {
    command: "shadow report",
    describe:
      "Print the summary of a running `kvc run --shadow` (GET /shadow on its --secure-port) as a table.",
    builder: (y) =>
      y
        .options({
          server: {
            type: "string",
            default: "https://127.0.0.1:10257",
            describe: "The shadow's serving URL.",
          },
          "token-file": { type: "string", describe: "File with a bearer token allowed to GET /shadow." },
          "certificate-authority": {
            type: "string",
            describe: "CA file of the shadow's serving certificate.",
          },
          "insecure-skip-tls-verify": {
            type: "boolean",
            default: false,
            describe: "Do not verify the certificate.",
          },
        })
        .strictOptions(),
    handler: async (argv) => {
      const { fetchSummary, formatReport } = await import("../shadow/report.js");
      const tokenFile = argv["token-file"] as string | undefined;
      // A missing token file is an error like a refused request: one line, exit code 1.
      const summary = await (async () =>
        fetchSummary({
          server: argv.server as string,
          token: tokenFile ? readFileSync(tokenFile, "utf8").trim() : undefined,
          caFile: argv["certificate-authority"] as string | undefined,
          insecureSkipTLSVerify: argv["insecure-skip-tls-verify"] === true,
        }))().catch(failed);
      process.stdout.write(formatReport(summary));
    },
  },
  {
    command: "version",
    describe: "Print the version of kvc.",
    handler: () => {
      process.stdout.write(`${versionInfo()}\n`);
    },
  },
];

/** A check across flags, after the parser: its error is a usage error too. */
function usage<T>(check: () => T): T {
  try {
    return check();
  } catch (err) {
    fail((err as Error).message, USAGE_ERROR);
  }
}

const names = COMMANDS.map((c) => String(c.command));
await yargs(args)
  .scriptName("kvc")
  // pflag semantics: --flag=false, never --no-flag; flags keep their kebab-case names only.
  .parserConfiguration({ "boolean-negation": false, "camel-case-expansion": false })
  .usage("$0 <command> [flags]")
  .command(COMMANDS)
  .demandCommand(1, `name a command: ${names.slice(0, -1).join(", ")} or ${names.at(-1) ?? ""}`)
  .recommendCommands()
  .strict()
  .version(false)
  .help()
  .alias("h", "help")
  .wrap(Math.min(110, process.stdout.columns || 110))
  .fail((msg: string | null, err: Error | undefined) => {
    const text = (msg ?? err?.message ?? "invalid command line").replace(/\s*\n\s*/g, " ");
    fail(`${text} (see kvc --help)`, USAGE_ERROR);
  })
  .parseAsync();
