import assert from "node:assert/strict";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { runChaos, SETTLE_POLLS, summarize } from "./run.js";

/*
 * The short chaos run of `npm test` (fixed seed, a few minutes at most): every fault kind once or
 * twice under a small workload; every fault must land where it was aimed, no invariant may break,
 * every round must settle. `npm run chaos`
 * runs longer ones (docs/reliability.md).
 */

test("chaos: no invariant breaks under kills, pauses, restarts, partitions and watch cuts (seed 1)", async () => {
  const report = await runChaos({
    seed: 1,
    claims: 20,
    pods: 4,
    moves: 6,
    nodes: 3,
    faults: {
      kill: 2,
      "kill-in-bind": 1,
      "kill-in-attach": 1,
      sigstop: 1,
      apiserver: 1,
      etcd: 1,
      partition: 1,
      watchcut: 1,
    },
    leaseDurationMs: 4000,
    renewDeadlineMs: 3000,
    retryPeriodMs: 500,
    settleTimeoutMs: 90_000,
    settlePolls: SETTLE_POLLS,
    logDir: mkdtempSync(join(tmpdir(), "kvc-chaos-logs-")),
    log: (line) => {
      console.log(line);
    },
  });
  const summary = summarize(report);
  console.log(summary);
  assert.deepEqual(report.violations, [], summary);
  assert.equal(report.faults.length, 9, summary);
  for (const f of report.faults) {
    assert.ok(f.landed, `${f.kind} did not land where aimed: ${f.missed}\n${summary}`);
    assert.ok(f.settledMs !== undefined, `${f.detail} never settled\n${summary}`);
  }
  // Not vacuous: states were watched, kvc wrote, and the lease changed hands.
  assert.ok(report.observed.states > 100, summary);
  assert.ok(report.observed.kvcWrites > 50, summary);
  assert.ok(report.observed.terms >= 3, summary);
  assert.equal(report.claimsCreated, 20);
});
