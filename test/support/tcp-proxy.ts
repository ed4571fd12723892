import { once } from "node:events";
import { connect, createServer, type AddressInfo, type Socket } from "node:net";

/**
 * A loopback TCP proxy to `targetPort` that a test can turn into a black hole: in "blackhole" mode a
 * new connection is accepted, its bytes read and never answered (a hung apiserver, a half-open
 * path). Connections keep the mode they were accepted in, so a client recovers only by giving up on
 * a hung connection and opening a new one.
 */
export class TcpProxy {
  mode: "forward" | "blackhole" = "forward";
  readonly #sockets = new Set<Socket>();
  readonly #server = createServer((client) => {
    this.#track(client);
    if (this.mode === "blackhole") {
      client.resume();
      return;
    }
    const upstream = connect(this.targetPort, "127.0.0.1");
    this.#track(upstream);
    client.pipe(upstream).pipe(client);
    const end = () => {
      client.destroy();
      upstream.destroy();
    };
    client.on("error", end).on("close", end);
    upstream.on("error", end).on("close", end);
  });

  private constructor(readonly targetPort: number) {}

  static async start(targetPort: number): Promise<TcpProxy> {
    const proxy = new TcpProxy(targetPort);
    proxy.#server.listen(0, "127.0.0.1");
    await once(proxy.#server, "listening");
    return proxy;
  }

  get port(): number {
    return (this.#server.address() as AddressInfo).port;
  }

  async close(): Promise<void> {
    for (const s of this.#sockets) s.destroy();
    await new Promise((resolve) => this.#server.close(resolve));
  }

  #track(s: Socket): void {
    this.#sockets.add(s);
    s.on("close", () => this.#sockets.delete(s));
  }
}
