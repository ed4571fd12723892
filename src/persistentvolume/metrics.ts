import type { V1PersistentVolume, V1PersistentVolumeClaim } from "@kubernetes/client-node";
import { Counter, Histogram, type Registry } from "prom-client";
import type { Clock } from "../runtime/clock.js";
import { countGauge, minGauge, oncePerRegistry } from "../runtime/metrics.js";
import {
  fullyQualifiedPluginName,
  PLUGIN_NAME_NOT_AVAILABLE,
  specFromPersistentVolume,
  type VolumePlugin,
  type VolumeSpec,
} from "../volume/plugin.js";
import { ANN_SELECTED_NODE, ClaimPhase, hasAnnotation, VolumePhase } from "./annotations.js";
import { claimVAC, getClaimClass } from "./pv-helpers.js";

/** The operation_name label values: the operations whose end-to-end time is measured. */
export type VolumeOperation = "provision" | "delete";

/**
 * What the pv_collector gauges count, read afresh on every scrape: a controller's cache (upstream's
 * volumes.store and claims), and its plugins for the plugin_name label.
 */
export interface CollectorSource {
  volumes(): Iterable<V1PersistentVolume>;
  claims(): Iterable<V1PersistentVolumeClaim>;
  /** Throws when no single plugin supports the spec (VolumePluginManager.findPluginBySpec). */
  findPluginBySpec(spec: VolumeSpec): Pick<VolumePlugin, "name">;
  /** Whether the claim's class binds WaitForFirstConsumer (isDelayBindingMode; an error counts as no). */
  delaysBinding(claim: V1PersistentVolumeClaim): boolean;
}

type OperationLabel = "plugin_name" | "operation_name";

interface Instruments {
  /** The caches of the controllers recording on this registry; the gauges sum over them. */
  sources: Set<CollectorSource>;
  /** volume_operation_total_errors and its replacement volume_operation_errors_total, counted together. */
  operationErrors: Counter<OperationLabel>[];
  operationSeconds: Histogram<OperationLabel>;
  retroactive: Counter;
  retroactiveErrors: Counter;
}

/** pkg/volume/util's buckets for volume_operation_total_seconds. */
const OPERATION_BUCKETS = [0.1, 0.25, 0.5, 1, 2.5, 5, 10, 15, 25, 50, 120, 300, 600];

const instrumentsFor = oncePerRegistry(createInstruments);

/**
 * The PV binder's metrics (upstream pkg/controller/volume/persistentvolume/metrics) on a caller's
 * prom-client registry. Every PersistentVolumeMetrics on one registry shares the same instruments.
 */
export class PersistentVolumeMetrics {
  readonly #instruments: Instruments;

  constructor(registry: Registry) {
    this.#instruments = instrumentsFor(registry);
  }

  /** A controller's recorder; `source` feeds the pv_collector gauges until the recorder is closed. */
  forController(source: CollectorSource, clock: Clock): BinderMetrics {
    return new BinderMetrics(this.#instruments, source, clock);
  }
}

interface OperationTimestamp {
  pluginName: string;
  operation: VolumeOperation;
  startedAt: number;
}

/**
 * One controller's recording: its operation start times (upstream operationTimestamps), keyed by
 * claim key for provisioning and volume name for deletion. An operation's time runs from its first
 * start to the end of its whole lifecycle: for provisioning, the claim bound to a volume; for
 * deletion, the PV gone from the API. Failures in between are counted as errors, and the clock keeps
 * running from the first start.
 */
export class BinderMetrics {
  readonly #instruments: Instruments;
  readonly #source: CollectorSource;
  readonly #clock: Clock;
  readonly #timestamps = new Map<string, OperationTimestamp>();

  constructor(instruments: Instruments, source: CollectorSource, clock: Clock) {
    this.#instruments = instruments;
    this.#source = source;
    this.#clock = clock;
    instruments.sources.add(source);
  }

