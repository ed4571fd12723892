import type { Argv } from "yargs";
import { explainClaim } from "./claim.js";
import { explainPod } from "./pod.js";
import { explainVolume } from "./volume.js";
import { ClusterReader } from "./cluster.js";
import { noPaint, OUTPUT_FORMATS, paintFor, render, type OutputFormat } from "./render.js";

/** `kvc explain`: read-only, with kubectl's connection flags. */
export function explainCommand(y: Argv): Argv {
  return y
    .option("kubeconfig", {
      type: "string",
      describe: "Path to the kubeconfig file (else $KUBECONFIG, else in-cluster)",
    })
    .option("context", { type: "string", describe: "The kubeconfig context to use" })
    .option("namespace", {
      alias: "n",
      type: "string",
      describe: "The claim's or pod's namespace (default: the context's)",
    })
    .option("output", {
      alias: "o",
      choices: OUTPUT_FORMATS,
      default: "human",
      describe: "Output format; json and yaml follow docs/explain.md",
    })
    .command(
      ["pvc <name>", "persistentvolumeclaim <name>"],
      "Why a PersistentVolumeClaim is (not) bound: every volume's verdict from the binder's matcher, and what the binder does next.",
      (c) => c.positional("name", { type: "string", demandOption: true }),
      (argv) =>
        reportErrors(async () => {
          const reader = new ClusterReader(argv);
          const inputs = await reader.claimInputs(argv.name);
          if (!inputs) throw new Error(`PersistentVolumeClaim ${reader.namespace}/${argv.name} not found`);
          const format = argv.output as OutputFormat;
          process.stdout.write(
            render(explainClaim(inputs), format, format === "human" ? paintFor(process.stdout) : noPaint),
          );
        }),
    )
    .command(
      ["pv <name>", "persistentvolume <name>"],
      "A PersistentVolume's phase and why: its claim, what its reclaim policy does, its last warning, what holds its deletion.",
      (c) => c.positional("name", { type: "string", demandOption: true }),
      (argv) =>
        reportErrors(async () => {
          const reader = new ClusterReader(argv);
          const inputs = await reader.volumeInputs(argv.name);
          if (!inputs) throw new Error(`PersistentVolume ${argv.name} not found`);
          const format = argv.output as OutputFormat;
          process.stdout.write(
            render(explainVolume(inputs), format, format === "human" ? paintFor(process.stdout) : noPaint),
          );
        }),
    )
    .command(
      ["pod <name>", "po <name>"],
      "Why a pod's volumes are (not) attached: plugin, VolumeAttachment, multi-attach, node status, pending detach, from the attach/detach controller's own code.",
      (c) => c.positional("name", { type: "string", demandOption: true }),
      (argv) =>
        reportErrors(async () => {
          const reader = new ClusterReader(argv);
          const inputs = await reader.podInputs(argv.name);
          if (!inputs) throw new Error(`Pod ${reader.namespace}/${argv.name} not found`);
          const format = argv.output as OutputFormat;
          process.stdout.write(
            render(explainPod(inputs), format, format === "human" ? paintFor(process.stdout) : noPaint),
          );
        }),
    )
    .demandCommand(1, "name what to explain: pvc NAME, pv NAME or pod NAME")
    .strict();
}

/** Failures to read the cluster are no usage errors: one line and exit 1, as kubectl. */
async function reportErrors(body: () => Promise<void>): Promise<void> {
  try {
    await body();
  } catch (err) {
    process.stderr.write(`kvc explain: ${(err as Error).message}\n`);
    process.exitCode = 1;
  }
}
