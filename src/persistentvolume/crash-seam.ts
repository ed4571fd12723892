import type { LogSink } from "../runtime/logger.js";
import type { BinderApi } from "./binder-api.js";

interface Bindable {
  spec?: { claimRef?: unknown; volumeName?: string };
  status?: { phase?: string };
}

/** The four writes of a bind, in upstream's order, and how each is told from other writes. */
const BIND_WRITES = [
  { method: "updateVolume", isBindWrite: (o: Bindable) => o.spec?.claimRef != null },
  { method: "updateVolumeStatus", isBindWrite: (o: Bindable) => o.status?.phase === "Bound" },
  { method: "updateClaim", isBindWrite: (o: Bindable) => !!o.spec?.volumeName },
  { method: "updateClaimStatus", isBindWrite: (o: Bindable) => o.status?.phase === "Bound" },
] as const;

/**
 * Seams for tests, which pass them to run() programmatically (test/support/kvc-seams.ts); the CLI
 * never sets them, and nothing in a pod's environment or command line can (an environment variable
 * read by the production binary would let any pod spec hang its binder).
 */
export interface TestSeams {
  /** Crash-safety tests: see pauseAfterBindWrite. */
  pauseAfterBindWrite?: number;
}

/**
 * A test seam for crash-safety tests only (TestSeams.pauseAfterBindWrite = 1..4): after the first
 * bind write of that number succeeds, the binder logs it and never returns from the call, so a test
 * can SIGKILL the process at exactly that point and check that the next start completes the bind.
 */
export function pauseAfterBindWrite(api: BinderApi, write: number, log: LogSink): BinderApi {
  const step = BIND_WRITES[write - 1];
  if (!step) throw new Error(`pauseAfterBindWrite must be 1-4, got ${write}`);
  const { method, isBindWrite } = step;
  const pausing = async (obj: never) => {
    const result = await (api[method] as (o: never) => Promise<unknown>).call(api, obj);
    if (!isBindWrite(obj)) return result;
    log.warn({ write, method }, "test seam: paused after bind write");
    return new Promise(() => {});
  };
  // A Proxy keeps `this` on the real adapter, whose private fields a copy would not have.
  const paused = new Proxy(api, {
    get: (target, prop) => {
      if (prop === method) return pausing;
      const value: unknown = Reflect.get(target, prop, target);
      return typeof value === "function" ? (value as (...a: unknown[]) => unknown).bind(target) : value;
    },
  });
  return paused;
}
