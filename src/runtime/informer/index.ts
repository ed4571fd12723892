export { ExponentialBackoffManager, type ExponentialBackoffManagerOptions } from "./backoff-manager.js";
export { clientListWatch, type ClientListWatchOptions } from "./client-list-watch.js";
export { InformerFactory, type ClusterScope, type InformerFactoryOptions } from "./informer-factory.js";
export type {
  ListerWatcher,
  ListOptions,
  ListPage,
  WatchEvent,
  WatchOptions,
  WatchStatus,
} from "./list-watch.js";
export { Reflector, type ReflectorOptions, type ReflectorSink, type ReflectorStats } from "./reflector.js";
export * as resources from "./resources.js";
export type { ResourceType, Scope } from "./resources.js";
export {
  SharedInformer,
  type EventHandler,
  type HandlerOptions,
  type HandlerRegistration,
  type SharedInformerOptions,
} from "./shared-informer.js";
export {
  deepFreeze,
  objectKey,
  Store,
  type Change,
  type Indexer,
  type IndexFunc,
  type Indexers,
} from "./store.js";
