/*
 * Concurrent claim syncs (--concurrent-pvclaimbinder-syncs > 1, not upstream): whatever the order in
 * which the API answers, two syncs never choose one volume (so none fails), and no binding is lost — once every
 * claim has been synced (and a failed sync retried), no Pending claim is left while a volume that
 * fits it is still free, and every binding is whole (the PV's claimRef and the claim's volumeName
 * point at each other, both Bound).
 */
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import fc from "fast-check";
import type { V1PersistentVolume, V1PersistentVolumeClaim } from "@kubernetes/client-node";
import type { BinderApi } from "../../src/persistentvolume/binder-api.js";
import { ControllerCache } from "../../src/persistentvolume/controller-cache.js";
import { silentLogger } from "../../src/runtime/logger.js";
import { Harness, newClaim, newVolume, type BinderTest } from "./pv-binder-framework.js";

const SIZES = ["1Gi", "2Gi", "5Gi"] as const;
const GI: Record<string, number> = { "1Gi": 1, "2Gi": 2, "5Gi": 5 };

/** Every API call of the harness's fake goes through the scheduler, which decides when it is answered. */
function scheduleApi(h: Harness, s: fc.Scheduler): void {
  const api = h.api as unknown as Record<keyof BinderApi, (...args: unknown[]) => Promise<unknown>>;
  for (const method of [
    "getVolume",
    "updateVolume",
    "updateVolumeStatus",
    "getClaim",
    "updateClaim",
    "updateClaimStatus",
  ] as const) {
    const original = api[method].bind(h.api);
    api[method] = s.scheduleFunction(original);
  }
}

/**
 * Runs `workers` loops over the claim keys, as runWorkers over the claim queue: a key is never synced
 * by two at once; a failed one is retried. Answers the errors of the failed syncs.
 */
async function syncConcurrently(h: Harness, keys: readonly string[], workers: number): Promise<unknown[]> {
  const errors: unknown[] = [];
  const pending = [...keys, ...keys]; // a second pass, as a resync: bound claims are synced again too
  const busy = new Set<string>();
  let attempts = 0;
  const worker = async () => {
    for (let i = pending.findIndex((k) => !busy.has(k)); i >= 0; i = pending.findIndex((k) => !busy.has(k))) {
      const [key] = pending.splice(i, 1) as [string];
      assert.ok(++attempts < 50 * keys.length, "syncs do not settle");
      busy.add(key);
      try {
        await h.ctrl.updateClaim(structuredClone(h.api.claims.get(key)!));
      } catch (err) {
        errors.push(err);
        pending.push(key);
      } finally {
        busy.delete(key);
      }
    }
  };
  await Promise.all(Array.from({ length: workers }, worker));
  return errors;
}

const volumeName = (v: V1PersistentVolume) => v.metadata!.name!;
const claimName = (c: V1PersistentVolumeClaim) => c.metadata!.name!;

describe("PV binder: concurrent claim syncs", () => {
  test("a reserved volume is passed over by matching and refused to another claim until released", () => {
    const cache = new ControllerCache(silentLogger);
    cache.storeVolume(newVolume("volume-a", "1Gi", "", "", "Available", "Retain", ""));
    cache.storeVolume(newVolume("volume-b", "2Gi", "", "", "Available", "Retain", ""));
    const claim = newClaim("claim-2", "uid-2", "1Gi", "", "Pending", undefined);
    const release = cache.reserveVolume("volume-a", "default/claim-1");
    assert.equal(cache.findBestMatch(claim, false).volume?.metadata?.name, "volume-b");
    assert.throws(
      () => cache.reserveVolume("volume-a", "default/claim-2"),
      /being bound to claim "default\/claim-1"/,
    );
    // The holder's own syncs may take it again (a no-op release).
    cache.reserveVolume("volume-a", "default/claim-1")();
    assert.equal(cache.findBestMatch(claim, false).volume?.metadata?.name, "volume-b");
    release();
    assert.equal(cache.findBestMatch(claim, false).volume?.metadata?.name, "volume-a");
    cache.reserveVolume("volume-a", "default/claim-2")();
  });

  test("never choose one volume for two claims and never lose a binding", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.constantFrom(...SIZES), { minLength: 1, maxLength: 6 }),
        fc.array(fc.constantFrom(...SIZES), { minLength: 1, maxLength: 6 }),
        fc.integer({ min: 2, max: 4 }),
        fc.scheduler(),
        async (volumeSizes, claimSizes, workers, s) => {
          const test: BinderTest = {
            name: "concurrent",
            initialVolumes: volumeSizes.map((size, i) =>
              newVolume(`volume-${i}`, size, "", "", "Available", "Retain", ""),
            ),
            initialClaims: claimSizes.map((size, i) =>
              newClaim(`claim-${i}`, `uid-${i}`, size, "", "Pending", undefined),
            ),
            expectedVolumes: [],
            expectedClaims: [],
            expectedEvents: [],
            test: "syncClaim",
          };
          const h = new Harness(test, {});
          // Which claims each volume's claimRef writes named: one at most.
          const chosenFor = new Map<string, Set<string>>();
          const updateVolume = h.api.updateVolume.bind(h.api);
          h.api.updateVolume = (volume) => {
            const ref = volume.spec?.claimRef?.name;
            if (ref !== undefined) {
              const set = chosenFor.get(volumeName(volume)) ?? new Set();
              chosenFor.set(volumeName(volume), set.add(ref));
            }
            return updateVolume(volume);
          };
          scheduleApi(h, s);

          const keys = [...h.api.claims.keys()];
          const errors = await s.waitFor(syncConcurrently(h, keys, workers));

          // Matching passes over reserved volumes: no sync even tries one (no conflict, no refusal).
          assert.deepEqual(errors, []);
          for (const [volume, claims] of chosenFor) {
            assert.equal(claims.size, 1, `${volume} was chosen for ${[...claims].join(", ")}`);
          }
          const volumes = [...h.api.volumes.values()];
          const claims = [...h.api.claims.values()];
          for (const claim of claims.filter((c) => c.status?.phase === "Bound")) {
            const volume = h.api.volumes.get(claim.spec?.volumeName ?? "");
            assert.ok(volume, `${claimName(claim)} is Bound to a volume that does not exist`);
            assert.equal(volume.spec?.claimRef?.uid, claim.metadata?.uid, `${volumeName(volume)}'s claimRef`);
            assert.equal(volume.status?.phase, "Bound", `${volumeName(volume)}'s phase`);
          }
          for (const volume of volumes.filter((v) => v.spec?.claimRef)) {
            const claim = h.api.claims.get(`default/${volume.spec!.claimRef!.name!}`);
            assert.equal(claim?.spec?.volumeName, volumeName(volume), `the claim of ${volumeName(volume)}`);
          }
          const free = volumes.filter((v) => !v.spec?.claimRef);
          for (const claim of claims.filter((c) => c.status?.phase !== "Bound")) {
            const wants = GI[claim.spec!.resources!.requests!.storage!]!;
            const fits = free.find((v) => GI[v.spec!.capacity!.storage!]! >= wants);
            assert.equal(
              fits,
              undefined,
              `${claimName(claim)} is Pending while ${fits && volumeName(fits)} is free`,
            );
          }
        },
      ),
      { numRuns: 200 },
    );
  });
});
