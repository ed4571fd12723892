import type { IncomingMessage, ServerResponse } from "node:http";
import { createServer, type Server } from "node:https";
import type { AddressInfo } from "node:net";
import { readFileSync } from "node:fs";
import { createSecureContext, type SecureVersion } from "node:tls";
import type { Registry } from "prom-client";
import type { DelegatingAuthenticator } from "./auth/authentication.js";
import type { DelegatingAuthorizer } from "./auth/authorization.js";
import { runChecks, type HealthCheck } from "./health.js";
import type { LogSink } from "./logger.js";
import type { ServingCert } from "./serving-cert.js";

export interface ServingOptions {
  bindAddress: string;
  port: number;
  cert: ServingCert;
  /** --tls-min-version as Node names it; undefined: Node's default (TLS 1.2, as Go's). */
  minVersion?: SecureVersion | undefined;
  authenticator: DelegatingAuthenticator;
  authorizer: DelegatingAuthorizer;
  registry: Registry;
  /** /healthz: liveness, including the leader-election check as KCM has it. */
  healthz: readonly HealthCheck[];
  /** /readyz: informers synced. */
  readyz: readonly HealthCheck[];
  /** More GET paths answered with their function's value as JSON (shadow mode's /shadow). */
  routes?: Readonly<Record<string, () => unknown>>;
  logger: LogSink;
  /** How often certificate files are checked for a change (upstream's dynamic serving certificate polls every minute). */
  certReloadMs?: number;
  /** The connection limits; tests shorten them. */
  limits?: Partial<ServingLimits>;
}

const CERT_RELOAD_MS = 60_000;

export interface ServingLimits {
  /** Connections open at once; more are closed as they arrive. */
  maxConnections: number;
  /** From a connection's accept to the end of its TLS handshake. */
  handshakeTimeoutMs: number;
  /** From a request's start to the end of its headers. */
  headersTimeoutMs: number;
  /** From a request's start to the end of its body. */
  requestTimeoutMs: number;
  /** How often Node looks for requests past those timeouts. */
  checkIntervalMs: number;
}

/**
 * What one client may hold, as near the kube-apiserver's secure serving (k8s.io/apiserver
 * SecureServingInfo.Serve) as Node allows. Upstream's http.Server has ReadHeaderTimeout 32 s ("just
 * shy of requestTimeoutUpperBound"), which Go also takes as the TLS handshake's deadline; the
 * apiserver's --request-timeout is 60 s. Node's defaults (a 120 s handshake, 60 s headers, 300 s
 * request, checked every 30 s, unlimited connections) let a client hold a connection four times as
 * long. Upstream has no connection limit (a goroutine is cheap); a Node TLS socket is not, so kvc
 * closes connections beyond 1,024, far above what scrapers and probes use. Keep-alive stays at Node's
 * 5 s (upstream's IdleTimeout is 90 s): an idle connection is the cheapest to give back.
 */
export const SERVING_LIMITS: ServingLimits = {
  maxConnections: 1024,
  handshakeTimeoutMs: 32_000,
  headersTimeoutMs: 32_000,
  requestTimeoutMs: 60_000,
  checkIntervalMs: 1_000,
};

/**
 * Serves /metrics, /healthz, /livez and /readyz over HTTPS as kube-controller-manager does on
 * --secure-port: every request is authenticated (TokenReview; none: anonymous) and then authorized
 * (always-allowed paths, else a SubjectAccessReview) before it reaches its handler. No request can
 * end the process: a target that cannot be parsed is a 400, any other failure a 500.
 */
export async function serve(
  opts: ServingOptions,
): Promise<{ server: Server; port: number; close(): Promise<void> }> {
  const limits = { ...SERVING_LIMITS, ...opts.limits };
  const server = createServer(
    {
      cert: opts.cert.cert,
      key: opts.cert.key,
      ...(opts.minVersion && { minVersion: opts.minVersion }),
      handshakeTimeout: limits.handshakeTimeoutMs,
      headersTimeout: limits.headersTimeoutMs,
      requestTimeout: limits.requestTimeoutMs,
      connectionsCheckingInterval: limits.checkIntervalMs,
    },
    (req, res) => {
      handle(opts, req, res).catch((err: unknown) => {
        opts.logger.error({ err, method: req.method, path: req.url }, "serving a request failed");
        respond(res, 500, "internal error\n");
      });
    },
  );
  server.maxConnections = limits.maxConnections;
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(opts.port, opts.bindAddress, resolve);
  });
  const files = opts.cert.files;
  let current = { cert: opts.cert.cert, key: opts.cert.key };
  const reload =
    files &&
    setInterval(() => {
      current = reloadCert(server, files, current, opts);
    }, opts.certReloadMs ?? CERT_RELOAD_MS).unref();
  return {
    server,
    port: (server.address() as AddressInfo).port,
    close: () =>
      new Promise((resolve) => {
        clearInterval(reload);
        server.close(() => {
          resolve();
        });
        server.closeAllConnections();
      }),
  };
}

