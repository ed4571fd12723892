import {
  CoreV1Api,
  StorageV1Api,
  type KubeConfig,
  type V1PersistentVolumeClaim,
} from "@kubernetes/client-node";
import { isNotFound } from "../../src/runtime/api-errors.js";
import { waitFor } from "../../src/util/wait.js";
import { mergePatch } from "../../src/runtime/client.js";

/**
 * The end-to-end scenarios, cluster-agnostic: a kubeconfig and a description of the cluster's storage
 * in, a result per scenario out. `run-kind.sh` runs them on a kind cluster whose KCM loops are off;
 * test/integration/e2e-embedded.test.ts runs the very same code on the embedded control plane.
 */
export interface E2EConfig {
  kubeConfig: KubeConfig;
  /** Created if missing; every object of a run carries a unique suffix. */
  namespace: string;
  /** A class that provisions dynamically with WaitForFirstConsumer and reclaim Delete (kind: "standard"). */
  wffcClass: string;
  /**
   * Set where no kube-scheduler runs (the embedded control plane): the suite then plays the scheduler,
   * setting the pod's node and the claim's selected-node annotation as kube-scheduler would.
   */
  scheduleOnto?: string | undefined;
  /** A class whose CSI driver requires attach (kind: the csi-hostpath driver's "csi-hostpath-sc"). */
  csiClass: string;
  /** A real kubelet runs pods (else nothing does, and pods are deleted at once). */
  kubelet?: boolean | undefined;
  /** The image of pods that only hold a volume (default: registry.k8s.io/pause:3.10). */
  podImage?: string | undefined;
  /**
   * Where a real kubelet mounts volumes: an image with `sh` (busybox). Adds the scenario in which a
   * pod writes into a provisioned CSI volume and a second pod reads the data back.
   */
  dataImage?: string | undefined;
  /** Asks the CSI driver whether it still has a volume (by handle): Delete reclaim must remove it. */
  driverHasVolume?: ((volumeHandle: string) => Promise<boolean>) | undefined;
  /** The field manager that must have created the VolumeAttachments (which controller attached). */
  attachedBy?: string | undefined;
  timeoutMs?: number;
}

export interface ScenarioResult {
  name: string;
  passed: boolean;
  ms: number;
  error?: string;
}

