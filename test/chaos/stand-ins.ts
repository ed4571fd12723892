import { CoreV1Api, type KubeConfig, type V1PersistentVolume } from "@kubernetes/client-node";
import { isAlreadyExists, isNotFound } from "../../src/runtime/api-errors.js";
import { realClock } from "../../src/runtime/clock.js";
import { until } from "../../src/util/wait.js";
import { keyOf, type World } from "./history.js";
import { uniqueVolumeName } from "./invariants.js";
import { mergePatch } from "../../src/runtime/client.js";

/*
 * The cluster parts kvc works with that the embedded control plane lacks, played from the recorder's
 * watch caches: a kubelet per node and a CSI external-provisioner. (The external-attacher is
 * src/dev/external-attacher.ts.) Each is a loop that reconciles every `intervalMs`.
 */

export const CSI_DRIVER = "chaos.csi.example.com";
export const PROVISIONER = CSI_DRIVER;
const ANN_PROVISIONER = "volume.kubernetes.io/storage-provisioner";
const ANN_SELECTED_NODE = "volume.kubernetes.io/selected-node";

/** Runs `step` every `intervalMs` until `signal` aborts; a failed step is retried on the next tick. */
function loop(step: () => Promise<void>, intervalMs: number, signal: AbortSignal): Promise<void> {
  return until(() => step().catch(() => {}), intervalMs, { clock: realClock, signal });
}

/**
 * A kubelet for every node: a volume is in use (status.volumesInUse) once a pod on the node uses it,
 * the node's status reports it attached and its VolumeAttachment is attached, and stays in use until
 * no pod on the node uses it; recycler pods run to completion.
 */
export function runKubelets(
  kc: KubeConfig,
  world: World,
  signal: AbortSignal,
  intervalMs = 200,
): Promise<void> {
  const core = kc.makeApiClient(CoreV1Api);
  return loop(
    async () => {
      for (const node of world.Node.values()) {
        const name = node.metadata?.name ?? "";
        const wanted = new Set<string>();
        const mountable = new Set<string>();
        for (const pod of world.Pod.values()) {
          if (pod.spec?.nodeName !== name || pod.metadata?.deletionTimestamp) continue;
          for (const v of pod.spec.volumes ?? []) {
            const claim = world.PersistentVolumeClaim.get(
              `${pod.metadata?.namespace}/${v.persistentVolumeClaim?.claimName}`,
            );
            const pv = world.PersistentVolume.get(claim?.spec?.volumeName ?? "");
            const unique = pv && uniqueVolumeName(pv);
            if (!pv || !unique) continue;
            wanted.add(unique);
            const va = [...world.VolumeAttachment.values()].find(
              (x) => x.spec.nodeName === name && x.spec.source.persistentVolumeName === pv.metadata?.name,
            );
            // As the kubelet's VerifyControllerAttachedVolume: the controller reports it attached to
            // this node, and the CSI attachment is done.
            const reported = (node.status?.volumesAttached ?? []).some((a) => a.name === unique);
            if (reported && va?.status?.attached && !va.metadata?.deletionTimestamp) mountable.add(unique);
          }
        }
        const current = node.status?.volumesInUse ?? [];
        const next = [...new Set([...current.filter((u) => wanted.has(u)), ...mountable])].sort();
        if (JSON.stringify(next) === JSON.stringify([...current].sort())) continue;
        // With the resourceVersion it decided on: a controller that removed the volume from
        // volumesAttached since (before it detaches) makes this a conflict, retried on fresh state.
        await core.patchNodeStatus(
          {
            name,
            body: {
              metadata: { resourceVersion: node.metadata?.resourceVersion },
              status: { volumesInUse: next.length > 0 ? next : null },
            },
          },
          mergePatch,
        );
      }
      for (const pod of world.Pod.values()) {
        const { namespace = "", name = "" } = pod.metadata ?? {};
        if (!name.startsWith("recycler-for-") || pod.status?.phase === "Succeeded") continue;
        await core.patchNamespacedPodStatus(
          { namespace, name, body: { status: { phase: "Succeeded" } } },
          mergePatch,
        );
      }
    },
    intervalMs,
    signal,
  );
}

/**
 * A CSI external-provisioner for PROVISIONER: provisions `pvc-<claim uid>` for each of its claims
 * (a WaitForFirstConsumer one once the scheduler picked a node), and deletes a Released volume of its
 * own whose policy is Delete.
 */
export function runExternalProvisioner(
  kc: KubeConfig,
  world: World,
  signal: AbortSignal,
  intervalMs = 200,
): Promise<void> {
  const core = kc.makeApiClient(CoreV1Api);
  return loop(
    async () => {
      for (const c of world.PersistentVolumeClaim.values()) {
        const ann = c.metadata?.annotations ?? {};
        if (ann[ANN_PROVISIONER] !== PROVISIONER || c.spec?.volumeName || c.metadata?.deletionTimestamp)
          continue;
        const wffc = c.spec?.storageClassName?.endsWith("-wffc");
        if (wffc && !ann[ANN_SELECTED_NODE]) continue;
        const name = `pvc-${c.metadata?.uid}`;
        if (world.PersistentVolume.has(name)) continue;
        const pv: V1PersistentVolume = {
          metadata: { name, annotations: { "pv.kubernetes.io/provisioned-by": PROVISIONER } },
          spec: {
            capacity: { storage: c.spec?.resources?.requests?.storage ?? "1Gi" },
            accessModes: c.spec?.accessModes ?? ["ReadWriteOnce"],
            persistentVolumeReclaimPolicy: "Delete",
            storageClassName: c.spec?.storageClassName ?? "",
            claimRef: {
              kind: "PersistentVolumeClaim",
              namespace: c.metadata?.namespace ?? "",
              name: c.metadata?.name ?? "",
              uid: c.metadata?.uid ?? "",
            },
            csi: { driver: CSI_DRIVER, volumeHandle: name },
          },
        };
        try {
          await core.createPersistentVolume({ body: pv });
        } catch (err) {
          if (!isAlreadyExists(err)) throw err;
        }
      }
      for (const pv of world.PersistentVolume.values()) {
        const mine = pv.metadata?.annotations?.["pv.kubernetes.io/provisioned-by"] === PROVISIONER;
        if (!mine || pv.status?.phase !== "Released" || pv.spec?.persistentVolumeReclaimPolicy !== "Delete")
          continue;
        try {
          await core.deletePersistentVolume({ name: keyOf(pv) });
        } catch (err) {
          if (!isNotFound(err)) throw err;
        }
      }
    },
    intervalMs,
    signal,
  );
}
