import assert from "node:assert/strict";
import { describe, test } from "node:test";
import {
  ApiException,
  type ConfigurationOptions,
  HttpMethod,
  RequestContext,
  type V1SubjectAccessReview,
  type V1TokenReview,
} from "@kubernetes/client-node";
import { DelegatingAuthenticator } from "../../src/runtime/auth/authentication.js";
import { DelegatingAuthorizer } from "../../src/runtime/auth/authorization.js";
import { shouldRetry } from "../../src/runtime/auth/webhook-retry.js";
import { FakeClock } from "../../src/runtime/clock.js";

/** An apiserver error as ApiClients rejects with it: the Status as the body's text. */
const status = (code: number, reason: string, headers: Record<string, string> = {}, details?: object) =>
  new ApiException(code, "", JSON.stringify({ kind: "Status", code, reason, details }), headers);

const reset = () => Object.assign(new Error("read ECONNRESET"), { code: "ECONNRESET" });

describe("shouldRetry as upstream's webhook.DefaultShouldRetry", () => {
  test("transient: a reset connection, InternalError, Timeout, 429, a server asking to retry later", () => {
    for (const err of [
      reset(),
      new Error("fetch failed", { cause: reset() }),
      status(500, "InternalError"),
      status(500, ""),
      status(504, ""),
      status(408, "Timeout"),
      status(429, ""),
      status(503, "ServiceUnavailable", { "retry-after": "1" }),
      status(500, "ServerTimeout", {}, { retryAfterSeconds: 0 }),
      status(409, "Conflict", {}, { retryAfterSeconds: 2 }),
    ])
      assert.ok(shouldRetry(err), err instanceof ApiException ? String(err.body) : err.message);
  });
  test("final: a refused connection, 401, 403, 404, a 500 or 504 of another known reason, a plain 503", () => {
    for (const err of [
      Object.assign(new Error("connect ECONNREFUSED"), { code: "ECONNREFUSED" }),
      status(401, "Unauthorized"),
      status(403, "Forbidden"),
      status(404, "NotFound"),
      status(500, "ServiceUnavailable"),
      status(504, "NotFound"),
      status(503, "ServiceUnavailable"),
      new Error("TokenReview: no answer within 10000 ms"),
    ])
      assert.ok(!shouldRetry(err), err instanceof ApiException ? String(err.body) : err.message);
  });
});

/** A FakeClock that records every timer asked of it. */
function recordingClock(): FakeClock & { timers: number[] } {
  const clock = Object.assign(new FakeClock(), { timers: [] as number[] });
  const setTimer = clock.setTimer.bind(clock);
  clock.setTimer = (fn, ms) => (clock.timers.push(ms), setTimer(fn, ms));
  return clock;
}

/** Resolves `promise`, moving the clock on 1 ms at a time while it is pending. */
async function drive<T>(clock: FakeClock, promise: Promise<T>): Promise<T> {
  let done = false;
  const settled = promise.finally(() => (done = true));
  while (!done) {
    for (let i = 0; i < 5; i++) await Promise.resolve();
    if (!done) clock.advance(1);
  }
  return settled;
}

/** Answers with each of `answers` in turn (an Error is thrown), recording the clock of each call. */
function scripted<T>(clock: FakeClock, answers: (T | Error)[]) {
  const calls: number[] = [];
  const call = (): Promise<T> => {
    calls.push(clock.now());
    const answer = answers[calls.length - 1] ?? new Error("no more answers");
    return answer instanceof Error ? Promise.reject(answer) : Promise.resolve(answer);
  };
  return { calls, call };
}

