#!/usr/bin/env node
import yargs from "yargs";
import { hideBin } from "yargs/helpers";
import { DEV_FLAGS, RUN_FLAGS, toRunConfig } from "./options.js";
import { versionInfo } from "./version.js";

/** Usage errors (unknown flags, bad values) exit 2 with one line, never a stack trace. */
const USAGE_ERROR = 2;

function fail(message: string, code: number): never {
  process.stderr.write(`kvc: ${message}\n`);
  process.exit(code);
}

await yargs(hideBin(process.argv))
  .scriptName("kvc")
  // pflag semantics: --flag=false, never --no-flag; flags keep their kebab-case names only.
  .parserConfiguration({ "boolean-negation": false, "camel-case-expansion": false })
  .usage("$0 <command> [flags]")
  .command(
    "run",
    "Run the volume controllers against a cluster (the production command).",
    (y) => y.options(RUN_FLAGS).strictOptions(),
    async (argv) => {
      let config;
      try {
        config = toRunConfig(argv);
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
    (y) => y.options(DEV_FLAGS).strictOptions(),
    async (argv) => {
      let config;
      try {
        config = toRunConfig({ ...argv, "leader-elect": false });
      } catch (err) {
        fail((err as Error).message, USAGE_ERROR);
      }
      const { runDev } = await import("./dev.js");
      try {
        await runDev(config, { demo: argv.demo });
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
