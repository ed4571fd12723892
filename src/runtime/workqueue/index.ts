import type { Clock } from "../clock.js";
import { DelayingQueue } from "./delaying-queue.js";
import type { WorkqueueMetrics } from "./metrics.js";
import { Queue } from "./queue.js";
import type { RateLimiter } from "./rate-limiter.js";
import { RateLimitingQueue } from "./rate-limiting-queue.js";

export { Queue, type QueueOptions } from "./queue.js";
export { DelayingQueue, type DelayingQueueOptions } from "./delaying-queue.js";
export { RateLimitingQueue, type RateLimitingQueueOptions } from "./rate-limiting-queue.js";
export {
  BucketRateLimiter,
  defaultControllerRateLimiter,
  ItemExponentialFailureRateLimiter,
  MaxOfRateLimiter,
  TokenBucket,
  type RateLimiter,
} from "./rate-limiter.js";
export { WorkqueueMetrics, type QueueMetrics } from "./metrics.js";
export { runWorkers, type WorkErrorHandler, type WorkHandler } from "./worker-pool.js";

export interface QueueConfig {
  /** The `name` label of the queue's metrics. */
  name: string;
  clock?: Clock | undefined;
  metrics?: WorkqueueMetrics | undefined;
}

/** A plain queue, like the PV controller's "claims" and "volumes" queues. */
export function newQueue({ name, clock, metrics }: QueueConfig): Queue {
  return new Queue({ metrics: metrics?.forQueue(name, clock) });
}

export function newDelayingQueue({ name, clock, metrics }: QueueConfig): DelayingQueue {
  return new DelayingQueue({ clock, metrics: metrics?.forQueue(name, clock) });
}

export function newRateLimitingQueue({
  name,
  clock,
  metrics,
  rateLimiter,
}: QueueConfig & { rateLimiter?: RateLimiter | undefined }): RateLimitingQueue {
  return new RateLimitingQueue({ clock, rateLimiter, metrics: metrics?.forQueue(name, clock) });
}
