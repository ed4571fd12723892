import type { KubernetesObject } from "@kubernetes/client-node";
import {
  SharedInformer,
  type ListerWatcher,
  type ListOptions,
  type ListPage,
  type WatchEvent,
  type WatchOptions,
} from "../../src/runtime/informer/index.js";
import type { LogSink } from "../../src/runtime/logger.js";
import { waitFor } from "../../src/util/wait.js";

export interface ListCall<T> {
  opts: ListOptions;
  signal: AbortSignal;
  respond(page: ListPage<T>): void;
  fail(err: Error): void;
}

export interface WatchCall<T> {
  opts: WatchOptions;
  signal: AbortSignal;
  emit(event: WatchEvent<T>): void;
  /** Ends the watch cleanly, as the server's timeout does. */
  end(): void;
  fail(err: Error): void;
}

/**
 * A scripted apiserver: every list and watch call waits until the test answers it. A call left
 * unanswered hangs forever and ignores its signal, like a half-open connection.
 */
export class FakeListWatch<T extends KubernetesObject> implements ListerWatcher<T> {
  readonly lists: ListCall<T>[] = [];
  readonly watches: WatchCall<T>[] = [];

  list(opts: ListOptions, signal: AbortSignal): Promise<ListPage<T>> {
    return new Promise((respond, fail) => this.lists.push({ opts, signal, respond, fail }));
  }

  watch(opts: WatchOptions, emit: (event: WatchEvent<T>) => void, signal: AbortSignal): Promise<void> {
    return new Promise((end, fail) => this.watches.push({ opts, signal, emit, end, fail }));
  }

  /** The n-th (1-based) list call, once made. */
  async listCall(n: number): Promise<ListCall<T>> {
    return waitFor(() => this.lists[n - 1], { timeoutMs: 5000, intervalMs: 1, what: `list call ${n}` });
  }

  /** The n-th (1-based) watch call, once made. */
  async watchCall(n: number): Promise<WatchCall<T>> {
    return waitFor(() => this.watches[n - 1], { timeoutMs: 5000, intervalMs: 1, what: `watch call ${n}` });
  }
}

/** Lists `items`, then streams what the test emits until the reflector stops. */
export class ScriptedResource<T extends KubernetesObject> implements ListerWatcher<T> {
  #emit: ((event: WatchEvent<T>) => void) | undefined;

  constructor(readonly items: T[]) {}

  list() {
    return Promise.resolve({ items: this.items, resourceVersion: "1" });
  }

  watch(_: unknown, onEvent: (event: WatchEvent<T>) => void, signal: AbortSignal): Promise<void> {
    this.#emit = onEvent;
    return new Promise((resolve) => {
      signal.addEventListener("abort", () => {
        resolve();
      });
    });
  }

  async emit(event: WatchEvent<T>): Promise<void> {
    const emit = await until(() => this.#emit, "the watch");
    emit(event);
  }
}

export function informer<T extends KubernetesObject>(resource: ScriptedResource<T>): SharedInformer<T> {
  return new SharedInformer<T>({ name: "fake", listerWatcher: resource });
}

/** An error as client-node reports an HTTP status. */
export function httpError(statusCode: number, message = `HTTP ${statusCode}`): Error {
  return Object.assign(new Error(message), { statusCode });
}

export function obj(
  name: string,
  resourceVersion: string,
  extra: { namespace?: string; uid?: string; labels?: Record<string, string> } = {},
): KubernetesObject {
  return {
    metadata: {
      name,
      resourceVersion,
      uid: extra.uid ?? `uid-${name}`,
      ...(extra.namespace && { namespace: extra.namespace }),
      ...(extra.labels && { labels: extra.labels }),
    },
  };
}

/** Lets pending promise callbacks run (the reflector's steps are chained on microtasks). */
export async function settle(): Promise<void> {
  for (let i = 0; i < 20; i++) await Promise.resolve();
}

export function until<T>(check: () => T | undefined | false, what: string): Promise<T> {
  return waitFor(check, { timeoutMs: 5000, intervalMs: 1, what });
}

export interface LogLine {
  level: keyof LogSink;
  obj: object;
  msg: string;
}

export function recordingLogger(): LogSink & { lines: LogLine[] } {
  const lines: LogLine[] = [];
  const at =
    (level: keyof LogSink) =>
    (o: object, msg: string): void => {
      lines.push({ level, obj: o, msg });
    };
  return { lines, debug: at("debug"), info: at("info"), warn: at("warn"), error: at("error") };
}
