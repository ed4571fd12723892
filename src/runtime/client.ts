import {
  ApiException,
  Observable,
  PatchStrategy,
  setHeaderOptions,
  AuthenticationV1Api,
  AuthorizationV1Api,
  type ConfigurationOptions,
  CoordinationV1Api,
  CoreV1Api,
  createConfiguration,
  KubeConfig,
  HttpMethod,
  RequestContext,
  ResponseContext,
  SelfDecodingBody,
  ServerConfiguration,
  StorageV1Api,
  wrapHttpLibrary,
} from "@kubernetes/client-node";
import { existsSync } from "node:fs";
import { delimiter } from "node:path";
import { Counter, Histogram, type Registry } from "prom-client";
import { request as undiciRequest } from "undici";
import { deadline, deadlineOf, realClock, sleep, type Clock } from "./clock.js";
import type { WriteGate } from "./write-gate.js";
import { TokenBucket } from "./workqueue/rate-limiter.js";

/**
 * A kubeconfig as kube-controller-manager builds it: the file when given, --master overriding its
 * server; neither: the in-cluster service account. Unlike KCM, and as kubectl, the files in
 * $KUBECONFIG (merged, the first one's context current) stand in for a missing --kubeconfig.
 */
export function loadKubeConfig(
  kubeconfig: string | undefined,
  master: string | undefined,
  env: NodeJS.ProcessEnv = process.env,
): KubeConfig {
  const kc = new KubeConfig();
  const fromEnv = (env.KUBECONFIG ?? "").split(delimiter).filter((f) => f !== "");
  if (kubeconfig) kc.loadFromFile(kubeconfig);
  else if (fromEnv.length > 0) {
    // As kubectl (clientcmd's loading rules): files that do not exist are skipped; the first file
    // to set a current context or name a cluster, user or context wins (client-node's mergeConfig
    // lets the last one win, or throws on a duplicate name).
    const files = fromEnv.filter((f) => existsSync(f));
    if (files.length === 0) throw new Error(`KUBECONFIG=${env.KUBECONFIG}: no such file`);
    for (const file of files) {
      const other = new KubeConfig();
      other.loadFromFile(file);
      const absent =
        <T extends { name: string }>(have: T[]) =>
        (x: T) =>
          !have.some((h) => h.name === x.name);
      kc.clusters = [...kc.clusters, ...other.clusters.filter(absent(kc.clusters))];
      kc.users = [...kc.users, ...other.users.filter(absent(kc.users))];
      kc.contexts = [...kc.contexts, ...other.contexts.filter(absent(kc.contexts))];
      if (!kc.currentContext && other.currentContext) kc.setCurrentContext(other.currentContext);
    }
  } else if (!master) {
    // client-node would build "https://undefined:undefined" and fail with "Invalid URL".
    if (!env.KUBERNETES_SERVICE_HOST || !env.KUBERNETES_SERVICE_PORT) {
      throw new Error(
        "no cluster to talk to: not running in a pod (KUBERNETES_SERVICE_HOST/PORT unset); " +
          "give --kubeconfig=<file> (or set KUBECONFIG) or --master=<url>",
      );
    }
    kc.loadFromCluster();
  }
  if (master) {
    const current = kc.getCurrentCluster();
    const name = current?.name ?? "master";
    kc.clusters = [
      ...kc.clusters.filter((c) => c.name !== name),
      { ...(current ?? { name, skipTLSVerify: false }), name, server: master },
    ];
    if (!current) {
      kc.users = [{ name }];
      kc.contexts = [{ name, cluster: name, user: name }];
      kc.setCurrentContext(name);
    }
  }
  if (!kc.getCurrentCluster()) throw new Error("the kubeconfig has no current cluster");
  return kc;
}

/**
 * The kubeconfig of delegated authentication or authorization as apiserver's options find it: the
 * file when given; else the in-cluster service account; outside a cluster (no
 * KUBERNETES_SERVICE_HOST/PORT, client-go's ErrNotInCluster) undefined, as the flag is optional for
 * KCM; without the service account token it is warned about and also undefined.
 */
