import assert from "node:assert/strict";
import { PassThrough } from "node:stream";
import { test } from "node:test";
import { childLogger, createLogger, type LogSink } from "../../src/runtime/logger.js";

test("childLogger binds the controller to every line, on pino and on a plain sink", () => {
  const lines: string[] = [];
  const out = new PassThrough();
  out.on("data", (chunk: Buffer) => lines.push(...chunk.toString().trim().split("\n")));
  const pino = childLogger(createLogger({ verbosity: 0, format: "json", destination: out }), {
    controller: "c1",
  });
  const cause = new Error("root");
  pino.error({ err: new Error("boom", { cause }) }, "failed");
  const line = JSON.parse(lines[0] ?? "{}") as {
    controller?: string;
    err?: { message?: string; stack?: string };
  };
  assert.equal(line.controller, "c1");
  assert.equal(line.err?.message, "boom: root", "the error keeps its cause");
  assert.match(line.err?.stack ?? "", /^Error: boom\n[^]*caused by: Error: root/, "and both stacks");

  const seen: object[] = [];
  const recorder: LogSink = {
    debug: (o) => seen.push(o),
    info: (o) => seen.push(o),
    warn: (o) => seen.push(o),
    error: (o) => seen.push(o),
  };
  const child = childLogger(recorder, { controller: "c2" });
  child.info({ pvc: "ns/a" }, "m");
  child.debug({}, "m");
  assert.deepEqual(seen, [{ controller: "c2", pvc: "ns/a" }, { controller: "c2" }]);
});
