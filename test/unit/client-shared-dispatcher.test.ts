import assert from "node:assert/strict";
import { test } from "node:test";
import { RequestContext } from "@kubernetes/client-node";
import { FakeClock } from "../../src/runtime/clock.js";
import { SharedDispatcher } from "../../src/runtime/client.js";

type Dispatcher = NonNullable<ReturnType<RequestContext["getDispatcher"]>>;

/** A dispatcher as client-node makes one per request; counts close(). */
function fakeDispatcher(id: number) {
  const d = { id, closed: 0, close: () => ((d.closed += 1), Promise.resolve()) };
  return d;
}

test("requests share one connection pool (client-node makes a new one per request), renewed every 5 minutes", () => {
  const clock = new FakeClock();
  const shared = new SharedDispatcher(clock);
  const made: ReturnType<typeof fakeDispatcher>[] = [];
  const request = () => {
    const r = new RequestContext("https://127.0.0.1:6443/api/v1/nodes", "GET");
    const d = fakeDispatcher(made.length);
    made.push(d);
    r.setDispatcher(d as unknown as Dispatcher);
    shared.use(r);
    return (r.getDispatcher() as unknown as { id: number }).id;
  };
  assert.deepEqual([request(), request(), request()], [0, 0, 0]);
  clock.advance(5 * 60_000);
  assert.equal(request(), 3, "a fresh one picks up rotated TLS files");
  assert.equal(made[0]!.closed, 1, "the old pool is closed (after its requests finish)");
  assert.equal(request(), 3);
});

test("a request without TLS options keeps undici's global dispatcher", () => {
  const r = new RequestContext("http://127.0.0.1:8080/api", "GET");
  new SharedDispatcher(new FakeClock()).use(r);
  assert.equal(r.getDispatcher(), undefined);
});