export function delegatedKubeConfig(
  file: string | undefined,
  warn: (message: string) => void,
): KubeConfig | undefined {
  const kc = new KubeConfig();
  if (file) {
    kc.loadFromFile(file);
    return kc;
  }
  if (!process.env.KUBERNETES_SERVICE_HOST || !process.env.KUBERNETES_SERVICE_PORT) return undefined;
  if (!existsSync(SERVICE_ACCOUNT_TOKEN)) {
    warn(`failed to read in-cluster kubeconfig: ${SERVICE_ACCOUNT_TOKEN}: no such file`);
    return undefined;
  }
  kc.loadFromCluster();
  return kc;
}

const SERVICE_ACCOUNT_TOKEN = "/var/run/secrets/kubernetes.io/serviceaccount/token";

/**
 * The longest a request waits for the client-side limiter, whatever its own deadline: the debt of the
 * token bucket has this floor (qps × 60 s), so requests without a deadline cannot queue up without
 * bound. The kube-apiserver's own --request-timeout, and kvc's --kube-api-request-timeout default.
 */
export const MAX_LIMITER_WAIT_MS = 60_000;

/**
 * client-go's client-side limiter: a token bucket of `qps` refills and `burst` capacity that every
 * request waits on. As client-go: qps 0 means the default 5; a negative qps disables limiting.
 */
export class ClientRateLimiter {
  readonly #bucket: TokenBucket | undefined;

  constructor(
    qps: number,
    burst: number,
    private readonly clock: Clock = realClock,
  ) {
    const rate = qps === 0 ? 5 : qps;
    this.#bucket = rate > 0 ? new TokenBucket(rate, burst, clock) : undefined;
  }

  /**
   * Waits for this request's token; resolves at once while tokens remain. As client-go's
   * limiter.Wait(ctx): rejects when `signal` aborts, and at once, taking no token, when the wait would
   * outlast the signal's deadline (see deadlineOf) or MAX_LIMITER_WAIT_MS; an abandoned wait gives
   * its token back.
   */
  async wait(signal?: AbortSignal): Promise<void> {
    if (!this.#bucket) return;
    signal?.throwIfAborted();
    const left = (deadlineOf(signal) ?? Infinity) - this.clock.now();
    const reservation = this.#bucket.reserveWithin(Math.min(left, MAX_LIMITER_WAIT_MS));
    if (!reservation) {
      throw new RateLimiterError(
        left < MAX_LIMITER_WAIT_MS
          ? `client rate limiter: waiting for a token would exceed the request's deadline (${Math.max(0, Math.round(left))} ms left)`
          : `client rate limiter: waiting for a token would take longer than ${MAX_LIMITER_WAIT_MS / 1000} s`,
      );
    }
    if (reservation.delayMs === 0) return;
    try {
      await sleep(this.clock, reservation.delayMs, signal);
    } catch (err) {
      reservation.cancel();
      throw err;
    }
  }
}

/** A request refused by the client-side limiter, never sent (Go's "rate: Wait(n=1) would exceed context deadline"). */
export class RateLimiterError extends Error {
  override name = "RateLimiterError";
}

export interface ApiClientOptions {
  qps: number;
  burst: number;
  clock?: Clock;
  registry?: Registry;
  userAgent?: string;
  /**
   * Every request is aborted after this long (like client-go's rest.Config.Timeout), a failure its
   * caller retries as any other; 0: none. Watches do not come through here (informers watch over
   * client-node's Watch, with their own inactivity detection).
   */
  requestTimeoutMs?: number;
  /** Admits each mutating request (see WriteGate); reads always pass. */
  writeGate?: WriteGate;
  /** Shadow mode (src/shadow): answers each mutating request instead of the apiserver; none is sent. */
  recordWrite?: (req: { method: string; path: string; body: string | undefined }) => {
    status: number;
    body: unknown;
  };
}

/** A response's headers as client-node reads them: one string per name (repeated ones joined). */
function headerRecord(headers: Record<string, string | string[] | undefined>): Record<string, string> {
  const record: Record<string, string> = {};
  for (const [name, value] of Object.entries(headers)) {
    if (value !== undefined) record[name] = Array.isArray(value) ? value.join(", ") : value;
  }
  return record;
}

/** Methods that change nothing on the server: never fenced. */
const READ_METHODS = new Set(["GET", "HEAD", "OPTIONS"]);

/**
 * The typed API groups the controllers use, all sharing one rate limiter and one set of request
 * metrics (rest_client_requests_total{code,method,host}) through a wrapped HTTP library.
 */
export class ApiClients {
  readonly core: CoreV1Api;
  readonly storage: StorageV1Api;
  readonly coordination: CoordinationV1Api;
  /** TokenReviews and SubjectAccessReviews, for delegated authentication of the serving port. */
  readonly authentication: AuthenticationV1Api;
  readonly authorization: AuthorizationV1Api;
  readonly limiter: ClientRateLimiter;
  /**
   * One request with a JSON body (JSON.stringify'd) and answer (JSON.parse'd, not decoded into
   * models: see model-codec), through the same authentication, limiter, gate, metrics and shadow
   * recording as the typed APIs. A status outside 2xx rejects with client-node's ApiException, its
   * body the answer's text, as the typed APIs reject.
   */
  readonly requestJson: JsonRequest;

