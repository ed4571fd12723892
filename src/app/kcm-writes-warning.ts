import type { KubernetesObject } from "@kubernetes/client-node";
import { Counter, type Registry } from "prom-client";
import { loopWriteIn, managedFieldsTime, WATCHED_KINDS, type LoopWrite } from "./kcm-writes.js";
import type { Clock } from "../runtime/clock.js";
import type { EventRecorder } from "../runtime/events/recorder.js";
import { objectReference } from "../runtime/events/reference.js";
import { objectRef, type LogSink } from "../runtime/logger.js";

/** A volume-loop write by another manager, and the object it was seen on. */
export interface CompetingWriteReport extends LoopWrite {
  object: KubernetesObject;
}

export interface InspectorOptions {
  /** Wall time kvc started (ms since the epoch): writes before it are the cut-over's past. */
  startedAtMs: number;
  /** Wall time now (ms since the epoch); managedFields times are the apiserver's wall clock. */
  now?: () => number;
  /**
   * Only entries written this recently count, so the metric stops growing once KCM's loops are off
   * even while kvc keeps receiving objects KCM wrote after kvc started. Default 5 minutes: wider than
   * a watch event's delay and usual clock skew.
   */
  windowMs?: number;
  report: (write: CompetingWriteReport) => void;
}

const DEFAULT_WINDOW_MS = 5 * 60_000;

/**
 * The informers' hook (InformerFactoryOptions.inspect): for each model it watches, a check of each
 * object's JSON before its managedFields are trimmed. On the decode path of every object, so it
 * allocates nothing unless it finds a write: the threshold string is rebuilt at most once a second.
 */
export function competingWriteInspector(
  o: InspectorOptions,
): (model: string) => ((json: unknown) => void) | undefined {
  const now = o.now ?? Date.now;
  const windowMs = o.windowMs ?? DEFAULT_WINDOW_MS;
  let second = NaN;
  let since = "";
  const threshold = (): string => {
    const ms = now();
    const s = Math.floor(ms / 1000);
    if (s !== second) {
      second = s;
      since = managedFieldsTime(Math.max(o.startedAtMs, ms - windowMs));
    }
    return since;
  };
  return (model) => {
    const kind = (WATCHED_KINDS as Record<string, LoopWrite["kind"] | undefined>)[model];
    if (!kind) return undefined;
    return (json) => {
      const object = json as KubernetesObject;
      const write = loopWriteIn(kind, object.metadata?.managedFields, threshold());
      if (write) o.report({ ...write, object });
    };
  };
}

const DOCS = "docs/operations.md#installing-beside-kcm, step 1";

/**
 * Warns that another manager (KCM's loops left on) writes the volume loops' fields beside kvc: both
 * write the same objects and fight. Every write counts in the metric, for an alert; the log line and
 * the Event, on the object written, once per manager and kind per `periodMs`, not per object.
 */
export class CompetingWriteWarning {
  readonly #log: LogSink;
  readonly #events: Pick<EventRecorder, "event">;
  readonly #clock: Clock;
  readonly #periodMs: number;
  readonly #mayWrite: () => boolean;
  readonly #lastWarned = new Map<string, number>();
  readonly #writes: Counter<"manager" | "kind" | "field">;

  constructor(o: {
    logger: LogSink;
    events: Pick<EventRecorder, "event">;
    registry: Registry;
    clock: Clock;
    /** Default 10 minutes. */
    periodMs?: number;
    /** Whether the Event (a write) may be sent now: a standby only counts and logs. Default: always. */
    mayWrite?: () => boolean;
  }) {
    this.#log = o.logger;
    this.#events = o.events;
    this.#clock = o.clock;
    this.#periodMs = o.periodMs ?? 10 * 60_000;
    this.#mayWrite = o.mayWrite ?? (() => true);
    this.#writes = new Counter({
      name: "kvc_competing_writer_writes_total",
      help:
        "Objects seen with a volume loop's field written by another field manager since kvc started " +
        "(in the last 5 minutes), by manager, kind and field: kube-controller-manager's volume loops " +
        "are still on beside kvc's. Any increase is a misconfiguration.",
      labelNames: ["manager", "kind", "field"] as const,
      registers: [o.registry],
    });
  }

  readonly report = (w: CompetingWriteReport): void => {
    this.#writes.inc({ manager: w.manager, kind: w.kind, field: w.field });
    const key = `${w.manager}/${w.kind}`;
    const now = this.#clock.now();
    const last = this.#lastWarned.get(key);
    if (last !== undefined && now - last < this.#periodMs) return;
    this.#lastWarned.set(key, now);
    const object = objectRef(w.object);
    this.#log.warn(
      { manager: w.manager, kind: w.kind, object, field: w.field, loop: w.loop, written: w.time, docs: DOCS },
      `${w.manager} is writing ${w.kind} ${w.field}: its ${w.loop} still runs beside kvc's and they ` +
        `fight over the same objects. Turn it off in kube-controller-manager's --controllers on every ` +
        `control-plane node: ${DOCS}. Warned once per manager and kind every ${this.#periodMs / 60_000} min.`,
    );
    if (!this.#mayWrite()) return;
    this.#events.event(
      objectReference(w.object, w.kind),
      "Warning",
      "CompetingWriter",
      `${w.manager} wrote ${w.field} at ${w.time}: its ${w.loop} still runs beside ` +
        `kube-volume-controller's; turn it off in its --controllers: ${DOCS}`,
    );
  };
}
