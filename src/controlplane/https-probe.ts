import { request as httpsRequest } from "node:https";
import { request as httpRequest } from "node:http";

export interface ProbeOptions {
  /** PEM bundle to trust; when absent the peer is not verified (loopback test servers only). */
  ca?: string;
  token?: string;
  timeoutMs?: number;
}

/** GETs a health endpoint of a local server; resolves with status and body, never follows redirects. */
export function probe(url: string, opts: ProbeOptions = {}): Promise<{ status: number; body: string }> {
  const u = new URL(url);
  const request = u.protocol === "https:" ? httpsRequest : httpRequest;
  return new Promise((resolve, reject) => {
    const req = request(
      u,
      {
        method: "GET",
        timeout: opts.timeoutMs ?? 5_000,
        ...(u.protocol === "https:" && (opts.ca ? { ca: opts.ca } : { rejectUnauthorized: false })),
        headers: opts.token ? { authorization: `Bearer ${opts.token}` } : {},
      },
      (res) => {
        let body = "";
        res.setEncoding("utf8");
        res.on("data", (chunk: string) => (body += chunk));
        res.on("end", () => {
          resolve({ status: res.statusCode ?? 0, body });
        });
        res.on("error", reject);
      },
    );
    req.on("timeout", () => req.destroy(new Error(`GET ${url} timed out`)));
    req.on("error", reject);
    req.end();
  });
}
