import { once } from "node:events";
import { connect, createServer, type AddressInfo, type Socket } from "node:net";

/** How a partition looks to the client (see TcpProxy.partition). */
export type PartitionKind = "drop" | "stall" | "half-open";

interface Pair {
  client: Socket;
  upstream: Socket;
  /** forward: bytes flow; stall: bytes are held until heal(); dead: bytes vanish, forever. */
  state: "forward" | "stall" | "dead";
  held: { to: Socket; data: Buffer }[];
}

/**
 * A loopback TCP proxy to `targetPort` that a test can partition. New connections follow `mode`: in
 * "blackhole" a connection is accepted, its bytes read and never answered (a hung apiserver, a
 * half-open path); in "refuse" it is reset at once. Connections keep the mode they were accepted in,
 * so a client recovers only by giving up on a hung connection and opening a new one.
 */
export class TcpProxy {
  mode: "forward" | "blackhole" | "refuse" = "forward";
  readonly #sockets = new Set<Socket>();
  readonly #pairs = new Set<Pair>();
  readonly #server = createServer((client) => {
    this.#track(client);
    if (this.mode === "refuse") {
      client.resetAndDestroy();
      return;
    }
    if (this.mode === "blackhole") {
      client.resume();
      return;
    }
    const upstream = connect(this.targetPort, "127.0.0.1");
    this.#track(upstream);
    const pair: Pair = { client, upstream, state: "forward", held: [] };
    this.#pairs.add(pair);
    const relay = (to: Socket) => (data: Buffer) => {
      if (pair.state === "forward") to.write(data);
      else if (pair.state === "stall") pair.held.push({ to, data });
    };
    client.on("data", relay(upstream));
    upstream.on("data", relay(client));
    const end = () => {
      this.#pairs.delete(pair);
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

  /**
   * Partitions the client from the target until heal():
   * - drop: open connections are reset, new ones refused (a crashed path; clients see errors at once);
   * - stall: open connections hold their bytes, delivered late on heal(); new ones hang;
   * - half-open: open connections swallow bytes both ways without a FIN or reset, even after heal()
   *   (the peer is gone, the socket does not know); new ones hang.
   * Returns how many open connections it cut off.
   */
  partition(kind: PartitionKind): number {
    this.mode = kind === "drop" ? "refuse" : "blackhole";
    let hit = 0;
    for (const p of this.#pairs) {
      if (kind === "drop") {
        p.client.resetAndDestroy();
        p.upstream.destroy();
        hit++;
      } else if (p.state === "forward") {
        p.state = kind === "stall" ? "stall" : "dead";
        hit++;
      }
    }
    return hit;
  }

  /** New connections are forwarded again; stalled ones deliver what they held and resume. */
  heal(): void {
    this.mode = "forward";
    for (const p of this.#pairs) {
      if (p.state !== "stall") continue;
      p.state = "forward";
      for (const { to, data } of p.held.splice(0)) to.write(data);
    }
  }

  /** Closes every open connection (watch streams cut), leaving new ones to `mode`; how many it closed. */
  cut(): number {
    for (const p of this.#pairs) {
      p.client.destroy();
      p.upstream.destroy();
    }
    return this.#pairs.size;
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
