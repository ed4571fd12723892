import { ApiException, type CoreV1EventList, type V1Pod } from "@kubernetes/client-node";
import { LRUCache } from "lru-cache";
import type { SharedInformer } from "../runtime/informer/index.js";
import { objectKey } from "../runtime/informer/index.js";
import { RECYCLER_POD_PREFIX, type RecyclerPodApi } from "../volume/recycler.js";

type PodInformer = Pick<SharedInformer<V1Pod>, "store" | "addEventHandler">;

/**
 * Shadow mode's recycler pods. kvc's pod is never created (its create and delete are recorded), so
 * the recycler follows the pod of the same name that upstream runs instead: its phase decides the
 * outcome kvc reports, as its own pod's would (the recycle itself, i.e. the pod's creation, is the
 * decision compared). Reads come from the pod informer. Upstream deletes its pod as soon as it ends,
 * possibly before kvc looked: the last version of each deleted recycler pod is kept until kvc has
 * judged it. A pod not (yet) there reads as Pending: KCM may not have started it, and kvc's own
 * deadline ends the wait.
 */
export class ShadowRecyclerPods implements RecyclerPodApi {
  readonly #writes: RecyclerPodApi;
  readonly #pods: PodInformer;
  /** Recycler pods upstream deleted, by namespace/name (a few minutes: long enough for any recycle to look). */
  readonly #ended = new LRUCache<string, V1Pod>({ max: 10_000, ttl: 15 * 60_000 });
  /** By namespace/name, the uid of the upstream pod kvc's recycle follows (its events are forwarded). */
  readonly #followed = new Map<string, string>();
  /** Uids of pods whose outcome a recycle already took: a later recycle of the volume waits for a new one. */
  readonly #judged = new LRUCache<string, true>({ max: 10_000 });
  /** When this shadow started, to the second (as creationTimestamp). */
  readonly #started = Math.floor(Date.now() / 1000) * 1000;

  /** `writes`: the shadow client's pod API (its writes are recorded); `pods`: the pod informer (before it starts). */
  constructor(writes: RecyclerPodApi, pods: PodInformer) {
    this.#writes = writes;
    this.#pods = pods;
    pods.addEventHandler({
      onDelete: (pod: V1Pod) => {
        if (pod.metadata?.name?.startsWith(RECYCLER_POD_PREFIX)) this.#ended.set(objectKey(pod), pod);
      },
    });
  }

  /**
   * A pod of that name created before the shadow started is a leftover of an earlier process (KCM
   * restarted, or the shadow started mid-recycle): upstream's create meets it, and so does kvc's. The
   * recycler deletes it and fails, as upstream's does; that pod is no attempt's outcome.
   */
  readonly createNamespacedPod: RecyclerPodApi["createNamespacedPod"] = (param, options) => {
    const name = param.body.metadata?.name ?? "";
    const leftover = this.#pods.store.get(`${param.namespace}/${name}`);
    const created = Date.parse(String(leftover?.metadata?.creationTimestamp ?? ""));
    const uid = leftover?.metadata?.uid ?? "";
    if (leftover && created < this.#started && !this.#judged.has(uid)) {
      this.#judged.set(uid, true);
      const status = { kind: "Status", status: "Failure", reason: "AlreadyExists", code: 409 };
      const message = `pods "${name}" already exists`;
      return Promise.reject(new ApiException(409, message, JSON.stringify({ ...status, message }), {}));
    }
    return this.#writes.createNamespacedPod(param, options);
  };

  readonly readNamespacedPod: RecyclerPodApi["readNamespacedPod"] = ({ name, namespace }) =>
    Promise.resolve(
      this.#follow(`${namespace}/${name}`) ?? { metadata: { name, namespace }, status: { phase: "Pending" } },
    );

  /**
   * Upstream's pod of that name that kvc's recycle follows: the one it followed already, else the
   * oldest not yet judged (one upstream ended is older than a live one: upstream retries a failed
   * recycle with a new pod of the same name, and kvc's attempt is the first one's twin).
   */
  #follow(key: string): V1Pod | undefined {
    const candidates = [this.#ended.get(key), this.#pods.store.get(key)].filter(
      (p): p is V1Pod => p !== undefined && !this.#judged.has(p.metadata?.uid ?? ""),
    );
    const followed = this.#followed.get(key);
    const pod = candidates.find((p) => p.metadata?.uid === followed) ?? candidates[0];
    if (pod) this.#followed.set(key, pod.metadata?.uid ?? "");
    return pod;
  }

  /** The recycle is over (kvc deletes its pod): the pod it followed has been judged. */
  readonly deleteNamespacedPod: RecyclerPodApi["deleteNamespacedPod"] = (param, options) => {
    const key = `${param.namespace}/${param.name}`;
    const uid = this.#followed.get(key);
    if (uid) this.#judged.set(uid, true);
    this.#followed.delete(key);
    return this.#writes.deleteNamespacedPod(param, options);
  };

  /** The events of the pod followed (kvc's own pod's uid is one the apiserver never saw). */
  readonly listNamespacedEvent: RecyclerPodApi["listNamespacedEvent"] = (param, options) => {
    const name = /(?:^|,)involvedObject\.name=([^,]*)/.exec(param.fieldSelector ?? "")?.[1] ?? "";
    const uid = this.#follow(`${param.namespace}/${name}`)?.metadata?.uid;
    if (!uid) return Promise.resolve({ items: [] } as CoreV1EventList);
    const fieldSelector = `involvedObject.name=${name},involvedObject.uid=${uid}`;
    return this.#writes.listNamespacedEvent({ ...param, fieldSelector }, options);
  };
}
