import { readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

const root = fileURLToPath(new URL("../..", import.meta.url));

/** The Dockerfile's ENTRYPOINT as written: [init, "--", "node", ...Node options, script]. */
export function dockerfileEntrypoint(): string[] {
  const dockerfile = readFileSync(join(root, "Dockerfile"), "utf8");
  const line = /^ENTRYPOINT (.*)$/m.exec(dockerfile)?.[1];
  if (!line) throw new Error("the Dockerfile has no ENTRYPOINT");
  return JSON.parse(line) as string[];
}

/** What the image's init runs: ["node", ...Node options, script relative to the image's /app]. */
export function imageEntrypoint(): string[] {
  const entrypoint = dockerfileEntrypoint();
  return entrypoint.slice(entrypoint.indexOf("--") + 1);
}
