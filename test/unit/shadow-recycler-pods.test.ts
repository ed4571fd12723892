import assert from "node:assert/strict";
import { describe, test } from "node:test";
import type { CoreV1Event, V1Pod } from "@kubernetes/client-node";
import { Store, type EventHandler } from "../../src/runtime/informer/index.js";
import { waitFor } from "../../src/util/wait.js";
import { ShadowRecyclerPods } from "../../src/shadow/recycler-pods.js";
import { recycleVolumeByWatchingPodUntilCompletion, type RecyclerPodApi } from "../../src/volume/recycler.js";

/** Counts its reads: how often the recycler polled. */
class CountingStore extends Store<V1Pod> {
  reads = 0;
  override get(key: string): V1Pod | undefined {
    this.reads++;
    return super.get(key);
  }
}

/** The pod informer as upstream's recycler pod goes through it. */
class PodInformer {
  readonly store = new CountingStore();
  readonly #handlers: EventHandler<V1Pod>[] = [];
  addEventHandler(h: EventHandler<V1Pod>) {
    this.#handlers.push(h);
    return { hasSynced: () => true, remove: () => undefined };
  }
  upsert(pod: V1Pod): void {
    this.store.upsert(pod);
  }
  delete(pod: V1Pod): void {
    this.store.delete(`${pod.metadata?.namespace ?? ""}/${pod.metadata?.name ?? ""}`);
    for (const h of this.#handlers) h.onDelete?.(pod, { finalStateUnknown: false });
  }
}

/** The shadow client's pod API: writes answered as the recorder answers them; events of upstream's pods. */
class RecordedWrites implements RecyclerPodApi {
  readonly calls: string[] = [];
  readonly events = new Map<string, CoreV1Event[]>();
  createNamespacedPod({ body }: { namespace: string; body: V1Pod }): Promise<V1Pod> {
    this.calls.push(`create ${body.metadata?.name ?? ""}`);
    return Promise.resolve({ ...body, metadata: { ...body.metadata, uid: "recorded-uid" } });
  }
  readNamespacedPod(): Promise<V1Pod> {
    throw new Error("the shadow reads recycler pods from the informer");
  }
  deleteNamespacedPod({ name }: { name: string; namespace: string }): Promise<V1Pod> {
    this.calls.push(`delete ${name}`);
    return Promise.resolve({});
  }
  listNamespacedEvent({ fieldSelector }: { namespace: string; fieldSelector?: string }) {
    this.calls.push(`events ${fieldSelector ?? ""}`);
    const uid = /involvedObject\.uid=([^,]*)/.exec(fieldSelector ?? "")?.[1] ?? "";
    return Promise.resolve({ items: this.events.get(uid) ?? [] });
  }
}

function upstreamPod(uid: string, phase: string): V1Pod {
  return { metadata: { name: "recycler-for-pv-1", namespace: "default", uid }, status: { phase } };
}

function recycle(pods: RecyclerPodApi, forwarded: string[] = []) {
  const template: V1Pod = {
    metadata: { namespace: "default" },
    spec: { containers: [], volumes: [{ name: "vol" }] },
  };
  return recycleVolumeByWatchingPodUntilCompletion(
    "pv-1",
    template,
    pods,
    (type, message) => forwarded.push(`${type} ${message}`),
    {
      timeoutMs: 5000,
      intervalMs: 1,
    },
  );
}

describe("shadow mode's recycler pods", () => {
  test("kvc's recycle follows upstream's pod to its end and forwards that pod's events", async () => {
    const informer = new PodInformer();
    const writes = new RecordedWrites();
    writes.events.set("kcm-uid", [
      { metadata: { uid: "e1" }, involvedObject: {}, type: "Normal", message: "Started" },
    ]);
    const pods = new ShadowRecyclerPods(writes, informer);
    const forwarded: string[] = [];
    const done = recycle(pods, forwarded);
    // kvc's own pod never exists: until upstream's appears, the recycle waits.
    informer.upsert(upstreamPod("kcm-uid", "Running"));
    informer.upsert(upstreamPod("kcm-uid", "Succeeded"));
    await done;
    assert.deepEqual(forwarded, ["Normal Started"]);
    assert.equal(writes.calls[0], "create recycler-for-pv-1");
    assert.equal(writes.calls.at(-1), "delete recycler-for-pv-1");
    assert.ok(
      !writes.calls.some((c) => c.includes("recorded-uid")),
      "events of kvc's pod, which never existed",
    );
  });

  test("upstream's pod deleted before kvc looked still gives its outcome, once", async () => {
    const informer = new PodInformer();
    const writes = new RecordedWrites();
    const pods = new ShadowRecyclerPods(writes, informer);
    informer.upsert(upstreamPod("kcm-1", "Failed"));
    informer.delete(upstreamPod("kcm-1", "Failed"));
    await assert.rejects(recycle(pods), /failed to recycle volume: pod failed/);
    // The volume recycled again: the judged pod is not taken for the new one, which is waited for.
    const reads = informer.store.reads;
    const again = recycle(pods);
    await waitFor(() => informer.store.reads >= reads + 6, { timeoutMs: 5000, intervalMs: 1, what: "polls" });
    informer.upsert(upstreamPod("kcm-2", "Succeeded"));
    await again;
  });

  test("a pod from before the shadow started is a leftover: kvc fails as upstream does, then follows the next", async () => {
    const informer = new PodInformer();
    const writes = new RecordedWrites();
    const pods = new ShadowRecyclerPods(writes, informer);
    const leftover = upstreamPod("old", "Pending");
    leftover.metadata = { ...leftover.metadata, creationTimestamp: new Date(0) };
    informer.upsert(leftover);
    await assert.rejects(recycle(pods), /old recycler pod found/);
    assert.deepEqual(
      writes.calls,
      ["delete recycler-for-pv-1"],
      "no pod created: upstream's create met the old one",
    );
    // Upstream deleted the old pod and created its next one, which the next attempt follows.
    informer.delete(leftover);
    informer.upsert(upstreamPod("kcm-2", "Succeeded"));
    await recycle(pods);
  });

  test("upstream retried its failed recycle with a new pod: kvc's attempt is the first one's twin", async () => {
    const informer = new PodInformer();
    const pods = new ShadowRecyclerPods(new RecordedWrites(), informer);
    informer.upsert(upstreamPod("kcm-1", "Pending"));
    const done = recycle(pods);
    await waitFor(() => informer.store.reads >= 4, { timeoutMs: 5000, intervalMs: 1, what: "polls" });
    informer.upsert(upstreamPod("kcm-1", "Failed"));
    informer.delete(upstreamPod("kcm-1", "Failed"));
    informer.upsert(upstreamPod("kcm-2", "Pending"));
    await assert.rejects(done, /failed to recycle volume: pod failed/);
  });
});
