import type { Options } from "yargs";
import { typeName } from "./flag-types.js";
import { KCM_VERSION } from "./kcm-flags.js";
import { RUN_FLAGS } from "./options.js";

/** docs/flags.md, generated from the CLI definition (`npm run docs:flags`; a test keeps it current). */
export function flagReference(): string {
  const groups = new Map<string, string[]>();
  for (const [name, flag] of Object.entries(RUN_FLAGS) as [string, Options][]) {
    const group = (flag.group ?? "Other:").replace(/:$/, "");
    const def = flag.default === undefined || flag.default === "" ? "" : `\`${String(flag.default)}\``;
    const choices = flag.choices
      ? ` One of: ${(flag.choices as string[]).map((c) => `\`${c}\``).join(", ")}.`
      : "";
    const row = `| \`--${name}\` | ${typeName(flag)} | ${def} | ${String(flag.describe).replaceAll("|", "\\|")}${choices} |`;
    groups.set(group, [...(groups.get(group) ?? []), row]);
  }
  const sections = [...groups].map(
    ([group, rows]) =>
      `## ${group}\n\n| flag | type | default | meaning |\n| --- | --- | --- | --- |\n${rows.join("\n")}\n`,
  );
  return [
    "# `kvc run` flags",
    "",
    "Generated from `src/app/options.ts` by `npm run docs:flags`; do not edit by hand. Names and defaults are",
    "kube-controller-manager's; durations are Go durations (`15s`, `1m30s`). Every other flag of",
    `kube-controller-manager ${KCM_VERSION} is accepted and ignored (named in one warning at start-up); see`,
    "[operations.md](operations.md#configuring-kvc).",
    "",
    sections.join("\n"),
  ].join("\n");
}