  /** Records the operation's start under `key`, unless one is recorded already (AddIfNotExist). */
  operationStarted(key: string, pluginName: string, operation: VolumeOperation): void {
    if (this.#timestamps.has(key)) return;
    this.#timestamps.set(key, { pluginName, operation, startedAt: this.#clock.now() });
  }

  /** Counts an error for the operation started under `key`, if any; its start time stays (RecordMetric). */
  operationFailed(key: string): void {
    const ts = this.#timestamps.get(key);
    if (!ts) return;
    const labels = { plugin_name: ts.pluginName || PLUGIN_NAME_NOT_AVAILABLE, operation_name: ts.operation };
    for (const counter of this.#instruments.operationErrors) counter.inc(labels);
  }

  /** Observes the time since the operation under `key` started, if any, and forgets it (RecordMetric). */
  operationSucceeded(key: string): void {
    const ts = this.#timestamps.get(key);
    if (!ts) return;
    const seconds = (this.#clock.now() - ts.startedAt) / 1000;
    this.#instruments.operationSeconds.observe(
      { plugin_name: ts.pluginName, operation_name: ts.operation },
      seconds,
    );
    this.#timestamps.delete(key);
  }

  /** Forgets the operation under `key` without recording anything (its claim was deleted). */
  forgetOperation(key: string): void {
    this.#timestamps.delete(key);
  }

  /** A default StorageClass was assigned to a claim retroactively, or failed to be. */
  retroactiveStorageClass(success: boolean): void {
    this.#instruments.retroactive.inc();
    if (!success) this.#instruments.retroactiveErrors.inc();
  }

  /** Stops the gauges counting this controller's cache. */
  close(): void {
    this.#instruments.sources.delete(this.#source);
  }
}

function createInstruments(registry: Registry): Instruments {
  const registers = [registry];
  const sources = new Set<CollectorSource>();
  const volumes = function* () {
    for (const source of sources) for (const volume of source.volumes()) yield { source, volume };
  };
  const claims = function* () {
    for (const source of sources) for (const claim of source.claims()) yield { source, claim };
  };
  const isBound = (volume: V1PersistentVolume) => volume.status?.phase === VolumePhase.Bound;
  const claimBound = (claim: V1PersistentVolumeClaim) => claim.status?.phase === ClaimPhase.Bound;
  const claimLabels = (claim: V1PersistentVolumeClaim) => ({
    namespace: claim.metadata?.namespace ?? "",
    storage_class: getClaimClass(claim),
    volume_attributes_class: claimVAC(claim),
  });

  // Upstream's pvAndPVCCountCollector: counted from the cache on each scrape, one series per
  // label set seen, so a label set nothing has any more disappears.
  countGauge(registry, {
    name: "pv_collector_total_pv_count",
    help: "Gauge measuring total number of persistent volumes",
    labelNames: ["plugin_name", "volume_mode"],
    count: function* () {
      for (const { source, volume } of volumes()) {
        // The API defaults volumeMode; upstream dereferences it unchecked.
        yield {
          plugin_name: pluginName(source, volume),
          volume_mode: volume.spec?.volumeMode ?? "Filesystem",
        };
      }
    },
  });
  const volumesByClass = (bound: boolean) =>
    function* () {
      for (const { volume } of volumes()) {
        // spec.storageClassName only, without the beta annotation, as upstream.
        if (isBound(volume) === bound) yield { storage_class: volume.spec?.storageClassName ?? "" };
      }
    };
  countGauge(registry, {
    name: "pv_collector_bound_pv_count",
    help: "Gauge measuring number of persistent volume currently bound",
    labelNames: ["storage_class"],
    count: volumesByClass(true),
  });
  countGauge(registry, {
    name: "pv_collector_unbound_pv_count",
    help: "Gauge measuring number of persistent volume currently unbound",
    labelNames: ["storage_class"],
    count: volumesByClass(false),
  });
  const claimLabelNames = ["namespace", "storage_class", "volume_attributes_class"] as const;
  const claimsByLabels = (bound: boolean) =>
    function* () {
      for (const { claim } of claims()) if (claimBound(claim) === bound) yield claimLabels(claim);
    };
  countGauge(registry, {
    name: "pv_collector_bound_pvc_count",
    help: "Gauge measuring number of persistent volume claim currently bound",
    labelNames: claimLabelNames,
    count: claimsByLabels(true),
  });
  countGauge(registry, {
    name: "pv_collector_unbound_pvc_count",
    help: "Gauge measuring number of persistent volume claim currently unbound",
    labelNames: claimLabelNames,
    count: claimsByLabels(false),
  });

  // Not upstream: pv_collector_unbound_pvc_count also counts claims that wait, as they should, for a
  // pod to use them, so an alert on it fires forever for a WaitForFirstConsumer claim nothing uses.
  // A timestamp, not an age: PromQL's time() minus it is the age, whatever the process's clock.
  minGauge(registry, {
    name: "kvc_unbound_pvc_oldest_creation_timestamp_seconds",
    help: 'Creation time (Unix seconds) of the oldest claim not bound, by class and what it waits for: "first_consumer" (its class binds WaitForFirstConsumer and no pod using it has been scheduled) or "binding" (any other claim not bound: a matching volume, the binder or a provisioner is due).',
    labelNames: ["storage_class", "waiting_for"] as const,
    measure: function* () {
      for (const { source, claim } of claims()) {
        if (claimBound(claim)) continue;
        const created = new Date(claim.metadata?.creationTimestamp ?? Number.NaN).getTime();
        if (Number.isNaN(created)) continue;
        const firstConsumer = source.delaysBinding(claim) && !hasAnnotation(claim, ANN_SELECTED_NODE);
        yield {
          labels: {
            storage_class: getClaimClass(claim),
            waiting_for: firstConsumer ? "first_consumer" : "binding",
          },
          value: created / 1000,
        };
      }
    },
  });

  const operationLabels = ["plugin_name", "operation_name"] as const;
  return {
    sources,
    operationErrors: [
      // Deprecated in 1.36 for the name below; upstream 1.37 serves it only with
      // --show-hidden-metrics-for-version=1.36. Both count every error.
      new Counter({
        name: "volume_operation_total_errors",
        help: "(Deprecated since 1.36.0) Total volume operation errors",
        labelNames: operationLabels,
        registers,
      }),
      new Counter({
        name: "volume_operation_errors_total",
        help: "Total volume operation errors",
        labelNames: operationLabels,
        registers,
      }),
    ],
    operationSeconds: new Histogram({
      name: "volume_operation_total_seconds",
      help: "Storage operation end to end duration in seconds",
      labelNames: operationLabels,
      buckets: OPERATION_BUCKETS,
      registers,
    }),
    retroactive: new Counter({
      name: "retroactive_storageclass_total",
      help: "Total number of retroactive StorageClass assignments to persistent volume claim",
      registers,
    }),
    retroactiveErrors: new Counter({
      name: "retroactive_storageclass_errors_total",
      help: "Total number of failed retroactive StorageClass assignments to persistent volume claim",
      registers,
    }),
  };
}

/** The plugin handling the volume, qualified by the CSI driver for CSI volumes (upstream getPVPluginName). */
function pluginName(source: CollectorSource, volume: V1PersistentVolume): string {
  let name: string;
  try {
    name = source.findPluginBySpec(specFromPersistentVolume(volume, true)).name;
  } catch {
    return PLUGIN_NAME_NOT_AVAILABLE;
  }
  return fullyQualifiedPluginName(name, specFromPersistentVolume(volume, true));
}
