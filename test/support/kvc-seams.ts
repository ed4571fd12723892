/**
 * `kvc run` with test seams (src/persistentvolume/crash-seam.ts), for tests that must kill a real
 * process at a chosen point: `node --import tsx kvc-seams.ts '<TestSeams as JSON>' run <flags>`.
 * The production CLI (src/app/cli.ts) has no way to set them; this entry parses `kvc run`'s flags as
 * it does and passes the seams to run() directly.
 */
import yargs from "yargs";
import { hideBin } from "yargs/helpers";
import { withFlagNames } from "../../src/app/flag-types.js";
import { RUN_FLAGS, toRunConfig } from "../../src/app/options.js";
import { run } from "../../src/app/run.js";
import type { TestSeams } from "../../src/persistentvolume/crash-seam.js";

const [seams = "{}", command, ...flags] = hideBin(process.argv);
if (command !== "run") throw new Error(`usage: kvc-seams.ts '<seams JSON>' run [flags], got ${command}`);
const argv = await yargs(flags)
  .parserConfiguration({ "boolean-negation": false, "camel-case-expansion": false })
  .options(withFlagNames(RUN_FLAGS))
  .strict()
  .parseAsync();
await run(toRunConfig(argv), { seams: JSON.parse(seams) as TestSeams });
