import assert from "node:assert/strict";
import { test } from "node:test";
import fc from "fast-check";
import { feedWorld, isCrash, worldArbitrary } from "../fuzz/hostile-objects.js";

/*
 * Hostile objects through every sync function and the matcher: a clean error or event is fine, a
 * TypeError/RangeError (or a non-Error throw) is a crash. Fixed seeds and bounded runs; the slowest
 * syncs are what `npm run fuzz` reports.
 */
test("hostile PVs, claims, classes, pods, nodes, VolumeAttachments and CSIDrivers crash no sync function", async () => {
  await fc.assert(
    fc.asyncProperty(worldArbitrary, async (world) => {
      await feedWorld(world, async (fn, subject, call) => {
        try {
          await call();
        } catch (error) {
          if (isCrash(error)) {
            assert.fail(
              `${fn} crashed: ${String((error as Error).stack ?? error)}\non ${JSON.stringify(subject).slice(0, 2000)}`,
            );
          }
        }
      });
    }),
    { numRuns: 25, seed: 20261203 },
  );
});
