import { once } from "node:events";
import { isMainThread, parentPort, Worker, workerData } from "node:worker_threads";
import { TcpProxy, type PartitionKind } from "./tcp-proxy.js";

/** What the handle asks of the proxy in its thread. */
type Command =
  { id: number; op: "partition"; kind: PartitionKind } | { id: number; op: "heal" | "cut" | "close" };

const WORKER_MARK = "kvc-tcp-proxy-thread";

/**
 * A TcpProxy in a worker thread of its own. A test's main thread can stall for seconds on a loaded
 * machine (GC, parsing, spawning); a proxy on it holds every byte of the connections it relays for as
 * long, so a write a replica sent on time reached the apiserver late, and the audit log, which stamps
 * the moment of receipt, showed it in the next leader's term (the chaos run's two-writers check failed
 * once in CI that way, 2.6 s after the writer's lease had run out). In its own thread the relay keeps
 * the pace of the network it stands in for.
 */
export class TcpProxyThread {
  #next = 0;
  readonly #pending = new Map<number, (value: number) => void>();
  readonly #worker: Worker;

  private constructor(
    worker: Worker,
    readonly port: number,
  ) {
    this.#worker = worker;
    worker.on("message", (m: { id: number; value: number }) => {
      this.#pending.get(m.id)?.(m.value);
      this.#pending.delete(m.id);
    });
  }

  static async start(targetPort: number): Promise<TcpProxyThread> {
    // The worker inherits the loader (`--import tsx`) from execArgv.
    const worker = new Worker(new URL(import.meta.url), { workerData: { [WORKER_MARK]: targetPort } });
    worker.unref();
    const [port] = (await once(worker, "message")) as [number];
    return new TcpProxyThread(worker, port);
  }

  /** TcpProxy.partition, done once it returns: how many open connections it cut off. */
  partition(kind: PartitionKind): Promise<number> {
    return this.#ask({ id: this.#next++, op: "partition", kind });
  }

  /** TcpProxy.heal. */
  async heal(): Promise<void> {
    await this.#ask({ id: this.#next++, op: "heal" });
  }

  /** TcpProxy.cut: how many connections it closed. */
  cut(): Promise<number> {
    return this.#ask({ id: this.#next++, op: "cut" });
  }

  async close(): Promise<void> {
    await this.#ask({ id: this.#next++, op: "close" });
    await this.#worker.terminate();
  }

  #ask(c: Command): Promise<number> {
    return new Promise((resolve) => {
      this.#pending.set(c.id, resolve);
      this.#worker.postMessage(c);
    });
  }
}

async function serve(targetPort: number): Promise<void> {
  const port = parentPort!;
  const proxy = await TcpProxy.start(targetPort);
  port.on("message", (c: Command) => {
    void (async () => {
      let value = 0;
      if (c.op === "partition") value = proxy.partition(c.kind);
      else if (c.op === "heal") proxy.heal();
      else if (c.op === "cut") value = proxy.cut();
      else await proxy.close();
      port.postMessage({ id: c.id, value });
    })();
  });
  port.postMessage(proxy.port);
}

const target = isMainThread ? undefined : (workerData as Record<string, number> | null)?.[WORKER_MARK];
if (target !== undefined) await serve(target);