describe("delegated reviews retry as upstream's webhook (500 ms, ×1.5, jitter 0.2, 5 attempts)", () => {
  const alice: V1TokenReview = {
    spec: { token: "t" },
    status: { authenticated: true, user: { username: "alice", groups: [] } },
  };

  test("a TokenReview that fails transiently is asked again, 500 ms then 750 ms later", async () => {
    const clock = recordingClock();
    const api = scripted<V1TokenReview>(clock, [
      status(500, "InternalError"),
      status(429, "TooManyRequests"),
      alice,
    ]);
    const authn = new DelegatingAuthenticator(
      { createTokenReview: api.call },
      { cacheTtlMs: 10_000, clock, random: () => 0 },
    );
    const user = await drive(clock, authn.authenticate("Bearer t"));
    assert.equal(user?.username, "alice");
    assert.deepEqual(api.calls, [0, 500, 1_250]);
  });

  test("five attempts at most, jittered up to 20 %; then the request is unauthorized", async () => {
    const clock = recordingClock();
    const api = scripted<V1TokenReview>(clock, Array<Error>(9).fill(reset()));
    const authn = new DelegatingAuthenticator(
      { createTokenReview: api.call },
      { cacheTtlMs: 10_000, clock, random: () => 0.5 },
    );
    assert.equal(await drive(clock, authn.authenticate("Bearer t")), undefined);
    assert.equal(api.calls.length, 5);
    const waits = clock.timers.filter((ms) => ms !== 10_000);
    assert.deepEqual(
      waits.map((ms) => Math.round(ms * 100) / 100),
      [550, 825, 1237.5, 1856.25],
    );
  });

  test("an error that is not transient is not retried", async () => {
    const clock = recordingClock();
    const api = scripted<V1TokenReview>(clock, [status(403, "Forbidden"), alice]);
    const authn = new DelegatingAuthenticator({ createTokenReview: api.call }, { cacheTtlMs: 10_000, clock });
    assert.equal(await drive(clock, authn.authenticate("Bearer t")), undefined);
    assert.equal(api.calls.length, 1);
  });

  test("all attempts of a TokenReview share its 10 s deadline, as upstream's", async () => {
    const clock = recordingClock();
    const calls: number[] = [];
    // Each attempt answers 500 after 4 s, unless its request is aborted first (as ApiClients aborts it).
    const slow = async (_req: unknown, options?: ConfigurationOptions): Promise<V1TokenReview> => {
      calls.push(clock.now());
      const request = new RequestContext("https://apiserver", HttpMethod.POST);
      for (const m of options?.middleware ?? []) await m.pre(request).toPromise();
      const signal = request.getSignal();
      return new Promise((_resolve, reject) => {
        const cancel = clock.setTimer(() => {
          reject(status(500, "InternalError"));
        }, 4_000);
        signal?.addEventListener("abort", () => {
          cancel();
          reject(signal.reason as Error);
        });
      });
    };
    const authn = new DelegatingAuthenticator(
      { createTokenReview: slow },
      { cacheTtlMs: 10_000, clock, random: () => 0 },
    );
    const started = clock.now();
    assert.equal(await drive(clock, authn.authenticate("Bearer t")), undefined);
    assert.deepEqual(calls, [0, 4_500, 9_250], "a third attempt, cut short by the deadline");
    assert.ok(clock.now() - started <= 10_001, `gave up after ${clock.now() - started} ms`);
  });

  test("a SubjectAccessReview that fails transiently is asked again", async () => {
    const clock = recordingClock();
    const allowed: V1SubjectAccessReview = { spec: {}, status: { allowed: true } };
    const api = scripted<V1SubjectAccessReview>(clock, [status(504, ""), allowed]);
    const authz = new DelegatingAuthorizer(
      { createSubjectAccessReview: api.call },
      { alwaysAllowPaths: [], allowCacheTtlMs: 10_000, denyCacheTtlMs: 10_000, clock, random: () => 0 },
    );
    const decision = await drive(clock, authz.authorize({ username: "a", groups: [] }, "get", "/metrics"));
    assert.equal(decision.allowed, true);
    assert.deepEqual(api.calls, [0, 500]);
  });
});
