import type { CoreV1Event } from "@kubernetes/client-node";
import type { Clock } from "../clock.js";
import { TokenBucket } from "../workqueue/rate-limiter.js";
import { Lru } from "./lru.js";
import { deepCopy } from "../../util/deep-copy.js";

/** client-go's CorrelatorOptions, with its defaults below. */
export interface CorrelatorOptions {
  /** Entries in each cache (per event, per similar-event group, per object). */
  cacheSize: number;
  /** Events one source may write about one object in a burst ... */
  spamBurst: number;
  /** ... and the rate, per second, at which that allowance refills. */
  spamQps: number;
  /** Distinct messages for one object and reason before they are combined into one event ... */
  aggregateMaxEvents: number;
  /** ... counted since the group was last quiet for this long. */
  aggregateIntervalMs: number;
}

export const defaultCorrelatorOptions: CorrelatorOptions = {
  cacheSize: 4096,
  // Up to 25 events about an object at once, then one every 5 minutes: objects that stay unhealthy
  // must not flood etcd with events.
  spamBurst: 25,
  spamQps: 1 / 300,
  aggregateMaxEvents: 10,
  aggregateIntervalMs: 10 * 60_000,
};

export const combinedMessagePrefix = "(combined from similar events): ";

/** A core/v1 Event as the recorder builds it, with the fields correlation works on always set. */
export type RecordedEvent = CoreV1Event & {
  metadata: { name: string; namespace: string };
  count: number;
  firstTimestamp: Date;
  lastTimestamp: Date;
  message: string;
};

/** What an Event already on the server needs to record one more occurrence. */
export interface EventPatch {
  count: number;
  lastTimestamp: Date;
  message: string;
}

export interface Correlation {
  event: RecordedEvent;
  /** Present when the event was seen before: patch the existing Event instead of creating one. */
  patch?: EventPatch;
}

interface Observation {
  count: number;
  firstTimestamp: Date;
  name: string;
}

interface SimilarEvents {
  messages: Set<string>;
  lastSeen: number;
}

/**
 * client-go's EventCorrelator: combines similar events (same object and reason, different messages)
 * once there are too many of them, counts repeats of an identical event so that they update one
 * Event instead of creating new ones, and drops events about an object beyond a token-bucket budget.
 */
export class EventCorrelator {
  readonly #clock: Clock;
  readonly #options: CorrelatorOptions;
  readonly #similar: Lru<string, SimilarEvents>;
  readonly #observed: Lru<string, Observation>;
  readonly #budgets: Lru<string, TokenBucket>;

  constructor(clock: Clock, options: Partial<CorrelatorOptions> = {}) {
    this.#clock = clock;
    this.#options = { ...defaultCorrelatorOptions, ...options };
    this.#similar = new Lru(this.#options.cacheSize);
    this.#observed = new Lru(this.#options.cacheSize);
    this.#budgets = new Lru(this.#options.cacheSize);
  }

  /** The event to write and how, or undefined when the spam filter drops it. */
  correlate(event: RecordedEvent): Correlation | undefined {
    const { event: aggregated, key } = this.#aggregate(event);
    const correlation = this.#observe(aggregated, key);
    // Observed before filtering, as upstream: a dropped repeat still counts, so the next write that
    // gets through carries the true number of occurrences.
    return this.#withinBudget(correlation.event) ? correlation : undefined;
  }

  /** Adopts the server's copy of a written Event, so the next repeat patches what is there. */
  updateState(written: CoreV1Event): void {
    const { count, firstTimestamp, metadata } = written;
    if (count === undefined || !firstTimestamp || !metadata.name) return;
    this.#observed.set(eventKey(written), { count, firstTimestamp, name: metadata.name });
  }

  #aggregate(event: RecordedEvent): { event: RecordedEvent; key: string } {
    const now = this.#clock.now();
    const groupKey = aggregateKey(event);
    let group = this.#similar.get(groupKey);
    if (!group || now - group.lastSeen > this.#options.aggregateIntervalMs) {
      group = { messages: new Set(), lastSeen: now };
    }
    group.messages.add(event.message);
    group.lastSeen = now;
    this.#similar.set(groupKey, group);
    if (group.messages.size < this.#options.aggregateMaxEvents) return { event, key: eventKey(event) };

    // Keep the group at its cap (upstream pops an arbitrary member; the oldest is as good).
    const oldest = group.messages.values().next();
    if (!oldest.done) group.messages.delete(oldest.value);
    // One Event stands for the whole group, keyed by the group so that later members update it.
    // The incoming event's name is unused on the server, so the combined event can take it.
    const combined = deepCopy(event);
    combined.metadata = { name: event.metadata.name, namespace: event.metadata.namespace };
    combined.count = 1;
    combined.message = combinedMessagePrefix + event.message;
    return { event: combined, key: groupKey };
  }

  #observe(event: RecordedEvent, key: string): Correlation {
    const last = this.#observed.get(key);
    let correlation: Correlation = { event };
    if (last) {
      const repeat = deepCopy(event);
      repeat.metadata.name = last.name;
      repeat.firstTimestamp = last.firstTimestamp;
      repeat.count = last.count + 1;
      correlation = {
        event: repeat,
        patch: { count: repeat.count, lastTimestamp: repeat.lastTimestamp, message: repeat.message },
      };
    }
    const { count, firstTimestamp, metadata } = correlation.event;
    this.#observed.set(key, { count, firstTimestamp, name: metadata.name });
    return correlation;
  }

  #withinBudget(event: CoreV1Event): boolean {
    const key = spamKey(event);
    let budget = this.#budgets.get(key);
    if (!budget) {
      budget = new TokenBucket(this.#options.spamQps, this.#options.spamBurst, this.#clock);
    }
    this.#budgets.set(key, budget);
    return budget.tryAccept();
  }
}

/** Identical events: same source, object, type, reason and message. */
function eventKey(e: CoreV1Event): string {
  const o = e.involvedObject;
  return key(
    e.source?.component,
    e.source?.host,
    o.kind,
    o.namespace,
    o.name,
    o.fieldPath,
    o.uid,
    o.apiVersion,
    e.type,
    e.reason,
    e.message,
  );
}

/** Similar events: identical but for the message. */
function aggregateKey(e: CoreV1Event): string {
  const o = e.involvedObject;
  return key(
    e.source?.component,
    e.source?.host,
    o.kind,
    o.namespace,
    o.name,
    o.uid,
    o.apiVersion,
    e.type,
    e.reason,
    e.reportingComponent,
    e.reportingInstance,
  );
}

/** The spam budget is per source and object, across all reasons. */
function spamKey(e: CoreV1Event): string {
  const o = e.involvedObject;
  return key(e.source?.component, e.source?.host, o.kind, o.namespace, o.name, o.uid, o.apiVersion);
}

function key(...parts: (string | undefined)[]): string {
  return JSON.stringify(parts.map((p) => p ?? ""));
}