  constructor(
    readonly kubeConfig: KubeConfig,
    opts: ApiClientOptions,
  ) {
    const cluster = kubeConfig.getCurrentCluster();
    if (!cluster) throw new Error("the kubeconfig has no current cluster");
    this.limiter = new ClientRateLimiter(opts.qps, opts.burst, opts.clock);
    const metrics = opts.registry ? restClientMetrics(opts.registry) : undefined;
    const host = new URL(cluster.server).host;
    const limiter = this.limiter;
    const clock = opts.clock ?? realClock;
    const authentication = new RequestAuthentication(kubeConfig, cluster.server, clock);
    const { requestTimeoutMs = 0, writeGate, recordWrite } = opts;
    const httpApi = wrapHttpLibrary({
      async send(request: RequestContext): Promise<ResponseContext> {
        const method: string = request.getHttpMethod();
        // Shadow mode: a write is recorded and answered here, before the limiter; it never leaves.
        if (recordWrite && !READ_METHODS.has(method)) {
          const url = new URL(request.getUrl());
          const body: unknown = request.getBody();
          const answer = recordWrite({
            method,
            path: url.pathname + url.search,
            body: typeof body === "string" ? body : undefined,
          });
          const json = Buffer.from(JSON.stringify(answer.body));
          return new ResponseContext(
            answer.status,
            { "content-type": "application/json" },
            new SelfDecodingBody(Promise.resolve(json)),
          );
        }
        // As client-go: the caller's deadline bounds the wait; the client's own timeout starts after it.
        const throttled = metrics?.limiter.startTimer({ verb: method, host });
        try {
          await limiter.wait(request.getSignal());
        } finally {
          throttled?.();
        }
        // After the limiter's wait, which may be long: the gate judges the moment of sending.
        const fence = writeGate && !READ_METHODS.has(method) ? await writeGate.admit() : undefined;
        if (fence && writeGate) fenceAtSend(request, writeGate);
        const signals = [request.getSignal(), fence].filter((s) => s !== undefined);
        const timeout =
          requestTimeoutMs > 0
            ? deadline(
                clock,
                requestTimeoutMs,
                () =>
                  new Error(
                    `${method} ${new URL(request.getUrl()).pathname}: no answer within ${requestTimeoutMs} ms`,
                  ),
              )
            : undefined;
        if (timeout) signals.push(timeout.signal);
        if (signals.length) request.setSignal(AbortSignal.any(signals));
        const end = metrics?.duration.startTimer({ verb: method, host });
        try {
          // undici's request, not the fetch client-node sends with: the same connection pool without
          // fetch's WHATWG Request/Response/stream objects (binding 1,000 pairs: 28% less CPU,
          // docs/performance.md). Unlike fetch it asks for no compression: in-cluster, the CPU of
          // gunzip costs more than the bytes.
          const dispatcher = request.getDispatcher();
          const signal = request.getSignal();
          const response = await undiciRequest(request.getUrl(), {
            method,
            body: (request.getBody() as string | undefined) ?? null,
            headers: request.getHeaders(),
            ...(signal && { signal }),
            ...(dispatcher && { dispatcher }),
          });
          // Read the body under the same deadline: a server may stall after the headers.
          const body = Buffer.from(await response.body.arrayBuffer());
          metrics?.requests.inc({ code: String(response.statusCode), method, host });
          if (response.statusCode === 401) authentication.invalidate();
          return new ResponseContext(
            response.statusCode,
            headerRecord(response.headers),
            new SelfDecodingBody(Promise.resolve(body)),
          );
        } catch (err) {
          metrics?.requests.inc({ code: "<error>", method, host });
          throw err;
        } finally {
          timeout?.cancel();
          end?.();
        }
      },
    });
    const configuration = createConfiguration({
      baseServer: new ServerConfiguration(cluster.server, {}),
      authMethods: { default: authentication },
      httpApi,
      promiseMiddleware: [
        {
          pre: (ctx: RequestContext) => {
            ctx.setHeaderParam("User-Agent", opts.userAgent ?? "kube-volume-controller");
            return Promise.resolve(ctx);
          },
          post: (ctx: ResponseContext) => Promise.resolve(ctx),
        },
      ],
    });
    this.requestJson = async (method, path, { query = {}, body, signal } = {}) => {
      const request = configuration.baseServer.makeRequestContext(path, method);
      for (const [name, value] of Object.entries(query))
        if (value !== undefined) request.setQueryParam(name, value);
      request.setHeaderParam("Accept", "application/json");
      if (body !== undefined) {
        request.setHeaderParam("Content-Type", "application/json");
        request.setBody(JSON.stringify(body));
      }
      await authentication.applySecurityAuthentication(request);
      for (const middleware of configuration.middleware) await middleware.pre(request).toPromise();
      if (signal) request.setSignal(signal);
      const response = await httpApi.send(request).toPromise();
      const text = await response.body.text();
      if (response.httpStatusCode < 200 || response.httpStatusCode > 299) {
        throw new ApiException(response.httpStatusCode, "Unknown API Status Code!", text, response.headers);
      }
      return JSON.parse(text) as unknown;
    };
    this.core = new CoreV1Api(configuration);
    this.storage = new StorageV1Api(configuration);
    this.coordination = new CoordinationV1Api(configuration);
    this.authentication = new AuthenticationV1Api(configuration);
    this.authorization = new AuthorizationV1Api(configuration);
  }
}

export type JsonRequest = (
  method: "GET" | "POST" | "PUT" | "DELETE",
  path: string,
  opts?: { query?: Record<string, string | undefined>; body?: unknown; signal?: AbortSignal },
) => Promise<unknown>;

type Dispatcher = NonNullable<ReturnType<RequestContext["getDispatcher"]>>;

/** How long requests share one connection pool before a new one picks up rotated TLS files. */
const DISPATCHER_RENEW_MS = 5 * 60_000;

/**
 * How long requests share one computation of their credentials: client-go re-reads a token file
 * after a minute (CachedFileTokenSource); an exec plugin's or auth provider's token is cached by
 * client-node until it expires, and a 401 makes the next request ask again.
 */
const AUTHENTICATION_REFRESH_MS = 10_000;

/**
 * KubeConfig.applySecurityAuthentication, shared by every request through ApiClients. client-node
 * 2.0.1 runs it for every request: it reads the CA and client certificate files again (synchronous
 * reads on the event loop) and builds a new undici Agent, so no connection was reused (about 4× the
 * latency of a kept-alive request, one socket per request in TIME_WAIT), and at 1,000 provisioned
 * claims it was 6% of kvc's CPU. Here its headers are computed again every
 * AUTHENTICATION_REFRESH_MS, and requests share one dispatcher, replaced every DISPATCHER_RENEW_MS
 * (the old one closes once its requests finish), so rotated tokens, certificates and CA files still
 * take effect.
 */
export class RequestAuthentication {
  #headers: Record<string, string> = {};
  #dispatcher: Dispatcher | undefined;
  #headersAt = -Infinity;
  #dispatcherAt = -Infinity;
  #refreshing: Promise<void> | undefined;

