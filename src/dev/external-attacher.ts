import {
  CoreV1Api,
  StorageV1Api,
  type KubeConfig,
  type V1ObjectMeta,
  type V1PersistentVolume,
  type V1VolumeAttachment,
} from "@kubernetes/client-node";
import { isNotFound } from "../runtime/api-errors.js";
import { InformerFactory } from "../runtime/informer/index.js";
import type { LogSink } from "../runtime/logger.js";
import { newRateLimitingQueue, runWorkers } from "../runtime/workqueue/index.js";
import { mergePatch } from "../runtime/client.js";

/**
 * kubernetes-csi/external-attacher's finalizer (GetFinalizerName): `external-attacher/` + the driver
 * with every character but letters, digits and "-" as "-", and an "X" after a trailing "-".
 */
export function attacherFinalizer(driver: string): string {
  const name = driver.replace(/[^a-zA-Z0-9-]/g, "-");
  return `external-attacher/${name.endsWith("-") ? `${name}X` : name}`;
}

export interface ExternalAttacherOptions {
  kubeConfig: KubeConfig;
  /** The CSI drivers it answers for (VolumeAttachment spec.attacher). */
  drivers: readonly string[];
  log: LogSink;
  signal: AbortSignal;
}

/** Queue keys: the two kinds of object the real sidecar has a queue for each. */
const VA = "va/";
const PV = "pv/";

/**
 * A stand-in for a CSI driver's external-attacher, for `kvc dev` and tests on the embedded control
 * plane where no driver runs. Not a product feature: it "attaches" every VolumeAttachment of its
 * drivers at once, the way the real sidecar (pkg/controller/csi_handler.go) reports a successful
 * ControllerPublish: its finalizer on the PV first (so the PV cannot go away while attached: nothing
 * could detach it then), on the VolumeAttachment next, then status.attached. It refuses a PV marked for
 * deletion (status.attachError). On deletion of a VolumeAttachment it removes its finalizer so the
 * object goes away, and from a PV being deleted once no VolumeAttachment names it.
 */
export function startExternalAttacher(options: ExternalAttacherOptions): { stop(): Promise<void> } {
  const { drivers, log } = options;
  const core = options.kubeConfig.makeApiClient(CoreV1Api);
  const storage = options.kubeConfig.makeApiClient(StorageV1Api);
  const informers = new InformerFactory({ kubeConfig: options.kubeConfig, logger: log });
  const vas = informers.volumeAttachments();
  const pvs = informers.persistentVolumes();
  const finalizers = drivers.map(attacherFinalizer);
  const queue = newRateLimitingQueue({ name: "stand-in-external-attacher" });
  const enqueueVA = (va: V1VolumeAttachment) => {
    if (drivers.includes(va.spec.attacher)) queue.add(VA + (va.metadata?.name ?? ""));
  };
  vas.addEventHandler({
    onAdd: enqueueVA,
    onUpdate: (_, va) => {
      enqueueVA(va);
    },
    // The PV may be waiting for its last VolumeAttachment to go.
    onDelete: (va) => {
      const pv = va.spec.source.persistentVolumeName;
      if (drivers.includes(va.spec.attacher) && pv) queue.add(PV + pv);
    },
  });
  const enqueuePV = (pv: V1PersistentVolume) => {
    if (pv.metadata?.finalizers?.some((f) => finalizers.includes(f)))
      queue.add(PV + (pv.metadata.name ?? ""));
  };
  pvs.addEventHandler({
    onAdd: enqueuePV,
    onUpdate: (_, pv) => {
      enqueuePV(pv);
    },
  });

  /** Finalizer patches carry the resourceVersion read: a concurrent change to the list is a conflict, retried. */
  const setFinalizers = (metadata: V1ObjectMeta | undefined, list: string[]) => ({
    metadata: { resourceVersion: metadata?.resourceVersion, finalizers: list },
  });

  const syncVA = async (name: string) => {
    const va = vas.store.get(name);
    if (!va) return;
    const finalizer = attacherFinalizer(va.spec.attacher);
    const vaFinalizers = va.metadata?.finalizers ?? [];
    if (va.metadata?.deletionTimestamp) {
      if (!vaFinalizers.includes(finalizer)) return;
      await storage.patchVolumeAttachment(
        {
          name,
          body: setFinalizers(
            va.metadata,
            vaFinalizers.filter((f) => f !== finalizer),
          ),
        },
        mergePatch,
      );
      return;
    }
    if (va.status?.attached === true) return;
    const pvName = va.spec.source.persistentVolumeName;
    if (pvName !== undefined) {
      const pv = pvs.store.get(pvName);
      if (!pv) throw new Error(`PersistentVolume "${pvName}" not found`);
      if (pv.metadata?.deletionTimestamp) {
        const message = `PersistentVolume "${pvName}" is marked for deletion`;
        // Written once: the update it makes comes back here.
        if (va.status?.attachError?.message !== message) {
          await storage.patchVolumeAttachmentStatus(
            { name, body: { status: { attachError: { message, time: new Date() } } } },
            mergePatch,
          );
        }
        throw new Error(message);
      }
      const pvFinalizers = pv.metadata?.finalizers ?? [];
      if (!pvFinalizers.includes(finalizer)) {
        await core.patchPersistentVolume(
          { name: pvName, body: setFinalizers(pv.metadata, [...pvFinalizers, finalizer]) },
          mergePatch,
        );
      }
    }
    if (!vaFinalizers.includes(finalizer)) {
      await storage.patchVolumeAttachment(
        { name, body: setFinalizers(va.metadata, [...vaFinalizers, finalizer]) },
        mergePatch,
      );
    }
    await storage.patchVolumeAttachmentStatus(
      { name, body: { status: { attached: true, attachmentMetadata: { "stand-in": "true" } } } },
      mergePatch,
    );
  };

  /** upstream SyncNewOrUpdatedPersistentVolume: only a PV being deleted, once no VolumeAttachment names it. */
  const syncPV = async (name: string) => {
    const pv = pvs.store.get(name);
    if (!pv?.metadata?.deletionTimestamp) return;
    const mine = finalizers.filter((f) => pv.metadata?.finalizers?.includes(f));
    if (mine.length === 0) return;
    if (vas.store.list().some((va) => va.spec.source.persistentVolumeName === name)) return;
    await core.patchPersistentVolume(
      {
        name,
        body: setFinalizers(
          pv.metadata,
          (pv.metadata.finalizers ?? []).filter((f) => !mine.includes(f)),
        ),
      },
      mergePatch,
    );
  };

  const done = Promise.all([
    informers.start(options.signal),
    runWorkers(
      queue,
      1,
      async (key) => {
        await (key.startsWith(PV) ? syncPV(key.slice(PV.length)) : syncVA(key.slice(VA.length)));
        queue.forget(key);
      },
      options.signal,
      (key, err) => {
        if (isNotFound(err)) return; // deleted meanwhile
        log.info({ key, err }, "stand-in external-attacher: retrying");
        queue.addRateLimited(key);
      },
    ),
  ]);
  return {
    stop: async () => {
      queue.shutDown();
      await done;
    },
  };
}
