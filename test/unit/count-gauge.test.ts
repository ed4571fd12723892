import assert from "node:assert/strict";
import { test } from "node:test";
import { Registry } from "prom-client";
import { countGauge } from "../../src/runtime/metrics.js";

test("countGauge counts each label set and lets the event loop run while counting a large cache", async () => {
  const registry = new Registry();
  let turns = 0;
  let turnsBeforeEnd = -1;
  const items = 5_000;
  countGauge(registry, {
    name: "things",
    help: "things by kind",
    labelNames: ["kind"] as const,
    *count() {
      for (let i = 0; i < items; i++) {
        // ~20 µs of work per object, as building a volume's plugin name: the whole walk takes > 5 ms
        const until = performance.now() + 0.02;
        while (performance.now() < until);
        if (i === items - 1) turnsBeforeEnd = turns;
        yield { kind: i % 4 === 0 ? "a" : "b" };
      }
    },
  });
  let counting = true;
  const ticker = (async () => {
    while (counting) {
      await new Promise((resolve) => setImmediate(resolve));
      turns++;
    }
  })();
  const text = await registry.metrics();
  counting = false;
  await ticker;
  assert.match(text, /^things\{kind="a"\} 1250$/m);
  assert.match(text, /^things\{kind="b"\} 3750$/m);
  assert.ok(turnsBeforeEnd > 0, `the event loop turned ${turnsBeforeEnd} times before the count ended`);
});
