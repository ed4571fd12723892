import { Watch, type KubeConfig, type KubernetesObject } from "@kubernetes/client-node";
import type { JsonRequest } from "../client.js";
import { errorMessage } from "../api-errors.js";
import type { ListerWatcher, WatchEvent, WatchStatus } from "./list-watch.js";
import type { ResourceType, Scope } from "./resources.js";
import { deepFreeze } from "./store.js";
import { cachedObjectDecoder } from "../model-codec.js";

export interface ClientListWatchOptions {
  /**
   * client-node's Watch aborts after this long without a byte. It cannot be switched off, so it is set
   * beyond the reflector's own (Clock-driven, testable) stall timeout and only backs it up.
   */
  watchInactivityTimeoutMs: number;
  /** Waited on before each watch request, as client-go's rate limiter gates watches too. */
  beforeWatch?: (signal: AbortSignal) => Promise<void>;
  /** Sees each listed or watched object's JSON before managedFields are trimmed (cachedObjectDecoder). */
  inspect?: ((json: unknown) => void) | undefined;
}

/**
 * Lists and watches `resource` in `scope`: list pages as JSON (ApiClients.requestJson), watch events
 * over client-node's Watch stream, both decoded by model-codec (every field kept).
 */
export function clientListWatch<T extends KubernetesObject>(
  kc: KubeConfig,
  request: JsonRequest,
  resource: ResourceType<T>,
  scope: Scope,
  opts: ClientListWatchOptions,
): ListerWatcher<T> {
  const decodeCached = cachedObjectDecoder(resource, opts.inspect);
  const { transform } = resource;
  const decodeObject = transform ? (json: unknown) => transform(decodeCached(json)) : decodeCached;
  const watcher = new Watch(kc);
  // requestTimeoutMs is private in the typings but is the documented knob.
  Object.assign(watcher, { requestTimeoutMs: opts.watchInactivityTimeoutMs });
  const ns = scope.namespace ? `/namespaces/${encodeURIComponent(scope.namespace)}` : "";
  const path = `${resource.groupVersionPath}${ns}/${resource.plural}`;
  const selectors = {
    ...(scope.labelSelector && { labelSelector: scope.labelSelector }),
    ...(scope.fieldSelector && { fieldSelector: scope.fieldSelector }),
  };

  return {
    async list({ limit, continue: cont }, signal) {
      const query = { ...selectors, limit: String(limit), continue: cont };
      const page = (await request("GET", path, { query, signal })) as ListPage;
      const meta = page.metadata;
      return {
        // Frozen page by page, as the cache freezes what it holds: a 100,000-object list frozen when
        // the cache took it blocked the event loop for 0.3 s (issue 30 goal 4).
        items: (page.items ?? []).map((json) => deepFreeze(decodeObject(json))),
        resourceVersion: meta?.resourceVersion ?? "",
        ...(meta?.continue && { continue: meta.continue }),
      };
    },

    async watch(watchOpts, onEvent, signal) {
      await opts.beforeWatch?.(signal);
      return new Promise((resolve, reject) => {
        let controller: AbortController | undefined;
        const stop = () => controller?.abort();
        signal.addEventListener("abort", stop, { once: true });
        const done = (err: unknown) => {
          signal.removeEventListener("abort", stop);
          // client-node's inactivity timeout is a clean end like the server's: watch again.
          if (!err || (err instanceof Error && err.name === "TimeoutError")) resolve();
          else reject(err instanceof Error ? err : new Error(errorMessage(err)));
        };
        const onLine = (type: string, obj: unknown) => {
          try {
            const event = decode(type, obj, decodeObject);
            if (event) onEvent(event);
          } catch (err) {
            // client-node swallows callback errors; end the watch instead so the event is not lost.
            done(err);
            controller?.abort();
          }
        };
        watcher.watch(path, { ...selectors, ...watchOpts }, onLine, done).then((c) => {
          controller = c;
          if (signal.aborted) c.abort();
        }, done);
      });
    },
  };
}

/** A list's answer as JSON: ListMeta keeps its "continue" (client-node's model renames it). */
interface ListPage {
  items?: unknown[];
  metadata?: { resourceVersion?: string; continue?: string };
}

function decode<T>(type: string, obj: unknown, decodeObject: (obj: unknown) => T): WatchEvent<T> | undefined {
  switch (type) {
    case "ADDED":
    case "MODIFIED":
    case "DELETED":
      return { type, object: decodeObject(obj) };
    case "BOOKMARK":
      return { type, object: obj as KubernetesObject };
    case "ERROR":
      return { type, object: obj as WatchStatus };
    default:
      return undefined;
  }
}
