import { randomUUID } from "node:crypto";
import type { CoreV1Api, CoreV1Event, V1ObjectReference } from "@kubernetes/client-node";
import { apiStatus, isAlreadyExists, isNotFound } from "../api-errors.js";
import { sleep, type Clock } from "../clock.js";
import {
  EventCorrelator,
  type Correlation,
  type CorrelatorOptions,
  type RecordedEvent,
} from "./correlator.js";
import { involvedObject, type EventSubject } from "./reference.js";
import { silentLogger, type LogSink } from "../logger.js";
import { mergePatch } from "../client.js";

export type EventType = "Normal" | "Warning";

export interface EventRecorderOptions {
  /** source.component and reportingComponent, e.g. "persistentvolume-controller". */
  component: string;
  /** source.host and reportingInstance. */
  host?: string;
  core: Pick<CoreV1Api, "createNamespacedEvent" | "patchNamespacedEvent">;
  clock: Clock;
  /** Where the recorder reports what it drops or fails to write. */
  logger?: LogSink;
  correlator?: Partial<CorrelatorOptions>;
  /** Events waiting to be written beyond which new ones are dropped (client-go: 1000). */
  queueSize?: number;
  /** Attempts per event when the apiserver is unreachable or overloaded (client-go: 12) ... */
  maxTries?: number;
  /** ... this far apart, the first wait random within it (client-go: 10 s). */
  retryIntervalMs?: number;
}

/**
 * Records core/v1 Events about objects, as client-go's record.EventRecorder with its broadcaster
 * writing to the apiserver: `event()` only queues, and one writer drains the queue through the
 * EventCorrelator, creating new Events and patching repeated ones. Events are best-effort: nothing
 * here throws at or waits for the caller.
 */
export class EventRecorder {
  readonly #source: { component: string; host?: string };
  readonly #core: EventRecorderOptions["core"];
  readonly #clock: Clock;
  readonly #log: LogSink;
  readonly #correlator: EventCorrelator;
  readonly #queueSize: number;
  readonly #maxTries: number;
  readonly #retryIntervalMs: number;
  /** Wall time = this + clock.now(): timestamps follow the injected clock, so tests can move them. */
  readonly #wallOffset: number;
  #lastNanos = 0n;
  readonly #queue: RecordedEvent[] = [];
  #writing: Promise<void> | undefined;
  readonly #closed = new AbortController();

  constructor(options: EventRecorderOptions) {
    this.#source = { component: options.component, ...(options.host ? { host: options.host } : {}) };
    this.#core = options.core;
    this.#clock = options.clock;
    this.#log = options.logger ?? silentLogger;
    this.#correlator = new EventCorrelator(options.clock, options.correlator);
    this.#queueSize = options.queueSize ?? 1000;
    this.#maxTries = options.maxTries ?? 12;
    this.#retryIntervalMs = options.retryIntervalMs ?? 10_000;
    this.#wallOffset = Date.now() - options.clock.now();
  }

  /**
   * Records that `reason` happened to `subject`. An object must carry its kind (objects from lists
   * and informers do not: pass `objectReference(obj, kind)`). The Event goes to the object's
   * namespace, or "default" for cluster-scoped objects.
   */
  event(subject: EventSubject, type: EventType, reason: string, message: string): void {
    try {
      const ref = involvedObject(subject);
      if (!ref) {
        this.#log.error({ type, reason, message }, "Could not construct reference, will not report event");
        return;
      }
      const event = this.#makeEvent(ref, type, reason, message);
      this.#log.debug(describe(event), "Event occurred");
      if (this.#closed.signal.aborted) {
        this.#log.error(describe(event), "Unable to record event: the recorder is closed");
      } else if (this.#queue.length >= this.#queueSize) {
        this.#log.error(describe(event), "Unable to record event: too many queued events, dropped event");
      } else {
        this.#queue.push(event);
        this.#startWriting();
      }
    } catch (err) {
      this.#log.error({ type, reason, message, err }, "Unable to record event");
    }
  }

