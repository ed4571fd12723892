import type { V1VolumeAttachment } from "@kubernetes/client-node";
import { Counter, Histogram, type Registry } from "prom-client";
import { countGauge, minGauge, oncePerRegistry } from "../runtime/metrics.js";
import { fullyQualifiedPluginName, type VolumePlugin, type VolumeSpec } from "../volume/plugin.js";
import type { ForceDetachReason, ReconcilerMetrics } from "./reconciler.js";
import type { OperationMetrics, OperationName } from "./operation-executor.js";

/** What the state gauges count on each scrape: one controller's caches and plugins. */
export interface AttachDetachCollectorSource {
  desiredVolumeSpecs(): Iterable<VolumeSpec>;
  /** Undefined for a volume known only by name (from node status at start-up). */
  actualVolumeSpecs(): Iterable<VolumeSpec | undefined>;
  /** Per scheduled pod volume whose spec could be built: its node and spec. */
  podVolumes(): Iterable<{ nodeName: string; spec: VolumeSpec }>;
  /** Throws when no single plugin supports the spec. */
  findPluginBySpec(spec: VolumeSpec): Pick<VolumePlugin, "name">;
  /** The VolumeAttachments in the informer's cache. */
  volumeAttachments(): Iterable<V1VolumeAttachment>;
}

interface Instruments {
  sources: Set<AttachDetachCollectorSource>;
  forcedDetaches: Counter<"reason">;
  operationSeconds: Histogram<"volume_plugin" | "operation_name" | "status" | "migrated">;
}

/** pkg/volume/util's buckets for storage_operation_duration_seconds. */
const OPERATION_BUCKETS = [0.1, 0.25, 0.5, 1, 2.5, 5, 10, 15, 25, 50, 120, 300, 600];

const instrumentsFor = oncePerRegistry(createInstruments);

/**
 * The attach/detach controller's metrics (upstream attachdetach/metrics and the operation executor's
 * storage_operation_duration_seconds) on a caller's registry. Controllers sharing a registry share
 * the instruments; the state gauges sum over every open controller.
 */
export class AttachDetachMetrics implements ReconcilerMetrics, OperationMetrics {
  readonly #instruments: Instruments;
  readonly #source: AttachDetachCollectorSource;

  constructor(registry: Registry, source: AttachDetachCollectorSource) {
    this.#instruments = instrumentsFor(registry);
    this.#source = source;
    this.#instruments.sources.add(source);
  }

  forcedDetach(reason: ForceDetachReason): void {
    this.#instruments.forcedDetaches.inc({ reason });
  }

  operationCompleted(
    pluginName: string,
    operationName: OperationName,
    seconds: number,
    success: boolean,
    migrated: boolean,
  ): void {
    this.#instruments.operationSeconds.observe(
      {
        volume_plugin: pluginName,
        operation_name: operationName,
        status: success ? "success" : "fail-unknown",
        migrated: String(migrated),
      },
      seconds,
    );
  }

  /** Stops the gauges counting this controller's state. */
  close(): void {
    this.#instruments.sources.delete(this.#source);
  }
}

/** The spec's plugin name for metrics; undefined (not counted, as upstream) when no plugin supports it. */
function pluginNameOf(source: AttachDetachCollectorSource, spec: VolumeSpec): string | undefined {
  try {
    return fullyQualifiedPluginName(source.findPluginBySpec(spec).name, spec);
  } catch {
    return undefined;
  }
}

function createInstruments(registry: Registry): Instruments {
  const sources = new Set<AttachDetachCollectorSource>();
  countGauge(registry, {
    name: "attachdetach_controller_total_volumes",
    help: "Number of volumes in A/D Controller",
    labelNames: ["plugin_name", "state"] as const,
    *count() {
      for (const source of sources) {
        for (const spec of source.desiredVolumeSpecs()) {
          const name = pluginNameOf(source, spec);
          if (name !== undefined) yield { plugin_name: name, state: "desired_state_of_world" };
        }
        for (const spec of source.actualVolumeSpecs()) {
          // As upstream, a volume known only by name has no plugin to count it under.
          const name = spec && pluginNameOf(source, spec);
          if (name !== undefined) yield { plugin_name: name, state: "actual_state_of_world" };
        }
      }
    },
  });
  countGauge(registry, {
    name: "storage_count_attachable_volumes_in_use",
    help: "Measure number of volumes in use",
    labelNames: ["node", "volume_plugin"] as const,
    *count() {
      for (const source of sources) {
        for (const { nodeName, spec } of source.podVolumes()) {
          const name = pluginNameOf(source, spec);
          if (name !== undefined) yield { node: nodeName, volume_plugin: name };
        }
      }
    },
  });
  // Not upstream: how long the oldest VolumeAttachment has waited for its external-attacher. A
  // timestamp, so that PromQL's time() minus it is the age whatever the process's clock.
  minGauge(registry, {
    name: "kvc_volumeattachment_oldest_pending_timestamp_seconds",
    help: 'Since when (Unix seconds) the oldest VolumeAttachment has waited for its attacher, by attacher and operation: "attach" (not attached, from its creation) or "detach" (being deleted, from its deletionTimestamp).',
    labelNames: ["attacher", "operation"] as const,
    *measure() {
      for (const source of sources) {
        for (const va of source.volumeAttachments()) {
          const deleting = va.metadata?.deletionTimestamp;
          if (!deleting && va.status?.attached === true) continue;
          const since = new Date(deleting ?? va.metadata?.creationTimestamp ?? Number.NaN).getTime();
          if (Number.isNaN(since)) continue;
          yield {
            labels: { attacher: va.spec.attacher, operation: deleting ? "detach" : "attach" },
            value: since / 1000,
          };
        }
      }
    },
  });
  const registers = [registry];
  return {
    sources,
    forcedDetaches: new Counter({
      name: "attach_detach_controller_attachdetach_controller_forced_detaches",
      help: "Number of times the A/D Controller performed a forced detach",
      labelNames: ["reason"] as const,
      registers,
    }),
    operationSeconds: new Histogram({
      name: "storage_operation_duration_seconds",
      help: "Storage operation duration",
      labelNames: ["volume_plugin", "operation_name", "status", "migrated"] as const,
      buckets: OPERATION_BUCKETS,
      registers,
    }),
  };
}
