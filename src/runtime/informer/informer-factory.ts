import type {
  KubeConfig,
  KubernetesObject,
  V1CSIDriver,
  V1CSINode,
  V1Node,
  V1PersistentVolume,
  V1PersistentVolumeClaim,
  V1Pod,
  V1StorageClass,
  V1VolumeAttachment,
} from "@kubernetes/client-node";
import { ApiClients } from "../client.js";
import { realClock, type Clock } from "../clock.js";
import { clientListWatch } from "./client-list-watch.js";
import { silentLogger, type LogSink } from "../logger.js";
import * as resources from "./resources.js";
import type { ResourceType, Scope } from "./resources.js";
import { SharedInformer } from "./shared-informer.js";

export interface InformerFactoryOptions {
  kubeConfig: KubeConfig;
  /** Requests for LIST calls (default: unlimited ones from kubeConfig); pass ApiClients to share its limiter. */
  apis?: Pick<ApiClients, "requestJson">;
  /** Waited on before each WATCH request (e.g. the client limiter's wait). */
  beforeWatch?: (signal: AbortSignal) => Promise<void>;
  clock?: Clock;
  logger?: LogSink;
  /** Default resync period of every handler; 0 (the default) for none. */
  resyncPeriodMs?: number;
  /** Objects per list page. */
  pageSize?: number;
  /** See ReflectorOptions.stallTimeoutMs. */
  stallTimeoutMs?: number;
  /**
   * For a resource's client-node model (ResourceType.model), what sees each of its objects' JSON
   * before managedFields are trimmed (the competing-writer check), if anything. On the decode path of
   * every object: it must be cheap and must not change the object.
   */
  inspect?: (model: string) => ((json: unknown) => void) | undefined;
}

export type ClusterScope = Omit<Scope, "namespace">;

const DEFAULT_STALL_TIMEOUT_MS = 180_000;

/** The informer surface the factory drives; independent of the object type. */
interface Runnable {
  run(signal: AbortSignal): Promise<void>;
  waitForCacheSync(signal?: AbortSignal): Promise<void>;
}

/**
 * Hands out one SharedInformer per resource + namespace + selectors, however many controllers ask
 * (client-go's SharedInformerFactory). Ask for every informer first, then start(): start() runs the
 * ones not yet running, so informers asked for later need another start().
 */
export class InformerFactory {
  readonly #kc: KubeConfig;
  readonly #apis: Pick<ApiClients, "requestJson">;
  readonly #beforeWatch: ((signal: AbortSignal) => Promise<void>) | undefined;
  readonly #clock: Clock;
  readonly #log: LogSink;
  readonly #resyncPeriodMs: number;
  readonly #pageSize: number | undefined;
  readonly #stallTimeoutMs: number;
  readonly #inspect: InformerFactoryOptions["inspect"];
  readonly #informers = new Map<string, unknown>();
  readonly #notStarted: Runnable[] = [];
  readonly #started: Runnable[] = [];

  constructor(opts: InformerFactoryOptions) {
    this.#kc = opts.kubeConfig;
    this.#apis = opts.apis ?? new ApiClients(opts.kubeConfig, { qps: -1, burst: 0 });
    this.#beforeWatch = opts.beforeWatch;
    this.#clock = opts.clock ?? realClock;
    this.#log = opts.logger ?? silentLogger;
    this.#resyncPeriodMs = opts.resyncPeriodMs ?? 0;
    this.#pageSize = opts.pageSize;
    this.#stallTimeoutMs = opts.stallTimeoutMs ?? DEFAULT_STALL_TIMEOUT_MS;
    this.#inspect = opts.inspect;
  }

  persistentVolumes(scope: ClusterScope = {}): SharedInformer<V1PersistentVolume> {
    return this.informerFor(resources.persistentVolumes, scope);
  }

  persistentVolumeClaims(scope: Scope = {}): SharedInformer<V1PersistentVolumeClaim> {
    return this.informerFor(resources.persistentVolumeClaims, scope);
  }

  pods(scope: Scope = {}): SharedInformer<V1Pod> {
    return this.informerFor(resources.pods, scope);
  }

  nodes(scope: ClusterScope = {}): SharedInformer<V1Node> {
    return this.informerFor(resources.nodes, scope);
  }

  storageClasses(scope: ClusterScope = {}): SharedInformer<V1StorageClass> {
    return this.informerFor(resources.storageClasses, scope);
  }

  volumeAttachments(scope: ClusterScope = {}): SharedInformer<V1VolumeAttachment> {
    return this.informerFor(resources.volumeAttachments, scope);
  }

  csiDrivers(scope: ClusterScope = {}): SharedInformer<V1CSIDriver> {
    return this.informerFor(resources.csiDrivers, scope);
  }

  csiNodes(scope: ClusterScope = {}): SharedInformer<V1CSINode> {
    return this.informerFor(resources.csiNodes, scope);
  }

  /** The shared informer for `resource` in `scope`, created on first request. */
  informerFor<T extends KubernetesObject>(resource: ResourceType<T>, scope: Scope = {}): SharedInformer<T> {
    if (scope.namespace && !resource.namespaced)
      throw new Error(`${resource.plural} are cluster-scoped: no namespace`);
    const { namespace = "", labelSelector = "", fieldSelector = "" } = scope;
    const path = `${resource.groupVersionPath}/${resource.plural}`;
    const key = JSON.stringify([path, namespace, labelSelector, fieldSelector]);
    const existing = this.#informers.get(key) as SharedInformer<T> | undefined;
    if (existing) return existing;
    const name = [resource.plural, namespace, labelSelector, fieldSelector].filter(Boolean).join(" ");
    const informer = new SharedInformer<T>({
      name,
      listerWatcher: clientListWatch(this.#kc, this.#apis.requestJson, resource, scope, {
        watchInactivityTimeoutMs: this.#stallTimeoutMs + 30_000,
        ...(this.#beforeWatch && { beforeWatch: this.#beforeWatch }),
        inspect: this.#inspect?.(resource.model),
      }),
      clock: this.#clock,
      logger: this.#log,
      resyncPeriodMs: this.#resyncPeriodMs,
      reflector: {
        stallTimeoutMs: this.#stallTimeoutMs,
        ...(this.#pageSize !== undefined && { pageSize: this.#pageSize }),
      },
    });
    this.#informers.set(key, informer);
    this.#notStarted.push(informer);
    return informer;
  }

  /**
   * Runs every informer not yet running until `signal` is aborted. Resolves when those have stopped;
   * callers that do not wait for shutdown may ignore it.
   */
  start(signal: AbortSignal): Promise<void> {
    const starting = this.#notStarted.splice(0);
    this.#started.push(...starting);
    return Promise.all(starting.map((i) => i.run(signal))).then(() => undefined);
  }

  /** Resolves once every started informer has synced; rejects with the signal's reason if aborted first. */
  async waitForCacheSync(signal?: AbortSignal): Promise<void> {
    await Promise.all(this.#started.map((i) => i.waitForCacheSync(signal)));
  }
}
