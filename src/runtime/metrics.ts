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

/**
 * A gauge set on each scrape to how many times each label set is yielded by `count`. Counting walks
 * every object of a cache (tens of thousands in a large cluster, over a second in one piece), so it
 * runs in slices of a few milliseconds with a turn of the event loop between them: a scrape never
 * holds up the lease renewal, watches or workers for long.
 */
export function countGauge<L extends string>(
  registry: Registry,
  opts: { name: string; help: string; labelNames: readonly L[]; count: () => Iterable<Record<L, string>> },
): void {
  new Gauge({
    name: opts.name,
    help: opts.help,
    labelNames: opts.labelNames,
    registers: [registry],
    async collect() {
      const counts = new Map<string, { labels: Record<L, string>; n: number }>();
      let sliceStart = performance.now();
      let seen = 0;
      for (const labels of opts.count()) {
        const key = opts.labelNames.map((l) => labels[l]).join("\0");
        const entry = counts.get(key);
        if (entry) entry.n++;
        else counts.set(key, { labels, n: 1 });
        if (++seen % 256 === 0 && performance.now() - sliceStart > COUNT_SLICE_MS) {
          await new Promise((resolve) => setImmediate(resolve));
          sliceStart = performance.now();
        }
      }
      this.reset();
      for (const { labels, n } of counts.values()) this.set(labels, n);
    },
  });
}
