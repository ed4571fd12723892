/**
 * Feeds hostile objects (test/fuzz/hostile-objects.ts) through every sync function and the matcher
 * and reports, per function, the slowest call with the object that caused it, and any crash.
 *   npm run fuzz -- [--seed N] [--runs N]
 */
import fc from "fast-check";
import { parseArgs } from "node:util";
import { feedWorld, isCrash, worldArbitrary } from "../test/fuzz/hostile-objects.js";

const { values } = parseArgs({
  options: {
    seed: { type: "string", default: String(Date.now() % 2 ** 31) },
    runs: { type: "string", default: "200" },
  },
});
const seed = Number(values.seed);
const runs = Number(values.runs);

interface Slowest {
  calls: number;
  totalMs: number;
  maxMs: number;
  subject: unknown;
}
const byFunction = new Map<string, Slowest>();
const crashes: string[] = [];

/** An object's gist: its kind of name and size, not a megabyte of JSON. */
function gist(subject: unknown): string {
  const json = JSON.stringify(subject) ?? "undefined";
  return json.length <= 300 ? json : `${json.slice(0, 300)}… (${json.length} chars)`;
}

await fc.assert(
  fc.asyncProperty(worldArbitrary, async (world) => {
    await feedWorld(world, async (fn, subject, call) => {
      const start = performance.now();
      try {
        await call();
      } catch (error) {
        if (isCrash(error)) crashes.push(`${fn}: ${String(error)} on ${gist(subject)}`);
      }
      const ms = performance.now() - start;
      const entry = byFunction.get(fn) ?? { calls: 0, totalMs: 0, maxMs: -1, subject: undefined };
      entry.calls++;
      entry.totalMs += ms;
      if (ms > entry.maxMs) Object.assign(entry, { maxMs: ms, subject });
      byFunction.set(fn, entry);
    });
  }),
  { numRuns: runs, seed },
);

console.log(`seed ${seed}, ${runs} runs\n`);
console.log("| function | calls | mean ms | slowest ms | slowest on |");
console.log("|---|---:|---:|---:|---|");
for (const [fn, s] of [...byFunction].sort(([, a], [, b]) => b.maxMs - a.maxMs))
  console.log(
    `| ${fn} | ${s.calls} | ${(s.totalMs / s.calls).toFixed(3)} | ${s.maxMs.toFixed(1)} | \`${gist(s.subject)}\` |`,
  );
console.log(crashes.length ? `\n${crashes.length} crashes:\n${crashes.join("\n")}` : "\nno crash");
process.exitCode = crashes.length ? 1 : 0;
