import type { Registry } from "prom-client";

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
