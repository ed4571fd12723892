import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { VersionApi } from "@kubernetes/client-node";
import { pinnedVersion } from "../../src/controlplane/binaries.js";
import { LocalControlPlane } from "../../src/controlplane/local-control-plane.js";
import { waitFor } from "../../src/util/wait.js";
import { killAllKvc, startKvc, type KvcProcess } from "../support/kvc-process.js";

/*
 * kvc's start-up check of the apiserver's version (src/app/version-check.ts) against the real
 * kube-apiserver: the pinned one, or with KVC_APISERVER_VERSION the skew one (npm run test:skew).
 */

/** The kube-apiserver these tests were asked to run against. */
const expected = process.env.KVC_APISERVER_VERSION || pinnedVersion();

/** kvc's JSON log line with message `msg`, once it is written. */
async function logEntry(kvc: KvcProcess, msg: string): Promise<Record<string, unknown>> {
  return waitFor(
    () => {
      for (const line of kvc.logs().split("\n")) {
        if (!line.startsWith("{")) continue;
        const entry = JSON.parse(line) as Record<string, unknown>;
        if (entry.msg === msg) return entry;
      }
      return undefined;
    },
    { timeoutMs: 30_000, what: `kvc to log "${msg}"` },
  );
}

const logContaining = (kvc: KvcProcess, pattern: RegExp) =>
  waitFor(
    () =>
      kvc
        .logs()
        .split("\n")
        .filter((l) => l.startsWith("{"))
        .map((l) => JSON.parse(l) as Record<string, unknown>)
        .find((e) => typeof e.msg === "string" && pattern.test(e.msg)),
    { timeoutMs: 30_000, what: `kvc to log ${String(pattern)}` },
  );

describe(`kvc's start-up version check against kube-apiserver ${expected}`, () => {
  const planes: LocalControlPlane[] = [];
  let cp: LocalControlPlane;

  before(async () => {
    cp = await LocalControlPlane.start();
    planes.push(cp);
  });
  after(async () => {
    killAllKvc();
    await Promise.all(planes.map((p) => p.stop()));
  });

  test("the apiserver is the one asked for, and kvc logs it as supported", async () => {
    const info = await cp.kubeConfig().makeApiClient(VersionApi).getCode();
    assert.equal(info.gitVersion, expected, "KVC_APISERVER_VERSION picks the binary");
    const kvc = await startKvc(cp.kubeconfigPath, ["--leader-elect=false"]);
    const entry = await logEntry(kvc, "kube-apiserver version supported");
    assert.equal(entry.version, expected);
    assert.equal(entry.logger, "version-check");
    await kvc.ready();
  });

  test("an apiserver emulating v1.35 is warned about, with the reason, and kvc still runs", async () => {
    // --emulated-version serves v1.35's APIs and defaults from this binary: /version says so.
    const old = await LocalControlPlane.start({
      binaries: cp.binaries,
      apiserverArgs: ["--emulated-version=1.35"],
    });
    planes.push(old);
    const kvc = await startKvc(old.kubeconfigPath, ["--leader-elect=false"]);
    const entry = await logContaining(kvc, /is older than kvc supports \(v1\.36 and v1\.37\) and untested/);
    assert.equal(entry.level, 40, "warn");
    assert.equal(entry.version, `${expected} emulating v1.35`);
    assert.equal(entry.verdict, "older");
    await kvc.ready();
  });
});
