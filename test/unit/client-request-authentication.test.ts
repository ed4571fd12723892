import assert from "node:assert/strict";
import { test } from "node:test";
import { HttpMethod, RequestContext } from "@kubernetes/client-node";
import { FakeClock } from "../../src/runtime/clock.js";
import { RequestAuthentication } from "../../src/runtime/client.js";

type Dispatcher = NonNullable<ReturnType<RequestContext["getDispatcher"]>>;

/**
 * A kubeconfig as client-node's applySecurityAuthentication behaves: each call reads the token (here a
 * counter standing for a rotated file) and builds a new dispatcher (unless `tls` is false).
 */
function kubeConfig(tls = true) {
  const kc = {
    calls: 0,
    token: "t0",
    made: [] as { id: number; closed: number }[],
    applySecurityAuthentication(context: RequestContext): Promise<void> {
      kc.calls += 1;
      context.setHeaderParam("Authorization", `Bearer ${kc.token}`);
      if (tls) {
        const d = { id: kc.made.length, closed: 0, close: () => ((d.closed += 1), Promise.resolve()) };
        kc.made.push(d);
        context.setDispatcher(d as unknown as Dispatcher);
      }
      return Promise.resolve();
    },
  };
  return kc;
}

const SERVER = "https://127.0.0.1:6443";

async function send(auth: RequestAuthentication) {
  const r = new RequestContext(`${SERVER}/api/v1/nodes`, HttpMethod.GET);
  await auth.applySecurityAuthentication(r);
  return {
    token: r.getHeaders()["Authorization"],
    dispatcher: (r.getDispatcher() as unknown as { id: number } | undefined)?.id,
  };
}

test("credentials are computed once per 10 s, not per request; one connection pool, renewed every 5 minutes", async () => {
  const clock = new FakeClock();
  const kc = kubeConfig();
  const auth = new RequestAuthentication(kc, SERVER, clock);
  assert.deepEqual(await Promise.all([send(auth), send(auth), send(auth)]), [
    { token: "Bearer t0", dispatcher: 0 },
    { token: "Bearer t0", dispatcher: 0 },
    { token: "Bearer t0", dispatcher: 0 },
  ]);
  assert.equal(kc.calls, 1, "concurrent requests share one computation");
  kc.token = "t1";
  clock.advance(9_999);
  assert.deepEqual(await send(auth), { token: "Bearer t0", dispatcher: 0 });
  clock.advance(1);
  assert.deepEqual(await send(auth), { token: "Bearer t1", dispatcher: 0 }, "a rotated token within 10 s");
  assert.equal(kc.made[1]!.closed, 0);
  clock.advance(5 * 60_000);
  assert.deepEqual(
    await send(auth),
    { token: "Bearer t1", dispatcher: 2 },
    "a fresh pool picks up rotated TLS files",
  );
  assert.equal(kc.made[0]!.closed, 1, "the old pool is closed (after its requests finish)");
  assert.equal(kc.calls, 3);
});

test("a 401 makes the next request compute the credentials again", async () => {
  const clock = new FakeClock();
  const kc = kubeConfig();
  const auth = new RequestAuthentication(kc, SERVER, clock);
  await send(auth);
  kc.token = "t1";
  auth.invalidate();
  assert.deepEqual(await send(auth), { token: "Bearer t1", dispatcher: 0 });
  assert.equal(kc.calls, 2);
});

test("without TLS options requests keep undici's global dispatcher", async () => {
  const auth = new RequestAuthentication(kubeConfig(false), SERVER, new FakeClock());
  assert.deepEqual(await send(auth), { token: "Bearer t0", dispatcher: undefined });
});
