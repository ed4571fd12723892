import type { Clock } from "../../src/runtime/clock.js";

/** A clock that records every wait asked of it and ends it on the next turn of the event loop. */
export function recordingClock(): Clock & { waits: number[] } {
  const waits: number[] = [];
  return {
    waits,
    now: () => 0,
    setTimer(fn, ms) {
      waits.push(ms);
      const t = setImmediate(fn);
      return () => {
        clearImmediate(t);
      };
    },
  };
}
