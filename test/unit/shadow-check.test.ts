import assert from "node:assert/strict";
import { describe, test } from "node:test";
import {
  MAX_TIED_BINDINGS,
  MIN_COMPARED,
  shadowFailures,
  type ShadowVerdict,
} from "../conformance/shadow-check.js";
import type { AuditEvent } from "../support/audit.js";

/* The differential suite's verdict on the shadow beside KCM (test/conformance/shadow-check.ts). */

const kcmWrite: AuditEvent = {
  verb: "update",
  user: { username: "system:kube-controller-manager" },
  userAgent: "kube-controller-manager/v1.37.2",
  requestURI: "/api/v1/persistentvolumes/pv-1/status",
  objectRef: { resource: "persistentvolumes", name: "pv-1", subresource: "status" },
  requestReceivedTimestamp: "2026-12-05T00:00:00.000000Z",
};

function verdict(o: Partial<ShadowVerdict> = {}): ShadowVerdict {
  return {
    counts: { agree: 0, differ: 0, "kvc-only": 0, "upstream-only": 0, tie: 0 },
    tiedBindings: 0,
    unparsed: 0,
    disagreements: [],
    writes: [],
    upstreamWrites: [],
    ...o,
  };
}

describe("the conformance shadow check", () => {
  test("a scenario in which KCM decided fails when the shadow compared none of it", () => {
    assert.equal(MIN_COMPARED, 1);
    const failures = shadowFailures(verdict({ upstreamWrites: [kcmWrite] }), undefined);
    assert.equal(failures.length, 1);
    assert.match(failures[0] ?? "", /compared 0 decision\(s\), not at least 1, where KCM wrote 1 time/);
    // Declared different from upstream: still watched.
    assert.equal(shadowFailures(verdict({ upstreamWrites: [kcmWrite] }), "reason").length, 1);
    // KCM wrote nothing: nothing to compare.
    assert.deepEqual(shadowFailures(verdict(), undefined), []);
    const compared = verdict({
      upstreamWrites: [kcmWrite],
      counts: { agree: 1, differ: 0, "kvc-only": 0, "upstream-only": 0, tie: 0 },
    });
    assert.deepEqual(shadowFailures(compared, undefined), []);
  });

  test("more tied bindings than a scenario may have fail it", () => {
    const counts = { agree: 3, differ: 0, "kvc-only": 0, "upstream-only": 0, tie: 3 };
    const allowed = verdict({ counts, tiedBindings: MAX_TIED_BINDINGS, upstreamWrites: [kcmWrite] });
    assert.deepEqual(shadowFailures(allowed, undefined), []);
    const more = { ...allowed, tiedBindings: MAX_TIED_BINDINGS + 1 };
    assert.deepEqual(shadowFailures(more, undefined), [
      `${MAX_TIED_BINDINGS + 1} tied binding(s), more than the ${MAX_TIED_BINDINGS} a scenario may have`,
    ]);
  });

  test("a write the shadow did not understand fails the scenario", () => {
    assert.deepEqual(shadowFailures(verdict({ unparsed: 2 }), undefined), [
      "2 write(s) of kvc the shadow did not understand (GET /shadow: unparsed)",
    ]);
  });
});