  /** Resolves once every event recorded so far is written, dropped or given up on. */
  async flush(): Promise<void> {
    while (this.#writing) await this.#writing;
  }

  /**
   * Stops taking events and writes the queued ones, each with a single attempt, as client-go's
   * broadcaster does after Shutdown.
   */
  async close(): Promise<void> {
    this.#closed.abort(new Error("event recorder closed"));
    await this.flush();
  }

  #makeEvent(ref: V1ObjectReference, type: EventType, reason: string, message: string): RecordedEvent {
    const now = new Date(this.#wallOffset + this.#clock.now());
    return {
      metadata: { name: this.#eventName(ref.name ?? "", now), namespace: ref.namespace ?? "default" },
      involvedObject: ref,
      type,
      reason,
      message,
      firstTimestamp: now,
      lastTimestamp: now,
      count: 1,
      source: this.#source,
      reportingComponent: this.#source.component,
      ...(this.#source.host ? { reportingInstance: this.#source.host } : {}),
    };
  }

  /**
   * client-go's "<object>.<unix nanoseconds in hex>". A millisecond clock gives no nanoseconds, so
   * each name takes the next free one; names that are not valid object names become a UUID.
   */
  #eventName(refName: string, now: Date): string {
    const nanos = BigInt(now.getTime()) * 1_000_000n;
    this.#lastNanos = nanos > this.#lastNanos ? nanos : this.#lastNanos + 1n;
    const name = `${refName}.${this.#lastNanos.toString(16)}`;
    return isDnsSubdomain(name) ? name : randomUUID();
  }

  #startWriting(): void {
    if (this.#writing) return;
    // Writing starts after the caller's synchronous code, so even request set-up stays off its path.
    this.#writing = Promise.resolve()
      .then(() => this.#writeQueued())
      .then(() => {
        this.#writing = undefined;
        // An event queued while the last write settled has no writer yet.
        if (this.#queue.length > 0) this.#startWriting();
      });
  }

  async #writeQueued(): Promise<void> {
    for (let event = this.#queue.shift(); event; event = this.#queue.shift()) {
      const correlation = this.#correlator.correlate(event);
      if (correlation) await this.#writeWithRetries(correlation);
    }
  }

  async #writeWithRetries(correlation: Correlation): Promise<void> {
    for (let tries = 1; !(await this.#write(correlation)); tries++) {
      if (tries >= this.#maxTries) {
        this.#log.error(describe(correlation.event), "Unable to write event (retry limit exceeded!)");
        return;
      }
      // The first wait is random so that recorders do not all come back in step after an outage.
      const delay = tries === 1 ? this.#retryIntervalMs * Math.random() : this.#retryIntervalMs;
      try {
        await sleep(this.#clock, delay, this.#closed.signal);
      } catch {
        this.#log.error(describe(correlation.event), "Unable to write event (the recorder is closed)");
        return;
      }
    }
  }

  /** True when the event is written or not worth another attempt. */
  async #write({ event, patch }: Correlation): Promise<boolean> {
    const { name, namespace } = event.metadata;
    try {
      let written: CoreV1Event | undefined;
      if (patch) {
        try {
          written = await this.#core.patchNamespacedEvent({ name, namespace, body: patch }, mergePatch);
        } catch (err) {
          // The Event expired (1 h TTL by default) or was deleted: create it afresh, count and all.
          if (!isNotFound(err)) throw err;
        }
      }
      written ??= await this.#core.createNamespacedEvent({ namespace, body: event });
      this.#correlator.updateState(written);
      return true;
    } catch (err) {
      if (isTransient(err)) {
        this.#log.error(
          {
            ...describe(event),
            err,
          },
          "Unable to write event (may retry after sleeping)",
        );
        return false;
      }
      // Expected when a name was reused or the namespace is going away; anything else is a bug.
      const expected = isAlreadyExists(err) || isNamespaceTerminating(err);
      this.#log[expected ? "debug" : "error"](
        {
          ...describe(event),
          err,
        },
        "Server rejected event (will not retry!)",
      );
      return true;
    }
  }
}

/**
 * Errors another attempt may cure: the apiserver was unreachable, overloaded or failing. client-go
 * retries only transport errors here, as its REST client has already retried 429s and 5xxs.
 */
function isTransient(err: unknown): boolean {
  const status = apiStatus(err);
  return status === undefined || status.code === 429 || status.code >= 500;
}

/** The apiserver refuses new objects in a terminating namespace with this 403. */
function isNamespaceTerminating(err: unknown): boolean {
  const status = apiStatus(err);
  return status?.code === 403 && status.message.includes("because it is being terminated");
}

function isDnsSubdomain(name: string): boolean {
  return name.length <= 253 && /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/.test(name);
}

function describe(event: RecordedEvent): Record<string, unknown> {
  const { kind, namespace, name } = event.involvedObject;
  return {
    object: { kind, namespace, name },
    type: event.type,
    reason: event.reason,
    message: event.message,
  };
}
