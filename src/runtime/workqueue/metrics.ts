import { Counter, Gauge, Histogram, type Registry } from "prom-client";
import { realClock, type Clock } from "../clock.js";
import { oncePerRegistry } from "../metrics.js";

/** The hooks a queue calls, at the same points as client-go's queueMetrics. */
export interface QueueMetrics {
  /** An item became dirty (a real add, not a deduplicated one). */
  add(item: string): void;
  /** get() handed the item to a worker. */
  get(item: string): void;
  /** done() ended the item's processing. */
  done(item: string): void;
  /** addAfter() was called (client-go counts every delayed add as a retry). */
  retry(): void;
}

type Label = "name";

interface Instruments {
  depth: Gauge<Label>;
  adds: Counter<Label>;
  latency: Histogram<Label>;
  workDuration: Histogram<Label>;
  retries: Counter<Label>;
  /** Every handle ever made on this registry, for the gauges computed at scrape time. */
  handles: Set<PromQueueMetrics>;
}

/** client-go's ExponentialBuckets(10e-9, 10, 10): 10 ns to 10 s, written out to avoid float drift. */
const DURATION_BUCKETS = [1e-8, 1e-7, 1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1, 1, 10];

/** One set of instruments per registry, so a second WorkqueueMetrics on it does not re-register. */
const instrumentsFor = oncePerRegistry(createInstruments);

/** client-go's workqueue metrics (label `name`) on a caller's prom-client registry. */
export class WorkqueueMetrics {
  readonly #instruments: Instruments;

  constructor(registry: Registry) {
    this.#instruments = instrumentsFor(registry);
  }

  /** A handle for the queue called `name`; `clock` must be the queue's, since durations are measured on it. */
  forQueue(name: string, clock: Clock = realClock): QueueMetrics {
    const handle = new PromQueueMetrics(name, this.#instruments, clock);
    this.#instruments.handles.add(handle);
    return handle;
  }
}

function createInstruments(registry: Registry): Instruments {
  const registers = [registry];
  const labelNames = ["name"] as const;
  const handles = new Set<PromQueueMetrics>();
  // Per queue name: the summed and the longest age of the items being processed, in seconds.
  const inProgress = () => {
    const byName = new Map<string, { total: number; longest: number }>();
    for (const handle of handles) {
      const acc = byName.get(handle.name) ?? { total: 0, longest: 0 };
      for (const age of handle.processingAges()) {
        acc.total += age;
        acc.longest = Math.max(acc.longest, age);
      }
      byName.set(handle.name, acc);
    }
    return byName;
  };
  new Gauge({
    name: "workqueue_unfinished_work_seconds",
    help: "How many seconds of work has done that is in progress and hasn't been observed by work_duration. Large values indicate stuck threads. One can deduce the number of stuck threads by observing the rate at which this increases.",
    labelNames,
    registers,
    collect() {
      for (const [name, { total }] of inProgress()) this.set({ name }, total);
    },
  });
  new Gauge({
    name: "workqueue_longest_running_processor_seconds",
    help: "How many seconds has the longest running processor for workqueue been running.",
    labelNames,
    registers,
    collect() {
      for (const [name, { longest }] of inProgress()) this.set({ name }, longest);
    },
  });
  return {
    handles,
    depth: new Gauge({
      name: "workqueue_depth",
      help: "Current depth of workqueue",
      labelNames,
      registers,
    }),
    adds: new Counter({
      name: "workqueue_adds_total",
      help: "Total number of adds handled by workqueue",
      labelNames,
      registers,
    }),
    latency: new Histogram({
      name: "workqueue_queue_duration_seconds",
      help: "How long in seconds an item stays in workqueue before being requested.",
      labelNames,
      buckets: DURATION_BUCKETS,
      registers,
    }),
    workDuration: new Histogram({
      name: "workqueue_work_duration_seconds",
      help: "How long in seconds processing an item from workqueue takes.",
      labelNames,
      buckets: DURATION_BUCKETS,
      registers,
    }),
    retries: new Counter({
      name: "workqueue_retries_total",
      help: "Total number of retries handled by workqueue",
      labelNames,
      registers,
    }),
  };
}

class PromQueueMetrics implements QueueMetrics {
  readonly #m: Instruments;
  readonly #clock: Clock;
  /** When each dirty item was first added, for queue_duration. */
  readonly #addedAt = new Map<string, number>();
  /** When each item's processing started, for work_duration and the in-progress gauges. */
  readonly #startedAt = new Map<string, number>();

  constructor(
    readonly name: string,
    instruments: Instruments,
    clock: Clock,
  ) {
    this.#m = instruments;
    this.#clock = clock;
    // Zero-valued series from the start, so dashboards see the queue before its first add.
    for (const metric of [instruments.depth, instruments.adds, instruments.retries]) metric.inc({ name }, 0);
  }

  add(item: string): void {
    this.#m.adds.inc({ name: this.name });
    this.#m.depth.inc({ name: this.name });
    if (!this.#addedAt.has(item)) this.#addedAt.set(item, this.#clock.now());
  }

  get(item: string): void {
    const now = this.#clock.now();
    this.#m.depth.dec({ name: this.name });
    this.#startedAt.set(item, now);
    const addedAt = this.#addedAt.get(item);
    if (addedAt !== undefined) {
      this.#m.latency.observe({ name: this.name }, (now - addedAt) / 1000);
      this.#addedAt.delete(item);
    }
  }

  done(item: string): void {
    const startedAt = this.#startedAt.get(item);
    if (startedAt === undefined) return;
    this.#m.workDuration.observe({ name: this.name }, (this.#clock.now() - startedAt) / 1000);
    this.#startedAt.delete(item);
  }

  retry(): void {
    this.#m.retries.inc({ name: this.name });
  }

  /** Seconds each item being processed has been running. */
  *processingAges(): Iterable<number> {
    const now = this.#clock.now();
    for (const startedAt of this.#startedAt.values()) yield (now - startedAt) / 1000;
  }
}
