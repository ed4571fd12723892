import type { KubernetesObject } from "@kubernetes/client-node";

export interface ListOptions {
  limit: number;
  continue?: string;
}

export interface ListPage<T> {
  items: T[];
  resourceVersion: string;
  /** Set while more pages follow. */
  continue?: string;
}

export interface WatchOptions {
  resourceVersion: string;
  /** Server-side timeout: the apiserver ends the watch cleanly after this long. */
  timeoutSeconds: number;
  allowWatchBookmarks: boolean;
}

/** The parts of a metav1.Status an ERROR watch event carries. */
export interface WatchStatus {
  code?: number;
  reason?: string;
  message?: string;
}

export type WatchEvent<T> =
  | { type: "ADDED" | "MODIFIED" | "DELETED"; object: T }
  /** Carries only metadata.resourceVersion: the server's progress when nothing else changed. */
  | { type: "BOOKMARK"; object: KubernetesObject }
  | { type: "ERROR"; object: WatchStatus };

/**
 * How a reflector reaches the apiserver for one resource (and namespace and selectors). The informer
 * factory supplies one over client-node; tests supply their own to script failures and silences.
 */
export interface ListerWatcher<T> {
  /** One page of a list; rejects with the API error (a 410 when the continue token expired). */
  list(opts: ListOptions, signal: AbortSignal): Promise<ListPage<T>>;
  /**
   * Streams events to `onEvent` until the watch ends. Resolves when it ends cleanly (the server's
   * timeout, or the client's own inactivity timeout); rejects when it could not start or broke. The
   * reflector stops listening when it aborts `signal`, whether or not the watch honours it.
   */
  watch(opts: WatchOptions, onEvent: (event: WatchEvent<T>) => void, signal: AbortSignal): Promise<void>;
}
