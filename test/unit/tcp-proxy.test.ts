import assert from "node:assert/strict";
import { once } from "node:events";
import { connect, createServer, type AddressInfo, type Socket } from "node:net";
import { after, before, describe, test } from "node:test";
import { TcpProxy } from "../support/tcp-proxy.js";
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
