import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";
import { format, resolveConfig } from "prettier";
import { flagReference } from "../../src/app/flag-reference.js";
import { RUN_FLAGS } from "../../src/app/options.js";

test("docs/flags.md is what `npm run docs:flags` generates from the CLI definition", async () => {
  const path = new URL("../../docs/flags.md", import.meta.url);
  const options = await resolveConfig(path);
  const expected = await format(flagReference(), { ...options, parser: "markdown" });
  assert.equal(readFileSync(path, "utf8"), expected, "run `npm run docs:flags`");
  for (const flag of Object.keys(RUN_FLAGS)) assert.match(expected, new RegExp(`\`--${flag}\``));
});
