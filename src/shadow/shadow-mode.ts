import type {
  CoreV1Event,
  KubernetesObject,
  V1AttachedVolume,
  V1Node,
  V1PersistentVolumeClaim,
} from "@kubernetes/client-node";
import { LRUCache } from "lru-cache";
import { Counter, type Registry } from "prom-client";
import type { ControllerName } from "../app/controller-names.js";
import type { Clock } from "../runtime/clock.js";
import { objectKey, type InformerFactory } from "../runtime/informer/index.js";
import type { ResourceType } from "../runtime/informer/resources.js";
import type { LogSink } from "../runtime/logger.js";
import { Comparator, OUTCOMES, type Comparison, type Outcome } from "./comparator.js";
import {
  attachmentDecisions,
  claimDecisions,
  unusedConditionKey,
  eventDecisions,
  nodeDecisions,
  recyclerPodDecisions,
  volumeDecisions,
  type Decision,
} from "./decisions.js";
import {
  parseTarget,
  recordWrite,
  type CurrentObjects,
  type RecordedResponse,
  type WriteRequest,
} from "./recorder.js";
import { deepCopy } from "../util/deep-copy.js";

export interface ShadowOptions {
  clock: Clock;
  graceMs: number;
  registry: Registry;
  logger: LogSink;
  /** Only these controllers' decisions are compared (`--controllers`): KCM's others are not ours. */
  controllers: ReadonlySet<ControllerName>;
  /** How many disagreements GET /shadow lists, newest last. */
  keepDisagreements?: number;
}

/** GET /shadow's answer. */
export interface ShadowSummary {
  since: string;
  graceSeconds: number;
  controllers: ControllerName[];
  totals: Record<Outcome, number>;
  decisions: { controller: ControllerName; kind: string; outcome: Outcome; count: number }[];
  pending: number;
  /** Some of the decisions within their grace window. */
  waiting: { side: "kvc" | "upstream"; key: string; value: string }[];
  disagreements: Comparison[];
  /** Writes the shadow could not understand (refused, compared with nothing), and the last few. */
  unparsed: { count: number; recent: { at: string; method: string; path: string; reason: string }[] };
}

const events: ResourceType<CoreV1Event> = {
  groupVersionPath: "/api/v1",
  plural: "events",
  namespaced: true,
  model: "CoreV1Event",
};

/** The event sources KCM's volume loops report as (kvc's recorders use the same components). */
const EVENT_SOURCES = ["persistentvolume-controller", "attachdetach-controller"];

/**
 * `kvc run --shadow`: the controllers run as in production, but their writes are recorded instead of
 * sent (recordWrite) and compared with what KCM did, which the same informers observe. Reports as the
 * metric kvc_shadow_decisions_total, a log line per decision that is not an agreement, and summary().
 */
export class ShadowMode {
  readonly #o: ShadowOptions;
  readonly #comparator: Comparator;
  readonly #counter: Counter<"controller" | "kind" | "outcome">;
  readonly #counts = new Map<
    string,
    { controller: ControllerName; kind: string; outcome: Outcome; count: number }
  >();
  readonly #disagreements: Comparison[] = [];
  readonly #unparsed: ShadowSummary["unparsed"] = { count: 0, recent: [] };
  readonly #unparsedCounter: Counter;
  readonly #since = new Date();
  #current: CurrentObjects | undefined;
  /** Versions the informers replaced or deleted, recent ones (shadow writes made from them: recorder). */
  readonly #earlier = new LRUCache<string, KubernetesObject>({ max: 10_000 });
  /** For those versions, what replaced them (undefined: deleted): what KCM decided from each. */
  readonly #replacedBy = new LRUCache<string, { object: KubernetesObject | undefined }>({ max: 10_000 });
  /**
   * Per node, the volumesAttached kvc last reported. Its next report is compared with this, not with
   * the node as KCM left it: KCM reporting a detach first must not turn kvc's unchanged report into
   * an "attached", nor swallow kvc's own detach when it comes.
   */
  readonly #reported = new LRUCache<string, V1AttachedVolume[]>({ max: 10_000 });