export async function runScenarios(config: E2EConfig): Promise<ScenarioResult[]> {
  const core = config.kubeConfig.makeApiClient(CoreV1Api);
  const storage = config.kubeConfig.makeApiClient(StorageV1Api);
  const ns = config.namespace;
  const timeoutMs = config.timeoutMs ?? 180_000;
  const suffix = Date.now().toString(36);
  try {
    await core.createNamespace({ body: { metadata: { name: ns } } });
  } catch {
    // exists
  }

  const claim = (name: string, storageClassName: string, size = "1Gi"): Promise<V1PersistentVolumeClaim> =>
    core.createNamespacedPersistentVolumeClaim({
      namespace: ns,
      body: {
        metadata: { name },
        spec: {
          accessModes: ["ReadWriteOnce"],
          storageClassName,
          resources: { requests: { storage: size } },
        },
      },
    });
  const phase = async (name: string) =>
    (await core.readNamespacedPersistentVolumeClaim({ namespace: ns, name })).status?.phase;
  const bound = (name: string) =>
    waitFor(
      async () => {
        const c = await core.readNamespacedPersistentVolumeClaim({ namespace: ns, name });
        return c.status?.phase === "Bound" ? c : undefined;
      },
      { timeoutMs, what: `claim ${name} to be Bound` },
    );
  const gone = (what: string, read: () => Promise<unknown>) =>
    waitFor(
      async () => {
        try {
          await read();
          return false;
        } catch (err) {
          if (isNotFound(err)) return true;
          throw err;
        }
      },
      { timeoutMs, what: `${what} to be deleted` },
    );
  /** A pod using the claim; where no scheduler runs, placed as kube-scheduler would place it. */
  const podUsing = async (name: string, claimName: string) => {
    if (config.scheduleOnto) {
      await core.patchNamespacedPersistentVolumeClaim(
        {
          namespace: ns,
          name: claimName,
          body: { metadata: { annotations: { "volume.kubernetes.io/selected-node": config.scheduleOnto } } },
        },
        mergePatch,
      );
    }
    await core.createNamespacedPod({
      namespace: ns,
      body: {
        metadata: { name },
        spec: {
          ...(config.scheduleOnto && { nodeName: config.scheduleOnto }),
          // Mounted, not only listed: a kubelet mounts only the volumes a container uses.
          containers: [
            {
              name: "c",
              image: config.podImage ?? "registry.k8s.io/pause:3.10",
              volumeMounts: [{ name: "data", mountPath: "/data" }],
            },
          ],
          volumes: [{ name: "data", persistentVolumeClaim: { claimName } }],
        },
      },
    });
  };
  const deletePod = async (name: string) => {
    // Gracefully where a kubelet runs: it removes the pod object only once its volumes are unmounted.
    // A forced deletion lets PVC protection release a claim still mounted, and the driver then deletes
    // a volume the kubelet can no longer unmount (NodeUnpublish: NotFound, retried forever).
    await core.deleteNamespacedPod({
      namespace: ns,
      name,
      ...(!config.kubelet && { gracePeriodSeconds: 0 }),
    });
    await gone(`pod ${name}`, () => core.readNamespacedPod({ namespace: ns, name }));
  };

  const scenarios: [string, () => Promise<void>][] = [
    [
      "static binding picks the smallest Available PV that fits",
      async () => {
        const cls = `e2e-static-${suffix}`;
        for (const [name, size] of [
          [`e2e-small-${suffix}`, "1Gi"],
          [`e2e-fit-${suffix}`, "2Gi"],
          [`e2e-large-${suffix}`, "10Gi"],
        ] as const) {
          await core.createPersistentVolume({
            body: {
              metadata: { name },
              spec: {
                capacity: { storage: size },
                accessModes: ["ReadWriteOnce"],
                storageClassName: cls,
                persistentVolumeReclaimPolicy: "Retain",
                hostPath: { path: `/tmp/${name}` },
              },
            },
          });
        }
        await claim(`static-${suffix}`, cls, "2Gi");
        const c = await bound(`static-${suffix}`);
        if (c.spec?.volumeName !== `e2e-fit-${suffix}`) {
          throw new Error(`bound to ${c.spec?.volumeName}, want e2e-fit-${suffix}`);
        }
        await core.deleteNamespacedPersistentVolumeClaim({ namespace: ns, name: `static-${suffix}` });
        for (const n of ["small", "fit", "large"])
          await core.deletePersistentVolume({ name: `e2e-${n}-${suffix}` });
      },
    ],
    [
      "WaitForFirstConsumer: provisioned only once a pod is scheduled; Delete reclaim removes the PV",
      async () => {
        const name = `wffc-${suffix}`;
        await claim(name, config.wffcClass);
        await waitFor(
          async () =>
            (
              await core.listNamespacedEvent({
                namespace: ns,
                fieldSelector: `involvedObject.name=${name},reason=WaitForFirstConsumer`,
              })
            ).items.length > 0,
          { timeoutMs, what: "the WaitForFirstConsumer event" },
        );
        if ((await phase(name)) !== "Pending") throw new Error("bound before any consumer");
        await podUsing(`wffc-pod-${suffix}`, name);
        const c = await bound(name);
        const pv = c.spec?.volumeName ?? "";
        await deletePod(`wffc-pod-${suffix}`);
        await core.deleteNamespacedPersistentVolumeClaim({ namespace: ns, name });
        await gone(`PV ${pv}`, () => core.readPersistentVolume({ name: pv }));
      },
    ],
    [
      "a pod's CSI volume is attached through a VolumeAttachment and detached when the pod goes",
      async () => {
        const name = `csi-${suffix}`;
        await claim(name, config.csiClass);
        await podUsing(`csi-pod-${suffix}`, name);
        const c = await bound(name);
        const pv = c.spec?.volumeName ?? "";
        const attachmentFor = async () =>
          (await storage.listVolumeAttachment()).items.find(
            (va) => va.spec.source.persistentVolumeName === pv,
          );
        const va = await waitFor(
          async () => ((await attachmentFor())?.status?.attached ? await attachmentFor() : undefined),
          {
            timeoutMs,
            what: `the VolumeAttachment of ${pv} to be attached`,
          },
        );
        // Who wrote the spec (the external-attacher writes the status and a finalizer).
        const creator = va.metadata?.managedFields?.find(
          (f) => (f.fieldsV1 as Record<string, unknown> | undefined)?.["f:spec"],
        )?.manager;
        if (config.attachedBy && creator !== config.attachedBy) {
          throw new Error(
            `VolumeAttachment ${va.metadata?.name}'s spec written by ${creator}, want ${config.attachedBy}`,
          );
        }
        await deletePod(`csi-pod-${suffix}`);
        await gone(`VolumeAttachment ${va.metadata?.name}`, () =>
          storage.readVolumeAttachment({ name: va.metadata?.name ?? "" }),
        );
        const spec = (await core.readPersistentVolume({ name: pv })).spec;
        const handle = spec?.csi?.volumeHandle ?? "";
        const hasVolume = config.driverHasVolume;
        if (hasVolume && !(await hasVolume(handle))) throw new Error(`the driver has no volume ${handle}`);
        await core.deleteNamespacedPersistentVolumeClaim({ namespace: ns, name });
        // A provisioned volume (reclaim Delete) goes, from the API and from the driver; a static one
        // (the embedded suite's, Retain) stays Released.
        if (spec?.persistentVolumeReclaimPolicy !== "Delete") return;
        await gone(`PV ${pv}`, () => core.readPersistentVolume({ name: pv }));
        if (hasVolume) {
          await waitFor(async () => !(await hasVolume(handle)), {
            timeoutMs,
            what: `the driver to remove volume ${handle}`,
          });
        }
      },
    ],
  ];
  const dataImage = config.dataImage;
  if (dataImage) {
    scenarios.push([
      "a pod writes into a provisioned volume; after it is gone, a new pod reads the data back",
      async () => {
        const name = `data-${suffix}`;
        const data = `written-by-${suffix}`;
        await claim(name, config.csiClass);
        const runPod = async (pod: string, script: string) => {
          await core.createNamespacedPod({
            namespace: ns,
            body: {
              metadata: { name: pod },
              spec: {
                restartPolicy: "Never",
                containers: [
                  {
                    name: "c",
                    image: dataImage,
                    command: ["sh", "-c", script],
                    volumeMounts: [{ name: "data", mountPath: "/data" }],
                  },
                ],
                volumes: [{ name: "data", persistentVolumeClaim: { claimName: name } }],
              },
            },
          });
          const phase = await waitFor(
            async () => {
              const p = (await core.readNamespacedPod({ namespace: ns, name: pod })).status?.phase;
              return p === "Succeeded" || p === "Failed" ? p : undefined;
            },
            { timeoutMs, what: `pod ${pod} to finish` },
          );
          if (phase !== "Succeeded") throw new Error(`pod ${pod} ${phase}: ${script}`);
          await deletePod(pod);
        };
        // The volume is mounted, not a directory of the container: the writer checks it is a mount.
        await runPod(`writer-${suffix}`, `grep -q ' /data ' /proc/mounts && echo ${data} > /data/f && sync`);
        const pv = (await bound(name)).spec?.volumeName ?? "";
        await waitFor(
          async () =>
            !(await storage.listVolumeAttachment()).items.some(
              (va) => va.spec.source.persistentVolumeName === pv,
            ),
          { timeoutMs, what: `the VolumeAttachment of ${pv} to go after the writer` },
        );
        await runPod(`reader-${suffix}`, `test "$(cat /data/f)" = ${data}`);
        await core.deleteNamespacedPersistentVolumeClaim({ namespace: ns, name });
        await gone(`PV ${pv}`, () => core.readPersistentVolume({ name: pv }));
      },
    ]);
  }

  const results: ScenarioResult[] = [];
  for (const [name, run] of scenarios) {
    const started = Date.now();
    try {
      await run();
      results.push({ name, passed: true, ms: Date.now() - started });
    } catch (err) {
      results.push({ name, passed: false, ms: Date.now() - started, error: (err as Error).message });
    }
  }
  return results;
}
