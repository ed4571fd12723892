import type { CoreV1Api, V1PersistentVolume, V1Pod, V1Volume } from "@kubernetes/client-node";
import { errorMessage, isAlreadyExists, isNotFound } from "../runtime/api-errors.js";
import { waitFor } from "../util/wait.js";
import { quantityValue, tryParseQuantity, ZERO_QUANTITY } from "../util/quantity.js";
import type { RecycleEventRecorder } from "./plugin.js";
import { deepCopy } from "../util/deep-copy.js";

/** The pod API a recycler needs; CoreV1Api in production, a fake in tests. */
export type RecyclerPodApi = Pick<
  CoreV1Api,
  "createNamespacedPod" | "readNamespacedPod" | "deleteNamespacedPod" | "listNamespacedEvent"
>;

/**
 * Upstream NewPersistentVolumeRecyclerPodTemplate: deletes everything under /scrub and checks it is
 * empty. Plugins replace spec.volumes[0]'s source with the volume and set activeDeadlineSeconds.
 */
export function newRecyclerPodTemplate(): V1Pod {
  return {
    metadata: { generateName: "pv-recycler-", namespace: "default" },
    spec: {
      activeDeadlineSeconds: 60,
      restartPolicy: "Never",
      volumes: [{ name: "vol" }],
      containers: [
        {
          name: "pv-recycler",
          image: "registry.k8s.io/build-image/debian-base:bookworm-v1.0.6",
          command: ["/bin/sh"],
          args: [
            "-c",
            'test -e /scrub && find /scrub -mindepth 1 -delete && test -z "$(ls -A /scrub)" || exit 1',
          ],
          volumeMounts: [{ name: "vol", mountPath: "/scrub" }],
        },
      ],
    },
  };
}

/** A --pv-recycler-pod-template-filepath-* pod must have the volume the plugin overrides. */
export function validateRecyclerPodTemplate(pod: V1Pod): void {
  if (!pod.spec?.volumes?.length) throw new Error("recycler pod template does not contain any volume(s)");
}

const GI = 1n << 30n;

/**
 * Upstream CalculateTimeoutForVolume: increment × whole Gi of capacity, but at least the minimum
 * (the larger of the two, not their sum, whatever the flag help suggests).
 */
export function recyclerTimeoutSeconds(
  minimumSeconds: number,
  incrementSeconds: number,
  pv: V1PersistentVolume,
): number {
  const bytes = quantityValue(tryParseQuantity(pv.spec?.capacity?.storage) ?? ZERO_QUANTITY);
  return Math.max(minimumSeconds, Number(bytes / GI) * incrementSeconds);
}

/**
 * The kubelet counts activeDeadlineSeconds from the pod's start, so our deadline allows this much
 * more for scheduling: the pod's own DeadlineExceeded normally ends a slow scrub, and a pod that
 * never starts cannot hold the operation forever (upstream would wait without limit).
 */
export const RECYCLER_START_GRACE_MS = 60_000;

export interface RecycleOptions {
  /** How long to wait for the pod to finish before giving up. */
  timeoutMs: number;
  /** How often the pod's phase and events are read (default 1 s). */
  intervalMs?: number | undefined;
  signal?: AbortSignal;
}

/** A recycler pod's name is this and its volume's: the same in upstream, so one recycle at a time. */
export const RECYCLER_POD_PREFIX = "recycler-for-";

type Outcome = { failed: false } | { failed: true; message: string };

/**
 * Upstream RecycleVolumeByWatchingPodUntilCompletion: creates `recycler-for-<pv>` from the template,
 * waits until it succeeds or fails, forwarding its events to `recorder`, and always deletes it. A
 * pod left by an earlier attempt is deleted and the recycle fails, to be retried on a later sync
 * (it may be a forged pod meant to block recycling).
 */