  constructor(o: ShadowOptions) {
    this.#o = o;
    this.#counter = new Counter({
      name: "kvc_shadow_decisions_total",
      help: "Decisions of kvc in shadow mode compared with kube-controller-manager's, by outcome (agree, differ, kvc-only, upstream-only, tie).",
      labelNames: ["controller", "kind", "outcome"] as const,
      registers: [o.registry],
    });
    this.#unparsedCounter = new Counter({
      name: "kvc_shadow_unparsed_writes_total",
      help: "Writes of kvc in shadow mode that the shadow could not understand (unknown path or resource, body no JSON object): refused, compared with nothing.",
      registers: [o.registry],
    });
    this.#comparator = new Comparator({
      clock: o.clock,
      graceMs: o.graceMs,
      onComparison: (c) => {
        this.#count(c);
      },
    });
  }

  /**
   * Watches what upstream does through `informers` (call before they start). Objects that existed
   * before the shadow started are history, not decisions: only their later changes count.
   */
  observe(informers: InformerFactory): void {
    // creationTimestamp has whole seconds.
    const started = Math.floor(this.#since.getTime() / 1000) * 1000;
    const isNew = (o: KubernetesObject) => Date.parse(String(o.metadata?.creationTimestamp ?? "")) >= started;
    const watch = <T extends KubernetesObject>(
      informer: { addEventHandler(h: object): unknown },
      decisions: (before: T | undefined, after: T | undefined) => Decision[],
      resource?: string,
    ) => {
      // Versions replaced or deleted: what a write kvc made from one of them would have changed, and
      // what was done from it instead.
      const remember = (o: T, by: T | undefined, version = o.metadata?.resourceVersion ?? "") => {
        if (!resource) return;
        this.#earlier.set(`${resource} ${objectKey(o)} ${version}`, o);
        this.#replacedBy.set(`${resource} ${objectKey(o)} ${o.metadata?.resourceVersion ?? ""}`, {
          object: by,
        });
      };
      informer.addEventHandler({
        onAdd: (obj: T) => {
          if (isNew(obj)) this.#observed(decisions(undefined, obj));
        },
        onUpdate: (old: T, obj: T) => {
          remember(old, obj);
          if (old !== obj) this.#observed(decisions(old, obj));
        },
        onDelete: (obj: T) => {
          // A finalizer's removal that lets the apiserver delete the object shows as the deletion
          // alone, of the last version but with a new resourceVersion: a write from any version
          // seen before meets that one.
          remember(obj, undefined, "deleted");
          this.#observed(decisions(obj, undefined));
        },
      });
    };
    const pvs = informers.persistentVolumes();
    const pvcs = informers.persistentVolumeClaims();
    const nodes = informers.nodes();
    const vas = informers.volumeAttachments();
    watch(pvs, volumeDecisions, "persistentvolumes");
    watch(pvcs, claimDecisions, "persistentvolumeclaims");
    watch(nodes, nodeDecisions, "nodes");
    watch(vas, attachmentDecisions);
    watch(informers.pods(), recyclerPodDecisions);
    nodes.addEventHandler({
      // kvc's actual state starts from the node's status as listed (populateActualStateOfWorld): that
      // is its report until it makes one. Compared with KCM's report since, kvc's first one would
      // show the attaches KCM reported first as kvc's detaches.
      onAdd: (node: V1Node) => {
        if (!this.#reported.has(objectKey(node))) {
          this.#reported.set(objectKey(node), node.status?.volumesAttached ?? []);
        }
      },
      // A node deleted: what either side would still report in its status is moot.
      onDelete: (node: KubernetesObject) => {
        this.#reported.delete(objectKey(node));
        this.#comparator.forget(`volumes-attached node ${objectKey(node)} `);
      },
    });
    pvcs.addEventHandler({
      onUpdate: (old: V1PersistentVolumeClaim, pvc: V1PersistentVolumeClaim) => {
        if (!old.metadata?.deletionTimestamp && pvc.metadata?.deletionTimestamp) {
          this.#comparator.conditionEnded(unusedConditionKey(pvc));
        }
      },
      onDelete: (pvc: V1PersistentVolumeClaim) => {
        this.#comparator.conditionEnded(unusedConditionKey(pvc));
      },
    });
    for (const source of EVENT_SOURCES) {
      watch(informers.informerFor(events, { fieldSelector: `source=${source}` }), (before, after) =>
        !before && after ? eventDecisions(after as CoreV1Event) : [],
      );
    }
    this.#current = {
      volume: (name) => pvs.store.get(name),
      volumes: () => pvs.store.list(),
      claim: (namespace, name) => pvcs.store.get(`${namespace}/${name}`),
      node: (name) => {
        const node = nodes.store.get(name);
        const reported = this.#reported.get(name);
        if (!node || !reported) return node;
        const copy = deepCopy(node); // the informer's objects are frozen
        (copy.status ??= {}).volumesAttached = reported;
        return copy;
      },
      volumeAttachment: (name) => vas.store.get(name),
      earlier: (resource, key, resourceVersion) =>
        this.#earlier.get(`${resource} ${key} ${resourceVersion}`) ??
        this.#earlier.get(`${resource} ${key} deleted`),
      replacedBy: (resource, key, resourceVersion) =>
        this.#replacedBy.get(`${resource} ${key} ${resourceVersion}`),
    };
  }

  /** Where ApiClients sends every mutating request in shadow mode: recorded, never sent. */
  readonly recordWrite = (req: WriteRequest): RecordedResponse => {
    const none: CurrentObjects = {
      volume: () => undefined,
      volumes: () => [],
      claim: () => undefined,
      node: () => undefined,
      volumeAttachment: () => undefined,
    };
    const { decisions, confirmations, response, unparsed } = recordWrite(req, this.#current ?? none);
    if (unparsed !== undefined) this.#countUnparsed(req, unparsed);
    const target = parseTarget(req.path);
    if (
      target?.resource === "nodes" &&
      target.subresource === "status" &&
      target.name &&
      response.status === 200
    ) {
      this.#reported.set(target.name, (response.body as V1Node).status?.volumesAttached ?? []);
    }
    for (const d of decisions) if (this.#o.controllers.has(d.controller)) this.#comparator.intended(d);
    for (const d of confirmations) {
      if (this.#o.controllers.has(d.controller)) this.#comparator.confirmed(d, d.upstream);
    }
    return response;
  };

  summary(): ShadowSummary {
    const totals = Object.fromEntries(OUTCOMES.map((o) => [o, 0])) as Record<Outcome, number>;
    for (const c of this.#counts.values()) totals[c.outcome] += c.count;
    return {
      since: this.#since.toISOString(),
      graceSeconds: this.#o.graceMs / 1000,
      controllers: [...this.#o.controllers],
      totals,
      decisions: [...this.#counts.values()].map((c) => ({ ...c })),
      pending: this.#comparator.pending,
      waiting: this.#comparator.waiting(100),
      disagreements: [...this.#disagreements],
      unparsed: { count: this.#unparsed.count, recent: [...this.#unparsed.recent] },
    };
  }

  #countUnparsed(req: WriteRequest, reason: string): void {
    this.#unparsedCounter.inc();
    this.#o.logger.warn({ method: req.method, path: req.path }, `shadow: write not understood: ${reason}`);
    const { recent } = this.#unparsed;
    this.#unparsed.count++;
    recent.push({ at: new Date().toISOString(), method: req.method, path: req.path, reason });
    if (recent.length > (this.#o.keepDisagreements ?? 100)) recent.shift();
  }

  stop(): void {
    this.#comparator.stop();
  }

  #observed(decisions: Decision[]): void {
    for (const d of decisions) if (this.#o.controllers.has(d.controller)) this.#comparator.observed(d);
  }

  #count(c: Comparison): void {
    this.#counter.inc({ controller: c.controller, kind: c.kind, outcome: c.outcome });
    const key = `${c.controller} ${c.kind} ${c.outcome}`;
    const entry = this.#counts.get(key) ?? {
      controller: c.controller,
      kind: c.kind,
      outcome: c.outcome,
      count: 0,
    };
    entry.count++;
    this.#counts.set(key, entry);
    if (c.outcome === "agree") return;
    if (c.outcome === "tie") {
      this.#o.logger.info({ shadow: c }, "shadow: equal choices, upstream took another (tie)");
      return;
    }
    this.#o.logger.warn({ shadow: c }, `shadow: ${c.outcome} decision`);
    this.#disagreements.push(c);
    if (this.#disagreements.length > (this.#o.keepDisagreements ?? 100)) this.#disagreements.shift();
  }
}
