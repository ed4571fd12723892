import {
  PatchStrategy,
  setHeaderOptions,
  StorageV1Api,
  type KubeConfig,
  type V1VolumeAttachment,
} from "@kubernetes/client-node";
import { isNotFound } from "../runtime/api-errors.js";
import { InformerFactory } from "../runtime/informer/index.js";
import type { LogSink } from "../runtime/logger.js";
import { newRateLimitingQueue, runWorkers } from "../runtime/workqueue/index.js";

const mergePatch = setHeaderOptions("Content-Type", PatchStrategy.MergePatch);

/** kubernetes-csi/external-attacher's finalizer: `external-attacher/` + the driver, non-alphanumerics as "-". */
export function attacherFinalizer(driver: string): string {
  return `external-attacher/${driver.replace(/[^a-zA-Z0-9]/g, "-")}`;
}

export interface ExternalAttacherOptions {
  kubeConfig: KubeConfig;
  /** The CSI drivers it answers for (VolumeAttachment spec.attacher). */
  drivers: readonly string[];
  log: LogSink;
  signal: AbortSignal;
}

/**
 * A stand-in for a CSI driver's external-attacher, for `kvc dev` and tests on the embedded control
 * plane where no driver runs. Not a product feature: it "attaches" every VolumeAttachment of its
 * drivers at once, the way the real sidecar reports a successful ControllerPublish (finalizer first,
 * then status.attached), and on deletion removes its finalizer so the object goes away.
 */
export function startExternalAttacher(options: ExternalAttacherOptions): { stop(): Promise<void> } {
  const { drivers, log } = options;
  const storage = options.kubeConfig.makeApiClient(StorageV1Api);
  const informers = new InformerFactory({ kubeConfig: options.kubeConfig, logger: log });
  const vas = informers.volumeAttachments();
  const queue = newRateLimitingQueue({ name: "stand-in-external-attacher" });
  const enqueue = (va: V1VolumeAttachment) => {
    if (drivers.includes(va.spec.attacher)) queue.add(va.metadata?.name ?? "");
  };
  vas.addEventHandler({
    onAdd: enqueue,
    onUpdate: (_, va) => {
      enqueue(va);
    },
  });

  const sync = async (name: string) => {
    const va = vas.store.get(name);
    if (!va) return;
    const finalizer = attacherFinalizer(va.spec.attacher);
    const finalizers = va.metadata?.finalizers ?? [];
    if (va.metadata?.deletionTimestamp) {
      if (!finalizers.includes(finalizer)) return;
      await storage.patchVolumeAttachment(
        { name, body: { metadata: { finalizers: finalizers.filter((f) => f !== finalizer) } } },
        mergePatch,
      );
      return;
    }
    if (!finalizers.includes(finalizer)) {
      await storage.patchVolumeAttachment(
        { name, body: { metadata: { finalizers: [...finalizers, finalizer] } } },
        mergePatch,
      );
    }
    if (va.status?.attached !== true) {
      await storage.patchVolumeAttachmentStatus(
        { name, body: { status: { attached: true, attachmentMetadata: { "stand-in": "true" } } } },
        mergePatch,
      );
    }
  };

  const done = Promise.all([
    informers.start(options.signal),
    runWorkers(
      queue,
      1,
      async (name) => {
        await sync(name);
        queue.forget(name);
      },
      options.signal,
      (name, err) => {
        if (isNotFound(err)) return; // deleted meanwhile
        log.info({ va: name, err }, "stand-in external-attacher: retrying");
        queue.addRateLimited(name);
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
