import assert from "node:assert/strict";
import { once } from "node:events";
import { createServer, type Socket } from "node:net";
import { after, before, describe, test } from "node:test";
import { KubeConfig } from "@kubernetes/client-node";
import { FakeClock, type Clock } from "../../src/runtime/clock.js";
import { ApiClients } from "../../src/runtime/client.js";
import { WriteGate } from "../../src/runtime/write-gate.js";

/*
 * ApiClients' per-request deadline and write gate, against a TCP server that accepts connections and
 * never answers (a hung apiserver, a half-open connection): time moves on a FakeClock.
 */

const sockets = new Set<Socket>();
const silent = createServer((s) => {
  sockets.add(s);
  s.on("close", () => sockets.delete(s));
  s.resume(); // read the request, never answer
});
let received = 0;
silent.on("connection", (s) => s.on("data", () => received++));

function kubeConfig(): KubeConfig {
  const port = (silent.address() as { port: number }).port;
  const kc = new KubeConfig();
  kc.loadFromOptions({
    // client-node refuses plain HTTP unless TLS verification is off.
    clusters: [{ name: "c", server: `http://127.0.0.1:${port}`, skipTLSVerify: true }],
    users: [{ name: "u" }],
    contexts: [{ name: "x", cluster: "c", user: "u" }],
    currentContext: "x",
  });
  return kc;
}

/** Settles `p` into "pending", or its outcome, once the network has had time to carry the request. */
async function outcome(p: Promise<unknown>, waitForRequest: boolean): Promise<string> {
  let s = "pending";
  p.then(
    () => (s = "resolved"),
    (err: unknown) => (s = `rejected: ${(err as Error).message}`),
  );
  const start = received;
  if (waitForRequest) {
    const deadline = Date.now() + 5_000;
    while (received === start && Date.now() < deadline) await new Promise((r) => setTimeout(r, 5));
  }
  await new Promise((r) => setImmediate(r));
  return s;
}

describe("ApiClients requests", () => {
  before(async () => {
    silent.listen(0, "127.0.0.1");
    await once(silent, "listening");
  });
  after(() => {
    for (const s of sockets) s.destroy();
    silent.close();
  });

  test("a request that gets no answer fails at its deadline, as any failure its caller retries", async () => {
    const clock = new FakeClock();
    const { core } = new ApiClients(kubeConfig(), { qps: -1, burst: 1, clock, requestTimeoutMs: 1_000 });
    const read = core.readNamespace({ name: "default" });
    assert.equal(await outcome(read, true), "pending");
    clock.advance(999);
    assert.equal(await outcome(read, false), "pending");
    clock.advance(1);
    await assert.rejects(read, /GET \/api\/v1\/namespaces\/default: no answer within 1000 ms/);
  });

  test("a write is refused without being sent when the gate is closed; reads pass", async () => {
    const clock = new FakeClock();
    const gate = new WriteGate(clock, 10_000);
    const { core } = new ApiClients(kubeConfig(), {
      qps: -1,
      burst: 1,
      clock,
      requestTimeoutMs: 1_000,
      writeGate: gate,
    });
    const start = received;
    await assert.rejects(
      core.createNamespace({ body: { metadata: { name: "x" } } }),
      /not leading: API writes are refused/,
    );
    assert.equal(received, start, "nothing reached the server");
    const read = core.readNamespace({ name: "default" });
    assert.equal(await outcome(read, true), "pending", "a read is sent");
    clock.advance(1_000);
    await assert.rejects(read, /no answer within/);

    // Leading, with a fresh renewal: the write is sent; the term ending aborts it in flight.
    const term = new AbortController();
    gate.renewed(clock.now());
    gate.lead(term.signal);
    const write = core.createNamespace({ body: { metadata: { name: "x" } } });
    assert.equal(await outcome(write, true), "pending");
    term.abort(new Error("lease lost"));
    await assert.rejects(write, /lease lost/);
  });

  // Without the second look the write is sent and hangs on the silent server: the timeout fails it.
  test(
    "a write admitted before the process stopped is not sent if the renewal went stale meanwhile",
    { timeout: 10_000 },
    async () => {
      // As a process resumed after SIGSTOP: its monotonic clock has moved on, its timers have not run
      // yet (this clock's never do). The gate's first look (admit) still saw the renewal fresh; its
      // next, when undici writes the request, sees it stale.
      const now = 0;
      let looks = 0;
      const stopped: Clock = {
        now: () => (looks++ === 0 ? now : now + 10_000),
        setTimer: () => () => {},
      };
      const gate = new WriteGate(stopped, 10_000);
      const term = new AbortController();
      gate.renewed(now);
      gate.lead(term.signal);
      looks = 0;
      const { core } = new ApiClients(kubeConfig(), {
        qps: -1,
        burst: 1,
        clock: new FakeClock(),
        writeGate: gate,
      });
      const start = received;
      await assert.rejects(core.createNamespace({ body: { metadata: { name: "x" } } }), (err: Error) => {
        assert.match((err.cause as Error | undefined)?.message ?? err.message, /last renewed more than/);
        return true;
      });
      assert.ok(looks >= 2, "the gate was asked again at the write");
      assert.equal(received, start, "nothing reached the server");
    },
  );
});
