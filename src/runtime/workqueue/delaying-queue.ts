import { realClock, type Clock } from "../clock.js";
import type { QueueMetrics } from "./metrics.js";
import { Queue, type QueueOptions } from "./queue.js";

export interface DelayingQueueOptions extends QueueOptions {
  clock?: Clock | undefined;
}

/**
 * client-go's delaying queue: addAfter() holds an item until its ready time, keeping the earliest
 * time asked for. Waiting items sit in a min-heap on ready time, with one clock timer for the top.
 */
export class DelayingQueue extends Queue {
  readonly #clock: Clock;
  readonly #metrics: QueueMetrics | undefined;
  /** Ready time per waiting item; the heap may also hold superseded entries, skipped when popped. */
  readonly #readyAt = new Map<string, number>();
  readonly #heap = new ReadyHeap();
  #timer: { at: number; cancel: () => void } | undefined;

  constructor(options: DelayingQueueOptions = {}) {
    super(options);
    this.#clock = options.clock ?? realClock;
    this.#metrics = options.metrics;
  }

  /** Adds `item` after `ms`; an item already waiting keeps whichever ready time is earlier. */
  addAfter(item: string, ms: number): void {
    if (this.shuttingDown()) return;
    this.#metrics?.retry();
    if (ms <= 0) {
      this.add(item);
      return;
    }
    const at = this.#clock.now() + ms;
    const known = this.#readyAt.get(item);
    if (known !== undefined && known <= at) return;
    this.#readyAt.set(item, at);
    this.#heap.push({ at, item });
    this.#arm();
  }

  override shutDown(): void {
    this.#stop();
    super.shutDown();
  }

  override shutDownWithDrain(): Promise<void> {
    this.#stop();
    return super.shutDownWithDrain();
  }

  /** Makes the timer fire for the earliest live entry, dropping superseded entries on the way. */
  #arm(): void {
    let top = this.#heap.peek();
    while (top && this.#readyAt.get(top.item) !== top.at) {
      this.#heap.pop();
      top = this.#heap.peek();
    }
    if (!top || (this.#timer && this.#timer.at <= top.at)) return;
    this.#timer?.cancel();
    const cancel = this.#clock.setTimer(() => {
      this.#fire();
    }, top.at - this.#clock.now());
    this.#timer = { at: top.at, cancel };
  }

  #fire(): void {
    this.#timer = undefined;
    const now = this.#clock.now();
    for (let top = this.#heap.peek(); top && top.at <= now; top = this.#heap.peek()) {
      this.#heap.pop();
      if (this.#readyAt.get(top.item) !== top.at) continue;
      this.#readyAt.delete(top.item);
      this.add(top.item);
    }
    this.#arm();
  }

  #stop(): void {
    this.#timer?.cancel();
    this.#timer = undefined;
    this.#readyAt.clear();
    this.#heap.clear();
  }
}

interface Entry {
  at: number;
  item: string;
}

/** Binary min-heap of entries by ready time. */
class ReadyHeap {
  #entries: Entry[] = [];

  peek(): Entry | undefined {
    return this.#entries[0];
  }

  push(entry: Entry): void {
    const a = this.#entries;
    let i = a.length;
    while (i > 0) {
      const parentIndex = (i - 1) >> 1;
      const parent = a[parentIndex];
      if (!parent || parent.at <= entry.at) break;
      a[i] = parent;
      i = parentIndex;
    }
    a[i] = entry;
  }

  pop(): void {
    const a = this.#entries;
    const last = a.pop();
    if (!last || a.length === 0) return;
    let i = 0;
    for (;;) {
      const left = a[2 * i + 1];
      const right = a[2 * i + 2];
      if (!left) break;
      const [childIndex, child] = right && right.at < left.at ? [2 * i + 2, right] : [2 * i + 1, left];
      if (last.at <= child.at) break;
      a[i] = child;
      i = childIndex;
    }
    a[i] = last;
  }

  clear(): void {
    this.#entries = [];
  }
}
