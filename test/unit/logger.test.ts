import assert from "node:assert/strict";
import { PassThrough } from "node:stream";
import { test } from "node:test";
import { createLogger } from "../../src/runtime/logger.js";

test("a controller's child logger binds its name; an error keeps its stack and cause", () => {
  const lines: string[] = [];
  const out = new PassThrough();
  out.on("data", (chunk: Buffer) => lines.push(...chunk.toString().trim().split("\n")));
  const pino = createLogger({ verbosity: 0, format: "json", destination: out }).child({ controller: "c1" });
  const cause = new Error("root");
  pino.error({ err: new Error("boom", { cause }) }, "failed");
  const line = JSON.parse(lines[0] ?? "{}") as {
    controller?: string;
    err?: { message?: string; stack?: string };
  };
  assert.equal(line.controller, "c1");
  assert.equal(line.err?.message, "boom: root", "the error keeps its cause");
  assert.match(line.err?.stack ?? "", /^Error: boom\n[^]*caused by: Error: root/, "and both stacks");
});
