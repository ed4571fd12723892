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

/** A gauge set on each scrape to how many times each label set is yielded by `count`. */
export function countGauge<L extends string>(
  registry: Registry,
  opts: { name: string; help: string; labelNames: readonly L[]; count: () => Iterable<Record<L, string>> },
): void {
  new Gauge({
    name: opts.name,
    help: opts.help,
    labelNames: opts.labelNames,
    registers: [registry],
    collect() {
      const counts = new Map<string, { labels: Record<L, string>; n: number }>();
      for (const labels of opts.count()) {
        const key = JSON.stringify(opts.labelNames.map((l) => labels[l]));
        const entry = counts.get(key);
        if (entry) entry.n++;
        else counts.set(key, { labels, n: 1 });
      }
      this.reset();
      for (const { labels, n } of counts.values()) this.set(labels, n);
    },
  });
}