  constructor(
    private readonly kubeConfig: Pick<KubeConfig, "applySecurityAuthentication">,
    private readonly server: string,
    private readonly clock: Clock,
  ) {}

  getName(): string {
    return "RequestAuthentication";
  }

  /** Sets the request's credentials and connection pool (client-node's SecurityAuthentication). */
  async applySecurityAuthentication(request: RequestContext): Promise<void> {
    if (this.clock.now() - this.#headersAt >= AUTHENTICATION_REFRESH_MS) {
      this.#refreshing ??= this.#refresh().finally(() => (this.#refreshing = undefined));
      await this.#refreshing;
    }
    for (const [name, value] of Object.entries(this.#headers)) request.setHeaderParam(name, value);
    if (this.#dispatcher) request.setDispatcher(this.#dispatcher);
  }

  /** The server refused the credentials (401): the next request computes them again. */
  invalidate(): void {
    this.#headersAt = -Infinity;
  }

  async #refresh(): Promise<void> {
    const probe = new RequestContext(this.server, HttpMethod.GET);
    await this.kubeConfig.applySecurityAuthentication(probe);
    const now = this.clock.now();
    this.#headers = probe.getHeaders();
    this.#headersAt = now;
    const fresh = probe.getDispatcher();
    // No TLS options: undici's global dispatcher, which pools already.
    if (!fresh || (this.#dispatcher && now - this.#dispatcherAt < DISPATCHER_RENEW_MS)) return;
    const old = this.#dispatcher;
    this.#dispatcher = fresh;
    this.#dispatcherAt = now;
    void old?.close();
  }
}

type DispatchHandler = Parameters<Dispatcher["dispatch"]>[1];

/**
 * Asks the gate again the moment undici writes the request to its socket (onRequestStart comes right
 * before the write, in the same synchronous step), not only when it was admitted: see WriteGate. A
 * request on undici's global dispatcher (no TLS options) is fenced at admission only.
 */
function fenceAtSend(request: RequestContext, gate: WriteGate): void {
  const dispatcher = request.getDispatcher();
  if (!dispatcher) return;
  request.setDispatcher(
    dispatcher.compose((dispatch) => (opts, handler) => dispatch(opts, fencedHandler(handler, gate))),
  );
}

function fencedHandler(handler: DispatchHandler, gate: WriteGate): DispatchHandler {
  return {
    onRequestStart(controller, context) {
      const refusal = gate.refusal();
      if (refusal) controller.abort(refusal);
      else handler.onRequestStart?.(controller, context);
    },
    onRequestUpgrade: (...args) => handler.onRequestUpgrade?.(...args),
    onResponseStart: (...args) => handler.onResponseStart?.(...args),
    onResponseData: (...args) => handler.onResponseData?.(...args),
    onResponseEnd: (...args) => handler.onResponseEnd?.(...args),
    onResponseError: (...args) => handler.onResponseError?.(...args),
  };
}

/** client-go's rest_client metrics, registered once per registry (clients sharing one share them). */
function restClientMetrics(registry: Registry) {
  const shared = <T>(name: string, create: () => T): T => (registry.getSingleMetric(name) as T) ?? create();
  return {
    requests: shared(
      "rest_client_requests_total",
      () =>
        new Counter({
          name: "rest_client_requests_total",
          help: "Number of HTTP requests, partitioned by status code, method, and host.",
          labelNames: ["code", "method", "host"] as const,
          registers: [registry],
        }),
    ),
    duration: shared(
      "rest_client_request_duration_seconds",
      () =>
        new Histogram({
          name: "rest_client_request_duration_seconds",
          help: "Request latency in seconds. Broken down by verb and host.",
          labelNames: ["verb", "host"] as const,
          buckets: REST_CLIENT_BUCKETS,
          registers: [registry],
        }),
    ),
    limiter: shared(
      "rest_client_rate_limiter_duration_seconds",
      () =>
        new Histogram({
          name: "rest_client_rate_limiter_duration_seconds",
          help: "Client side rate limiter latency in seconds. Broken down by verb, and host.",
          labelNames: ["verb", "host"] as const,
          buckets: REST_CLIENT_BUCKETS,
          registers: [registry],
        }),
    ),
  };
}

/** client-go's buckets for its request and rate limiter latencies. */
const REST_CLIENT_BUCKETS = [0.005, 0.025, 0.1, 0.25, 0.5, 1, 2, 4, 8, 15, 30, 60];

/** Per-call options that abort the HTTP request with `signal` (client-node takes only Observable middleware there). */
export function abortableRequest(signal: AbortSignal): ConfigurationOptions {
  return {
    middleware: [
      {
        pre: (ctx) => {
          ctx.setSignal(signal);
          return new Observable(Promise.resolve(ctx));
        },
        post: (res) => new Observable(Promise.resolve(res)),
      },
    ],
    middlewareMergeStrategy: "append",
  };
}

/** Per-call options sending the body as a JSON merge patch (RFC 7386). */
export const mergePatch = setHeaderOptions("Content-Type", PatchStrategy.MergePatch);

/** Per-call options sending the body as a strategic merge patch. */
export const strategicMergePatch = setHeaderOptions("Content-Type", PatchStrategy.StrategicMergePatch);
