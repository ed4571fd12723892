/** One real listener per signal; the callbacks registered on it through onAbort. */
const listeners = new WeakMap<AbortSignal, Set<() => void>>();

/**
 * Calls `fn` once when `signal` aborts (the caller checks `signal.aborted` first) and returns the
 * function that forgets it. Node's EventTarget scans every listener of a signal on each add and
 * remove, so 10,000 attach operations each sleeping on the controller's one signal made every sleep
 * cost 10,000 steps (issue 30 goal 4); here a signal carries one listener and a Set of callbacks.
 */
export function onAbort(signal: AbortSignal, fn: () => void): () => void {
  const callbacks = callbacksOf(signal);
  // Its own entry, so the same `fn` registered twice is called twice and forgotten once per call.
  const callback = () => {
    fn();
  };
  callbacks.add(callback);
  return () => {
    callbacks.delete(callback);
  };
}

function callbacksOf(signal: AbortSignal): Set<() => void> {
  const known = listeners.get(signal);
  if (known) return known;
  const callbacks = new Set<() => void>();
  listeners.set(signal, callbacks);
  signal.addEventListener(
    "abort",
    () => {
      listeners.delete(signal);
      for (const callback of callbacks) callback();
    },
    { once: true },
  );
  return callbacks;
}