export async function recycleVolumeByWatchingPodUntilCompletion(
  pvName: string,
  template: V1Pod,
  api: RecyclerPodApi,
  recorder: RecycleEventRecorder,
  { timeoutMs, intervalMs = 1000, signal }: RecycleOptions,
): Promise<void> {
  // A fixed name, so a second controller recycling the same PV gets AlreadyExists.
  const name = `${RECYCLER_POD_PREFIX}${pvName}`;
  const pod = deepCopy(template);
  const metadata = (pod.metadata ??= {});
  const namespace = (metadata.namespace ??= "default");
  metadata.name = name;
  delete metadata.generateName;

  let created: V1Pod;
  try {
    created = await api.createNamespacedPod({ namespace, body: pod });
  } catch (err) {
    if (!isAlreadyExists(err)) {
      throw new Error(`unexpected error creating recycler pod: ${errorMessage(err)}`, { cause: err });
    }
    try {
      await api.deleteNamespacedPod({ name, namespace });
    } catch (deleteErr) {
      throw new Error(`failed to delete old recycler pod ${namespace}/${name}: ${errorMessage(deleteErr)}`, {
        cause: deleteErr,
      });
    }
    throw new Error("old recycler pod found, will retry later", { cause: err });
  }

  const forwarded = new Set<string>();
  // The uid keeps events of an earlier pod with the same name out.
  const uid = created.metadata?.uid;
  const fieldSelector = `involvedObject.name=${name}` + (uid ? `,involvedObject.uid=${uid}` : "");
  const poll = async (): Promise<Outcome | undefined> => {
    const events = await api.listNamespacedEvent({ namespace, fieldSelector });
    for (const event of events.items) {
      const key = event.metadata.uid ?? event.metadata.name ?? "";
      if (forwarded.has(key)) continue;
      forwarded.add(key);
      recorder(event.type ?? "Normal", event.message ?? "");
    }
    let current: V1Pod;
    try {
      current = await api.readNamespacedPod({ name, namespace });
    } catch (err) {
      if (isNotFound(err)) return { failed: true, message: "recycler pod was deleted" };
      throw err;
    }
    switch (current.status?.phase) {
      case "Succeeded":
        return { failed: false };
      case "Failed":
        return { failed: true, message: current.status.message || "pod failed, pod.Status.Message unknown" };
      default:
        return undefined;
    }
  };

  let outcome: Outcome;
  try {
    outcome = await waitFor(poll, {
      timeoutMs,
      intervalMs,
      what: `recycler pod ${namespace}/${name} to complete`,
      ...(signal && { signal }),
    });
  } catch (err) {
    outcome = { failed: true, message: errorMessage(err) };
  }

  let deleteError: unknown;
  try {
    await api.deleteNamespacedPod({ name, namespace });
  } catch (err) {
    if (!isNotFound(err)) deleteError = err;
  }
  // The recycler's error wins; a pod left behind is deleted again by the next attempt.
  if (outcome.failed) throw new Error(`failed to recycle volume: ${outcome.message}`);
  if (deleteError !== undefined)
    throw new Error(`failed to delete recycler pod: ${errorMessage(deleteError)}`, { cause: deleteError });
}

export interface PodRecyclerOptions {
  /** Runs the recycler pod. */
  pods: RecyclerPodApi;
  /** --pv-recycler-minimum-timeout-<plugin>, seconds. */
  minimumTimeoutSeconds: number;
  /** --pv-recycler-{timeout-increment,increment-timeout}-<plugin>, seconds per Gi. */
  timeoutIncrementSeconds: number;
  /** --pv-recycler-pod-template-filepath-<plugin>'s pod (default newRecyclerPodTemplate()). */
  podTemplate?: V1Pod | undefined;
  /** How often the recycler pod is polled (default 1 s). */
  pollIntervalMs?: number | undefined;
}

/** A volume source for the recycler pod's first volume, e.g. `{ nfs: { server, path } }`. */
export type RecyclerVolumeSource = Omit<V1Volume, "name">;

/**
 * The recycling every recyclable in-tree plugin does (upstream hostpath's and nfs's Recycle): the
 * template with the PV's storage as its first volume and activeDeadlineSeconds sized to the PV, run
 * by recycleVolumeByWatchingPodUntilCompletion.
 */
export class PodRecycler {
  readonly #o: PodRecyclerOptions;
  readonly #template: V1Pod;

  /** Throws when the template has no volume to replace. */
  constructor(options: PodRecyclerOptions) {
    this.#o = options;
    this.#template = options.podTemplate ?? newRecyclerPodTemplate();
    validateRecyclerPodTemplate(this.#template);
  }

  async recycle(
    pvName: string,
    pv: V1PersistentVolume,
    source: RecyclerVolumeSource,
    recorder: RecycleEventRecorder,
    signal?: AbortSignal,
  ): Promise<void> {
    const pod = this.#recyclerPod(pv, source);
    const timeoutMs = (pod.spec?.activeDeadlineSeconds ?? 0) * 1000 + RECYCLER_START_GRACE_MS;
    await recycleVolumeByWatchingPodUntilCompletion(pvName, pod, this.#o.pods, recorder, {
      timeoutMs,
      intervalMs: this.#o.pollIntervalMs,
      ...(signal && { signal }),
    });
  }

  /** The template (not modified) with `source` as its first volume and a deadline sized to the PV. */
  #recyclerPod(pv: V1PersistentVolume, source: RecyclerVolumeSource): V1Pod {
    const pod = deepCopy(this.#template);
    const spec = pod.spec ?? { containers: [] };
    const [first, ...rest] = spec.volumes ?? [];
    spec.volumes = [{ name: first?.name ?? "vol", ...source }, ...rest];
    spec.activeDeadlineSeconds = recyclerTimeoutSeconds(
      this.#o.minimumTimeoutSeconds,
      this.#o.timeoutIncrementSeconds,
      pv,
    );
    pod.spec = spec;
    return pod;
  }
}
