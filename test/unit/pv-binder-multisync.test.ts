/* Upstream binder_test.go TestMultiSync (set 10): syncs until nothing changes. */
import { describe, test } from "node:test";
import {
  ANN_BIND_COMPLETED as BC,
  ANN_BOUND_BY_CONTROLLER as BbC,
} from "../../src/persistentvolume/annotations.js";
import { newClaim, newVolume, runMultisyncTest, type BinderTest } from "./pv-binder-framework.js";

const tests: BinderTest[] = [
  {
    name: "10-1 - successful bind",
    initialVolumes: [newVolume("volume10-1", "1Gi", "", "", "Pending", "Retain", "")],
    expectedVolumes: [newVolume("volume10-1", "1Gi", "uid10-1", "claim10-1", "Bound", "Retain", "", BbC)],
    initialClaims: [newClaim("claim10-1", "uid10-1", "1Gi", "", "Pending", undefined)],
    expectedClaims: [newClaim("claim10-1", "uid10-1", "1Gi", "volume10-1", "Bound", undefined, BbC, BC)],
    // Upstream: FailedBinding twice (no Available volume for the first syncClaim nor the resync's,
    // which syncs claims before volumes). kvc: the claim waits for the Pending volume its sync makes
    // Available, without an event (WaitingClaims, docs/pv-binder.md).
    expectedEvents: [],
    test: "syncClaim",
  },
  {
    // Two controllers bound two PVs to one claim: the one the claim points at wins, the other is rolled back.
    name: "10-2 - bind PV race",
    initialVolumes: [
      newVolume("volume10-2-1", "1Gi", "uid10-2", "claim10-2", "Bound", "Retain", "", BbC),
      newVolume("volume10-2-2", "1Gi", "uid10-2", "claim10-2", "Bound", "Retain", "", BbC),
    ],
    expectedVolumes: [
      newVolume("volume10-2-1", "1Gi", "uid10-2", "claim10-2", "Bound", "Retain", "", BbC),
      newVolume("volume10-2-2", "1Gi", "", "", "Available", "Retain", ""),
    ],
    initialClaims: [newClaim("claim10-2", "uid10-2", "1Gi", "volume10-2-1", "Bound", undefined, BbC, BC)],
    expectedClaims: [newClaim("claim10-2", "uid10-2", "1Gi", "volume10-2-1", "Bound", undefined, BbC, BC)],
    expectedEvents: [],
    test: "syncClaim",
  },
];

describe("PV binder: TestMultiSync (set 10)", () => {
  for (const t of tests) test(t.name, () => runMultisyncTest(t).then(() => undefined));
});
