#!/usr/bin/env node
import { readFileSync } from "node:fs";
import yargs from "yargs";
import { hideBin } from "yargs/helpers";
import { withFlagNames } from "./flag-types.js";
import { separateIgnoredFlags } from "./kcm-command-line.js";
import { KCM_VERSION } from "./kcm-flags.js";
import { DEV_FLAGS, RUN_FLAGS, toRunConfig } from "./options.js";
import { versionInfo } from "./version.js";

/** Usage errors (unknown flags, bad values) exit 2 with one line, never a stack trace. */
const USAGE_ERROR = 2;

function fail(message: string, code: number): never {
  process.stderr.write(`kvc: ${message}\n`);
  process.exit(code);
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

await yargs(args)
  .scriptName("kvc")
  // pflag semantics: --flag=false, never --no-flag; flags keep their kebab-case names only.
  .parserConfiguration({ "boolean-negation": false, "camel-case-expansion": false })
  .usage("$0 <command> [flags]")
  .command(
    "run",
    "Run the volume controllers against a cluster (the production command).",
    (y) =>
      y
        .options(withFlagNames(RUN_FLAGS))
        .strictOptions()
        .epilogue(
          `Every other kube-controller-manager ${KCM_VERSION} flag is accepted and ignored (named in one warning).`,
        ),
    async (argv) => {
      let config;
      try {
        config = toRunConfig(argv, ignoredFlags);
      } catch (err) {
        fail((err as Error).message, USAGE_ERROR);
      }
      const { run } = await import("./run.js");
      try {
        await run(config);
      } catch (err) {
        fail(`error: ${(err as Error).message}`, 1);
      }
    },
  )
  .command(
    "dev",
    "Start an embedded etcd + kube-apiserver on loopback (built from source, cached) and run the controllers against it.",
    // The playground is not a KCM command line: --no-demo (and --no-<flag>) read as they do elsewhere.
    (y) =>
      y
        .parserConfiguration({ "boolean-negation": true, "camel-case-expansion": false })
        .options(withFlagNames(DEV_FLAGS))
        .strictOptions(),
    async (argv) => {
      let config;
      try {
        config = toRunConfig({ ...argv, "leader-elect": false });
      } catch (err) {
        fail((err as Error).message, USAGE_ERROR);
      }
      const { runDev } = await import("./dev.js");
      try {
        await runDev(config, { demo: argv.demo === true });
      } catch (err) {
        fail(`error: ${(err as Error).message}`, 1);
      }
    },
  )
  // Shadow mode (src/shadow).
  .command(
    "shadow report",
    "Print the summary of a running `kvc run --shadow` (GET /shadow on its --secure-port) as a table.",
    (y) =>
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
    async (argv) => {
      const { fetchSummary, formatReport } = await import("./shadow/report.js");
      try {
        const summary = await fetchSummary({
          server: argv.server,
          token: argv["token-file"] ? readFileSync(argv["token-file"], "utf8").trim() : undefined,
          caFile: argv["certificate-authority"],
          insecureSkipTLSVerify: argv["insecure-skip-tls-verify"],
        });
        process.stdout.write(formatReport(summary));
      } catch (err) {
        fail(`error: ${(err as Error).message}`, 1);
      }
    },
  )
  .command(
    "version",
    "Print the version of kvc.",
    (y) => y,
    () => {
      process.stdout.write(`${versionInfo()}\n`);
    },
  )
  .demandCommand(1, "name a command: run, dev or version")
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
