import assert from "node:assert/strict";
import { test } from "node:test";
import { Registry } from "prom-client";
import { FakeClock } from "../../src/runtime/clock.js";
import { newQueue, newRateLimitingQueue, WorkqueueMetrics } from "../../src/runtime/workqueue/index.js";

const NAMES = [
  "workqueue_depth",
  "workqueue_adds_total",
  "workqueue_queue_duration_seconds",
  "workqueue_work_duration_seconds",
  "workqueue_unfinished_work_seconds",
  "workqueue_longest_running_processor_seconds",
  "workqueue_retries_total",
];

async function value(registry: Registry, metric: string, queue: string, series = metric): Promise<number> {
  const { values } = await registry.getSingleMetric(metric)!.get();
  const found = values.find(
    (v) => v.labels.name === queue && ("metricName" in v ? v.metricName : metric) === series,
  );
  assert.ok(found, `no ${series}{name="${queue}"}`);
  return found.value;
}

test("workqueue metrics follow a queue's adds, gets, dones and retries, timed on its clock", async () => {
  const registry = new Registry();
  const clock = new FakeClock();
  const q = newRateLimitingQueue({ name: "claims", clock, metrics: new WorkqueueMetrics(registry) });

  q.add("ns/a");
  q.add("ns/a");
  q.add("ns/b");
  clock.advance(1_000);
  const a = (await q.get())!;
  clock.advance(3_000);
  assert.equal(await value(registry, "workqueue_adds_total", "claims"), 2);
  assert.equal(await value(registry, "workqueue_depth", "claims"), 1);
  assert.equal(
    await value(
      registry,
      "workqueue_queue_duration_seconds",
      "claims",
      "workqueue_queue_duration_seconds_sum",
    ),
    1,
  );
  assert.equal(await value(registry, "workqueue_unfinished_work_seconds", "claims"), 3);
  assert.equal(await value(registry, "workqueue_longest_running_processor_seconds", "claims"), 3);

  q.done(a);
  q.addRateLimited("ns/a");
  assert.equal(
    await value(registry, "workqueue_work_duration_seconds", "claims", "workqueue_work_duration_seconds_sum"),
    3,
  );
  assert.equal(await value(registry, "workqueue_unfinished_work_seconds", "claims"), 0);
  assert.equal(await value(registry, "workqueue_retries_total", "claims"), 1);

  const text = await registry.metrics();
  for (const name of NAMES)
    assert.match(text, new RegExp(`^${name}(_bucket|_sum|_count)?\\{[^}]*name="claims"`, "m"));
  assert.match(text, /workqueue_work_duration_seconds_bucket\{le="1e-8",name="claims"\} 0/);
  assert.match(text, /workqueue_work_duration_seconds_bucket\{le="10",name="claims"\} 1/);
});

test("a second WorkqueueMetrics on the same registry reuses its metrics instead of re-registering", async () => {
  const registry = new Registry();
  newQueue({ name: "claims", metrics: new WorkqueueMetrics(registry) }).add("ns/a");
  newQueue({ name: "volumes", metrics: new WorkqueueMetrics(registry) }).add("ns/b");
  assert.equal((await registry.getMetricsAsJSON()).length, NAMES.length);
  assert.equal(await value(registry, "workqueue_adds_total", "claims"), 1);
  assert.equal(await value(registry, "workqueue_adds_total", "volumes"), 1);
});
