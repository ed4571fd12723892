import { KubernetesObjectApi, Watch, type KubeConfig, type KubernetesObject } from "@kubernetes/client-node";
import { errorMessage } from "../../src/runtime/api-errors.js";
import { waitFor } from "../../src/util/wait.js";

/**
 * The writes made to a set of collections while a log is open, from watch events: what a handover
 * did (a VolumeAttachment deleted and created again leaves the settled state as it was, but not the
 * log). Only changes are seen: a write that changes nothing bumps no resourceVersion.
 */

export interface Collection {
  apiVersion: string;
  kind: string;
  /** The collection's URL path, e.g. /api/v1/persistentvolumes. */
  path: string;
  namespace?: string;
  /** The fields whose change is named in a MODIFIED write. */
  project(obj: KubernetesObject): Record<string, unknown>;
  /** A MODIFIED write counts only when a projected field changed (the collection is shared with writers not watched). */
  projectedOnly?: boolean;
}

export interface Write {
  kind: string;
  name: string;
  type: "created" | "modified" | "deleted";
  /** For "modified": the projected fields that changed (empty: only others did). */
  fields: string[];
}

interface Seen {
  rv: string;
  projected: string;
}

export class WriteLog {
  readonly #writes: Write[] = [];
  readonly #seen = new Map<Collection, Map<string, Seen>>();
  readonly #stops: AbortController[] = [];
  #failure: Error | undefined;
  private closing = false;

  private constructor(
    readonly objects: KubernetesObjectApi,
    readonly collections: Collection[],
  ) {}

  /** Lists each collection and watches it from there. */
  static async open(kc: KubeConfig, collections: Collection[]): Promise<WriteLog> {
    const log = new WriteLog(KubernetesObjectApi.makeApiClient(kc), collections);
    const watch = new Watch(kc);
    // client-node ends a watch after 30 s without a byte; a quiet window is what we hope to see.
    Object.assign(watch, { requestTimeoutMs: 30 * 60_000 });
    for (const c of collections) {
      const list = await log.objects.list(c.apiVersion, c.kind, c.namespace);
      const seen = new Map(list.items.map((o) => [o.metadata!.name!, seenOf(c, o)]));
      log.#seen.set(c, seen);
      const stop = await watch.watch(
        c.path,
        { resourceVersion: list.metadata!.resourceVersion! },
        (type: string, obj: KubernetesObject) => {
          log.#record(c, type, obj);
        },
        (err: unknown) => {
          // Ended before close(): later writes would go unseen.
          if (!log.closing) log.#failure = new Error(`watch of ${c.path} ended: ${errorMessage(err)}`);
        },
      );
      log.#stops.push(stop);
    }
    return log;
  }

  #record(c: Collection, type: string, obj: KubernetesObject): void {
    const seen = this.#seen.get(c)!;
    const name = obj.metadata?.name ?? "";
    const before = seen.get(name);
    const now = seenOf(c, obj);
    if (type === "ADDED") {
      seen.set(name, now);
      this.#writes.push({ kind: c.kind, name, type: "created", fields: [] });
    } else if (type === "MODIFIED") {
      seen.set(name, now);
      const was = JSON.parse(before?.projected ?? "{}") as Record<string, unknown>;
      const is = JSON.parse(now.projected) as Record<string, unknown>;
      const fields = [...new Set([...Object.keys(was), ...Object.keys(is)])]
        .filter((k) => canonical(was[k]) !== canonical(is[k]))
        .sort();
      if (fields.length > 0 || !c.projectedOnly)
        this.#writes.push({ kind: c.kind, name, type: "modified", fields });
    } else if (type === "DELETED") {
      seen.delete(name);
      this.#writes.push({ kind: c.kind, name, type: "deleted", fields: [] });
    } else if (type === "ERROR") {
      this.#failure = new Error(`watch of ${c.path} failed: ${JSON.stringify(obj)}`);
    }
  }

  /**
   * Waits until every watch has delivered the collection's current state (each object at the
   * resourceVersion a fresh list returns, deleted ones gone), stops watching and returns the writes.
   */
  async close(): Promise<Write[]> {
    try {
      await waitFor(
        async () => {
          if (this.#failure) throw this.#failure;
          for (const c of this.collections) {
            const list = await this.objects.list(c.apiVersion, c.kind, c.namespace);
            const seen = this.#seen.get(c)!;
            if (list.items.length !== seen.size) return false;
            if (list.items.some((o) => seen.get(o.metadata!.name!)?.rv !== o.metadata!.resourceVersion))
              return false;
          }
          return true;
        },
        { timeoutMs: 15_000, what: "the watches to catch up with the writes" },
      );
    } finally {
      this.closing = true;
      for (const stop of this.#stops) stop.abort();
    }
    if (this.#failure)
      throw this.#failure instanceof Error ? this.#failure : new Error(String(this.#failure));
    return this.#writes;
  }
}

function seenOf(c: Collection, obj: KubernetesObject): Seen {
  return { rv: obj.metadata?.resourceVersion ?? "", projected: canonical(c.project(obj)) };
}

/** JSON with sorted keys: the list's typed objects and the watch's raw ones order keys differently. */
function canonical(value: unknown): string {
  return JSON.stringify(value, (_, v: unknown) =>
    v && typeof v === "object" && !Array.isArray(v) && !(v instanceof Date)
      ? Object.fromEntries(Object.entries(v).sort(([a], [b]) => a.localeCompare(b)))
      : v,
  );
}
