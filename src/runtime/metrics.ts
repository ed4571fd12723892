import { Gauge, type Registry } from "prom-client";

/**
 * Wraps `create` so that it runs once per registry: later calls with the same registry get the
 * instruments made the first time. prom-client throws when a registry sees a metric name twice, and
 * several controllers (or queues) may share one registry, as upstream's sync.Once registration.
 */
export function oncePerRegistry<T extends object>(
  create: (registry: Registry) => T,
): (registry: Registry) => T {
  const byRegistry = new WeakMap<Registry, T>();
  return (registry) => {
    let instruments = byRegistry.get(registry);
    if (!instruments) {
      instruments = create(registry);
      byRegistry.set(registry, instruments);
    }
    return instruments;
  };
}

/** How long a gauge's counting may hold the event loop (which also renews the Lease) at a stretch. */
const COUNT_SLICE_MS = 5;

interface GaugeOptions<L extends string> {
  name: string;
  help: string;
  labelNames: readonly L[];
}

/**
 * A gauge set on each scrape to how many times each label set is yielded by `count`. Counting walks
 * every object of a cache (tens of thousands in a large cluster, over a second in one piece), so it
 * runs in slices of a few milliseconds with a turn of the event loop between them: a scrape never
 * holds up the lease renewal, watches or workers for long.
 */
export function countGauge<L extends string>(
  registry: Registry,
  opts: GaugeOptions<L> & { count: () => Iterable<Record<L, string>> },
): void {
  foldGauge(
    registry,
    opts,
    function* () {
      for (const labels of opts.count()) yield { labels, value: 1 };
    },
    (a, b) => a + b,
  );
}

/**
 * A gauge set on each scrape to the smallest value `measure` yields for each label set (the oldest
 * object's timestamp, say), walked in slices as countGauge's.
 */
export function minGauge<L extends string>(
  registry: Registry,
  opts: GaugeOptions<L> & { measure: () => Iterable<{ labels: Record<L, string>; value: number }> },
): void {
  foldGauge(registry, opts, opts.measure, Math.min);
}

function foldGauge<L extends string>(
  registry: Registry,
  opts: GaugeOptions<L>,
  values: () => Iterable<{ labels: Record<L, string>; value: number }>,
  fold: (a: number, b: number) => number,
): void {
  new Gauge({
    name: opts.name,
    help: opts.help,
    labelNames: opts.labelNames,
    registers: [registry],
    async collect() {
      const folded = new Map<string, { labels: Record<L, string>; value: number }>();
      let sliceStart = performance.now();
      let seen = 0;
      for (const { labels, value } of values()) {
        const key = opts.labelNames.map((l) => labels[l]).join("\0");
        const entry = folded.get(key);
        if (entry) entry.value = fold(entry.value, value);
        else folded.set(key, { labels, value });
        if (++seen % 256 === 0 && performance.now() - sliceStart > COUNT_SLICE_MS) {
          await new Promise((resolve) => setImmediate(resolve));
          sliceStart = performance.now();
        }
      }
      this.reset();
      for (const { labels, value } of folded.values()) this.set(labels, value);
    },
  });
}
