import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import type { Registry } from "prom-client";
import { runChecks, type HealthCheck } from "./health.js";

export interface ServingOptions {
  bindAddress: string;
  port: number;
  registry: Registry;
  /** /healthz: liveness, including the leader-election check as KCM has it. */
  healthz: readonly HealthCheck[];
  /** /readyz: informers synced. */
  readyz: readonly HealthCheck[];
}

/**
 * Serves /metrics, /healthz, /livez and /readyz. Plain HTTP for now (KCM serves HTTPS with delegated
 * authentication on --secure-port); put it behind a NetworkPolicy or bind it to loopback.
 */
export async function serve(
  opts: ServingOptions,
): Promise<{ server: Server; port: number; close(): Promise<void> }> {
  const server = createServer((req, res) => {
    const url = new URL(req.url ?? "/", "http://localhost");
    const respond = (status: number, body: string, type = "text/plain; charset=utf-8") => {
      res.writeHead(status, { "content-type": type, "x-content-type-options": "nosniff" });
      res.end(body);
    };
    if (req.method !== "GET" && req.method !== "HEAD") {
      respond(405, "method not allowed\n");
      return;
    }
    const health = (checks: readonly HealthCheck[], name: string) => {
      void runChecks(checks).then(({ healthy, lines }) => {
        const verbose = url.searchParams.has("verbose") || !healthy;
        const tail = healthy ? `${name} check passed\n` : `${name} check failed\n`;
        respond(healthy ? 200 : 500, verbose ? `${lines.join("\n")}\n${tail}` : "ok");
      });
    };
    switch (url.pathname) {
      case "/metrics":
        opts.registry.metrics().then(
          (text) => {
            respond(200, text, opts.registry.contentType);
          },
          (err: unknown) => {
            respond(500, `${String(err)}\n`);
          },
        );
        return;
      case "/healthz":
      case "/livez":
        health(opts.healthz, url.pathname.slice(1));
        return;
      case "/readyz":
        health(opts.readyz, "readyz");
        return;
      default:
        respond(404, "not found\n");
    }
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(opts.port, opts.bindAddress, resolve);
  });
  return {
    server,
    port: (server.address() as AddressInfo).port,
    close: () =>
      new Promise((resolve) => {
        server.close(() => {
          resolve();
        });
        server.closeAllConnections();
      }),
  };
}