/**
 * Serves a rotated certificate from the next connection on, as upstream's DynamicCertKeyPairContent:
 * a pair that cannot be read or does not match (e.g. caught half-written) keeps the current one.
 */
function reloadCert(
  server: Server,
  files: { cert: string; key: string },
  current: { cert: string; key: string },
  opts: Pick<ServingOptions, "minVersion" | "logger">,
): { cert: string; key: string } {
  let cert: string;
  let key: string;
  try {
    cert = readFileSync(files.cert, "utf8");
    key = readFileSync(files.key, "utf8");
    if (cert === current.cert && key === current.key) return current;
    createSecureContext({ cert, key }); // throws when the key does not match the certificate
  } catch (err) {
    opts.logger.warn({ err, files }, "cannot reload the serving certificate; keeping the current one");
    return current;
  }
  server.setSecureContext({ cert, key, ...(opts.minVersion && { minVersion: opts.minVersion }) });
  opts.logger.info({ certificate: files.cert }, "serving certificate reloaded");
  return { cert, key };
}

function respond(
  res: ServerResponse,
  status: number,
  body: string,
  type = "text/plain; charset=utf-8",
): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  res.writeHead(status, { "content-type": type, "x-content-type-options": "nosniff" });
  res.end(body);
}

/** The request's path and query, or undefined when the target is not a URL (Node's parser lets e.g. `//[` through). */
export function requestURL(target: string | undefined): URL | undefined {
  try {
    return new URL(target ?? "/", "https://localhost");
  } catch {
    return undefined;
  }
}

async function handle(opts: ServingOptions, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const url = requestURL(req.url);
  if (!url) {
    respond(res, 400, "bad request: malformed request target\n");
    return;
  }
  const user = await opts.authenticator.authenticate(req.headers.authorization);
  if (!user) {
    respond(res, 401, "Unauthorized\n");
    return;
  }
  // As upstream's RequestInfo for non-resource requests: the verb is the lowercased method.
  const verb = (req.method ?? "").toLowerCase();
  const decision = await opts.authorizer.authorize(user, verb, url.pathname);
  if (!decision.allowed) {
    const reason = decision.reason ? `: ${decision.reason}` : "";
    respond(res, 403, `forbidden: User "${user.username}" cannot ${verb} path "${url.pathname}"${reason}\n`);
    return;
  }
  if (req.method !== "GET" && req.method !== "HEAD") {
    respond(res, 405, "method not allowed\n");
    return;
  }
  const health = async (checks: readonly HealthCheck[], name: string) => {
    // The lease error names the ServiceAccount and namespace: not for anonymous probes.
    const authenticated = !user.groups.includes("system:unauthenticated");
    const { healthy, lines } = await runChecks(checks, { authenticated });
    const verbose = url.searchParams.has("verbose") || !healthy;
    const tail = healthy ? `${name} check passed\n` : `${name} check failed\n`;
    respond(res, healthy ? 200 : 500, verbose ? `${lines.join("\n")}\n${tail}` : "ok");
  };
  switch (url.pathname) {
    case "/metrics":
      respond(res, 200, await opts.registry.metrics(), opts.registry.contentType);
      return;
    case "/healthz":
    case "/livez":
      await health(opts.healthz, url.pathname.slice(1));
      return;
    case "/readyz":
      await health(opts.readyz, "readyz");
      return;
    default: {
      const route = Object.hasOwn(opts.routes ?? {}, url.pathname) ? opts.routes?.[url.pathname] : undefined;
      if (route) respond(res, 200, `${JSON.stringify(route(), null, 2)}\n`, "application/json");
      else respond(res, 404, "not found\n");
    }
  }
}
