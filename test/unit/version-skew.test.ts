import assert from "node:assert/strict";
import { test } from "node:test";
import { ExitError } from "../../src/app/exit-error.js";
import { checkServerVersion } from "../../src/app/version-check.js";
import { versionSkew } from "../../src/app/version-skew.js";
import { ApiException } from "@kubernetes/client-node";
import type { Clock } from "../../src/runtime/clock.js";
import type { JsonRequest } from "../../src/runtime/client.js";
import { recordingClock } from "../support/recording-clock.js";
import { recordingLogger } from "./informer-fakes.js";

/** /version as kube-apiserver answers it (apimachinery's version.Info), at `git`. */
function info(git: string, emulated?: string) {
  const [, major = "", minor = ""] = /^v(\d+)\.(\d+)/.exec(git) ?? [];
  const [emulationMajor, emulationMinor] = emulated?.split(".") ?? [];
  return { major, minor, gitVersion: git, emulationMajor, emulationMinor };
}

test("v1.36 and v1.37 are supported, patch releases and distribution suffixes alike", () => {
  for (const git of ["v1.36.0", "v1.36.3", "v1.37.2", "v1.37.2-eks-4f2a1b"]) {
    assert.deepEqual(versionSkew(info(git)), { verdict: "supported", version: git }, git);
  }
});

test("a newer apiserver is run against with a warning: untested", () => {
  const skew = versionSkew(info("v1.38.0"));
  assert.equal(skew.verdict, "newer");
  assert.match(
    "reason" in skew ? skew.reason : "",
    /v1\.38\.0 is newer than kvc is tested against \(v1\.36 and v1\.37\)/,
  );
  assert.equal(versionSkew(info("v2.0.0")).verdict, "newer");
});

test("an older apiserver that serves every API kvc lists is run against with a warning, and why", () => {
  for (const git of ["v1.35.4", "v1.18.0"]) {
    const skew = versionSkew(info(git));
    assert.equal(skew.verdict, "older", git);
    assert.match(
      "reason" in skew ? skew.reason : "",
      /older than kvc supports \(v1\.36 and v1\.37\) and untested/,
    );
  }
});

test("an apiserver without storage.k8s.io/v1 CSIDrivers (before v1.18) is refused, and why", () => {
  const skew = versionSkew(info("v1.17.17"));
  assert.equal(skew.verdict, "refused");
  assert.match("reason" in skew ? skew.reason : "", /does not serve storage\.k8s\.io\/v1 CSIDrivers/);
});

test("the emulated version decides (--emulated-version: its APIs and defaults are served), both named", () => {
  // Every apiserver from v1.31 on reports an emulation version: its own unless told otherwise.
  assert.deepEqual(versionSkew(info("v1.37.2", "1.37")), { verdict: "supported", version: "v1.37.2" });
  assert.deepEqual(versionSkew(info("v1.37.2", "1.36")), {
    verdict: "supported",
    version: "v1.37.2 emulating v1.36",
  });
  const skew = versionSkew(info("v1.37.2", "1.35"));
  assert.equal(skew.verdict, "older");
  assert.equal(skew.version, "v1.37.2 emulating v1.35");
});

test("without a readable gitVersion, major and minor decide (a distribution's '+' dropped)", () => {
  assert.equal(versionSkew({ major: "1", minor: "37+", gitVersion: "" }).verdict, "supported");
  assert.equal(versionSkew({ major: "1", minor: "34", gitVersion: "custom" }).verdict, "older");
});

test("a version that cannot be read is warned about, not refused", () => {
  for (const v of [
    { major: "", minor: "", gitVersion: "" },
    { major: "one", minor: "x", gitVersion: "latest" },
    { major: "0", minor: "37", gitVersion: "v0.37.0" },
  ]) {
    const skew = versionSkew(v);
    assert.equal(skew.verdict, "unknown", JSON.stringify(v));
    assert.match("reason" in skew ? skew.reason : "", /a version kvc cannot read/);
  }
});

/** A JsonRequest answering GET /version with `answers` in turn (an Error: rejected). */
function versionRequest(...answers: (object | Error)[]): JsonRequest & { paths: string[] } {
  const paths: string[] = [];
  const request = (_method: string, path: string) => {
    paths.push(path);
    const answer = answers.shift();
    return answer instanceof Error || answer === undefined
      ? Promise.reject(answer ?? new Error("no more answers"))
      : Promise.resolve(answer);
  };
  return Object.assign(request, { paths });
}

test("checkServerVersion reads /version until it answers, backing off, then logs a supported version", async () => {
  const log = recordingLogger();
  const clock = recordingClock();
  const request = versionRequest(new Error("connect ECONNREFUSED"), new Error("503"), info("v1.36.3"));
  const skew = await checkServerVersion({ request, log, clock, signal: new AbortController().signal });
  assert.equal(skew.verdict, "supported");
  assert.deepEqual(request.paths, ["/version", "/version", "/version"]);
  assert.deepEqual(clock.waits, [1_000, 2_000]);
  assert.deepEqual(
    log.lines.map(({ level, msg }) => [level, msg]),
    [
      ["warn", "could not read the kube-apiserver's /version; retrying"],
      ["warn", "could not read the kube-apiserver's /version; retrying"],
      ["info", "kube-apiserver version supported"],
    ],
  );
});

test("checkServerVersion warns with the reason on a newer or older apiserver and goes on", async () => {
  for (const git of ["v1.38.1", "v1.35.0"]) {
    const log = recordingLogger();
    const skew = await checkServerVersion({
      request: versionRequest(info(git)),
      log,
      clock: recordingClock(),
      signal: new AbortController().signal,
    });
    assert.deepEqual(log.lines, [
      {
        level: "warn",
        msg: "reason" in skew ? skew.reason : "",
        obj: { version: git, verdict: skew.verdict },
      },
    ]);
  }
});

test("checkServerVersion refuses with an ExitError carrying the reason, logged as an error too", async () => {
  const log = recordingLogger();
  await assert.rejects(
    checkServerVersion({
      request: versionRequest(info("v1.16.0")),
      log,
      clock: recordingClock(),
      signal: new AbortController().signal,
    }),
    (err: unknown) => err instanceof ExitError && err.exitCode === 1 && /too old for kvc/.test(err.message),
  );
  assert.equal(log.lines[0]?.level, "error");
});

test("checkServerVersion stops retrying when its signal aborts", async () => {
  const stop = new AbortController();
  const clock: Clock = {
    now: () => 0,
    setTimer: () => {
      setImmediate(() => {
        stop.abort(new Error("shutting down"));
      });
      return () => {};
    },
  };
  await assert.rejects(
    checkServerVersion({
      request: versionRequest(new Error("down")),
      log: recordingLogger(),
      clock,
      signal: stop.signal,
    }),
    /shutting down/,
  );
});

test("checkServerVersion does not ask again when /version is refused (4xx): it warns and goes on unchecked", async () => {
  const log = recordingLogger();
  const clock = recordingClock();
  const request = versionRequest(
    new ApiException(429, "", "{}", {}),
    new ApiException(403, "", '{"kind":"Status","code":403}', {}),
  );
  const skew = await checkServerVersion({ request, log, clock, signal: new AbortController().signal });
  assert.equal(skew.verdict, "unknown");
  assert.deepEqual(request.paths, ["/version", "/version"], "429 is retried, 403 is not");
  assert.deepEqual(clock.waits, [1_000]);
  assert.match(log.lines.at(-1)?.msg ?? "", /answered \/version with 403, so kvc cannot tell its version/);
});
