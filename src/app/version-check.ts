import { ExitError } from "./exit-error.js";
import { versionRefused, versionSkew, type VersionSkew } from "./version-skew.js";
import { apiStatus } from "../runtime/api-errors.js";
import { sleep, type Clock } from "../runtime/clock.js";
import type { JsonRequest } from "../runtime/client.js";
import type { LogSink } from "../runtime/logger.js";
import { serverVersion } from "../runtime/server-version.js";

const FIRST_RETRY_MS = 1_000;
const MAX_RETRY_MS = 30_000;

/**
 * kvc's start-up check of the apiserver's version (version-skew.ts decides): reads /version until it
 * answers, logs the verdict, and rejects with an ExitError when kvc cannot work against that
 * apiserver. `kvc run` runs it beside start-up rather than before: an apiserver not up yet delays only
 * this check, as it delays the informers anyway.
 */
export async function checkServerVersion({
  request,
  log,
  clock,
  signal,
}: {
  request: JsonRequest;
  log: LogSink;
  clock: Clock;
  signal: AbortSignal;
}): Promise<VersionSkew> {
  let skew: VersionSkew | undefined;
  for (let retryMs = FIRST_RETRY_MS; !skew; retryMs = Math.min(retryMs * 2, MAX_RETRY_MS)) {
    try {
      skew = versionSkew(await serverVersion(request, signal));
    } catch (err) {
      if (signal.aborted) throw err;
      const code = apiStatus(err)?.code ?? 0;
      // Refused (RBAC without system:public-info-viewer, a proxy): asking again changes nothing.
      if (code >= 400 && code < 500 && code !== 429) {
        skew = versionRefused(code);
        break;
      }
      log.warn({ err, retryInMs: retryMs }, "could not read the kube-apiserver's /version; retrying");
      await sleep(clock, retryMs, signal);
    }
  }
  switch (skew.verdict) {
    case "supported":
      log.info({ version: skew.version }, "kube-apiserver version supported");
      break;
    case "refused":
      log.error({ version: skew.version }, skew.reason);
      throw new ExitError(skew.reason, 1);
    default:
      log.warn({ version: skew.version, verdict: skew.verdict }, skew.reason);
  }
  return skew;
}
