import assert from "node:assert/strict";
import { once } from "node:events";
import { connect, createServer, type AddressInfo, type Socket } from "node:net";
import { after, before, describe, test } from "node:test";
import { Worker } from "node:worker_threads";
import { TcpProxy } from "../support/tcp-proxy.js";
import { TcpProxyThread } from "../support/tcp-proxy-thread.js";
import { waitFor } from "../../src/util/wait.js";

/* The partitions the chaos suite puts between a kvc replica and the apiserver, over an echo server. */

describe("TcpProxy partitions", () => {
  const echo = createServer((s) => s.pipe(s));
  let proxy: TcpProxy;
  before(async () => {
    echo.listen(0, "127.0.0.1");
    await once(echo, "listening");
    proxy = await TcpProxy.start((echo.address() as AddressInfo).port);
  });
  const clients: Socket[] = [];
  after(async () => {
    for (const s of clients) s.destroy();
    await proxy.close();
    echo.close();
  });

  /** A client that records what it receives and whether it was reset or closed. */
  async function client() {
    const s: Socket = connect(proxy.port, "127.0.0.1");
    clients.push(s);
    const c = { s, got: "", closed: false };
    s.on("data", (d: Buffer) => (c.got += d.toString()));
    s.on("error", () => {}).on("close", () => (c.closed = true));
    await once(s, "connect");
    return c;
  }
  const echoed = async (c: Awaited<ReturnType<typeof client>>, text: string) => {
    c.s.write(text);
    await waitFor(() => c.got.endsWith(text), { timeoutMs: 5_000, what: `echo of ${text}` });
  };
  /** Nothing more arrives while a probe connection opened after it gets its echo: a bound, not a sleep. */
  const nothingArrives = async (c: Awaited<ReturnType<typeof client>>) => {
    const before = c.got;
    const probe = await client();
    await echoed(probe, "probe");
    probe.s.destroy();
    assert.equal(c.got, before);
  };

  test("drop resets open connections and refuses new ones until heal", async () => {
    const c = await client();
    await echoed(c, "a");
    proxy.partition("drop");
    await waitFor(() => c.closed, { timeoutMs: 5_000, what: "the open connection to be reset" });
    // once() would reject on the reset's "error"; the close after it is what is awaited.
    await new Promise((resolve) =>
      connect(proxy.port, "127.0.0.1")
        .on("error", () => {})
        .on("close", resolve),
    );
    proxy.heal();
    await echoed(await client(), "b");
  });

  test("stall holds bytes and delivers them on heal", async () => {
    const c = await client();
    await echoed(c, "a");
    proxy.partition("stall");
    c.s.write("held");
    proxy.heal();
    await waitFor(() => c.got === "aheld", { timeoutMs: 5_000, what: "the held bytes" });
  });

  test("half-open swallows bytes on open connections for good, without closing them", async () => {
    const c = await client();
    await echoed(c, "a");
    proxy.partition("half-open");
    c.s.write("lost");
    proxy.heal();
    await nothingArrives(c);
    assert.equal(c.closed, false);
  });

  test("cut closes open connections; new ones work", async () => {
    const c = await client();
    proxy.cut();
    await waitFor(() => c.closed, { timeoutMs: 5_000, what: "the connection to be cut" });
    await echoed(await client(), "again");
  });
});

describe("TcpProxyThread", () => {
  /** A server in a worker of its own that answers whatever arrives with the time it arrived. */
  async function clockServer(): Promise<{ port: number; worker: Worker }> {
    const worker = new Worker(
      `const { createServer } = require("node:net");
       const { parentPort } = require("node:worker_threads");
       const server = createServer((s) => s.on("data", () => s.write(String(Date.now()))));
       server.listen(0, "127.0.0.1", () => parentPort.postMessage(server.address().port));`,
      { eval: true },
    );
    const [port] = (await once(worker, "message")) as [number];
    return { port, worker };
  }

  test("relays on time while the main thread is blocked", async () => {
    const server = await clockServer();
    const proxy = await TcpProxyThread.start(server.port);
    try {
      const s = connect(proxy.port, "127.0.0.1");
      await once(s, "connect");
      const answer = once(s, "data");
      s.write("when?");
      // The main thread stalls (as a loaded test process's does) right after the write.
      const blockedUntil = Date.now() + 1_000;
      while (Date.now() < blockedUntil);
      const arrivedAt = Number(String((await answer)[0]));
      s.destroy();
      assert.ok(
        arrivedAt < blockedUntil,
        `the bytes arrived ${arrivedAt - blockedUntil} ms after the stall ended`,
      );
    } finally {
      await proxy.close();
      await server.worker.terminate();
    }
  });

  test("partitions, heals and cuts as TcpProxy does", async () => {
    const server = await clockServer();
    const proxy = await TcpProxyThread.start(server.port);
    const sockets: Socket[] = [];
    /** A connection, and its close (listened for from the start: a reset may close it at once). */
    const open = async () => {
      const s = connect(proxy.port, "127.0.0.1").on("error", () => {});
      sockets.push(s);
      const closed = new Promise((resolve) => s.on("close", resolve));
      await once(s, "connect");
      return { s, closed };
    };
    try {
      await proxy.partition("drop");
      // Refused: reset as soon as accepted, which the client may see before its own connect event.
      const refused = connect(proxy.port, "127.0.0.1").on("error", () => {});
      sockets.push(refused);
      await new Promise((resolve) => refused.on("close", resolve));
      await proxy.heal();
      const { s, closed } = await open();
      const answer = once(s, "data");
      s.write("now?");
      await answer;
      // Answered: the proxy relays it (a connection it has not yet accepted would not be cut).
      await proxy.cut();
      await closed;
    } finally {
      for (const s of sockets) s.destroy();
      await proxy.close();
      await server.worker.terminate();
    }
  });
});
