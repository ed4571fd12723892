import type { StorageV1Api, V1VolumeAttachment } from "@kubernetes/client-node";
import { errorMessage, isAlreadyExists, isNotFound } from "../../runtime/api-errors.js";
import { sleep, type Clock } from "../../runtime/clock.js";
import type { Attacher, Detacher, VolumeSpec } from "../plugin.js";
import { attachmentName } from "./attachment-name.js";
import { csiMessage, persistentSource, VOLUME_NAME_SEPARATOR } from "./source.js";

/** The VolumeAttachment calls the attacher makes; the controller's StorageV1Api fits. */
export type VolumeAttachmentApi = Pick<
  StorageV1Api,
  "createVolumeAttachment" | "readVolumeAttachment" | "deleteVolumeAttachment"
>;

/** VolumeAttachments by name: the controller's informer cache. */
export interface VolumeAttachmentLister {
  get(name: string): V1VolumeAttachment | undefined;
}

export interface CSIAttacherOptions {
  api: VolumeAttachmentApi;
  lister: VolumeAttachmentLister;
  /** False for drivers whose CSIDriver says attachRequired=false. */
  attachRequired: (driverName: string) => boolean;
  /** How long attach and detach wait for the external-attacher. */
  timeoutMs: number;
  clock: Clock;
  /**
   * Shadow mode (src/shadow): the create is sent even when the cache holds the attachment, which
   * there is KCM's: kvc's decision to attach is still what is compared (the recorder answers 409).
   */
  shadow?: boolean | undefined;
}

// Upstream's status polling: 500 ms growing 5% per check up to 7 s, plus up to 10% jitter.
const INITIAL_POLL_MS = 500;
const MAX_POLL_MS = 7_000;
const POLL_FACTOR = 1.05;
const POLL_JITTER = 0.1;

/**
 * Upstream csiAttacher, controller side: the attach/detach controller only records intent in a
 * VolumeAttachment; the driver's external-attacher does the ControllerPublish/Unpublish and reports
 * back in its status. Attach and detach therefore create or delete the object and wait for that report.
 */
export class CSIAttacher implements Attacher, Detacher {
  readonly #options: CSIAttacherOptions;

  constructor(options: CSIAttacherOptions) {
    this.#options = options;
  }

  /** Resolves to "" once status.attached: CSI has no device path, the kubelet finds the device itself. */
  async attach(spec: VolumeSpec, nodeName: string, signal?: AbortSignal): Promise<string> {
    let source;
    try {
      source = persistentSource(spec);
    } catch (err) {
      throw new Error(
        csiMessage(`attacher.Attach failed to get CSIPersistentVolumeSource: ${errorMessage(err)}`),
        { cause: err },
      );
    }
    const name = attachmentName(source.volumeHandle, source.driver, nodeName);
    const body: V1VolumeAttachment = {
      metadata: { name },
      spec: {
        attacher: source.driver,
        nodeName,
        // A migrated inline volume has no PV object: the translated spec goes in the attachment itself.
        source: spec.inlineVolumeSpecForCSIMigration
          ? { inlineVolumeSpec: spec.persistentVolume?.spec ?? {} }
          : { persistentVolumeName: spec.persistentVolume?.metadata?.name ?? "" },
      },
    };
    // Known to the cache: no write at all (upstream). Otherwise create; the name is a hash of handle,
    // driver and node, so an existing object is this very attachment.
    if (this.#options.shadow || !this.#options.lister.get(name)) {
      try {
        await this.#options.api.createVolumeAttachment({ body });
      } catch (err) {
        if (!isAlreadyExists(err)) {
          throw new Error(csiMessage(`attacher.Attach failed: ${errorMessage(err)}`), { cause: err });
        }
      }
    }
    // Waiting reads the informer cache, as upstream: polling the API would spend the client's rate
    // limit (shared with every other attach) on reads the watch delivers anyway.
    let seen = false;
    await this.#poll(
      () => {
        const attachment = this.#options.lister.get(name);
        if (!attachment) {
          // Not in the cache yet after our create; gone after we saw it means someone deleted it.
          if (seen) throw new Error("volume attachment has been deleted");
          return false;
        }
        seen = true;
        return attachmentSucceeded(attachment);
      },
      `timed out waiting for external-attacher of ${source.driver} CSI driver to attach volume ${source.volumeHandle}`,
      signal,
    );
    return "";
  }

  /**
   * Deletes the VolumeAttachment and resolves once it is gone: the external-attacher's finalizer
   * holds it until ControllerUnpublish succeeded. A detachError it reports fails the detach.
   */
  async detach(volumeName: string, nodeName: string, signal?: AbortSignal): Promise<void> {
    if (volumeName === "") throw new Error("missing expected parameter volumeName");
    const parts = volumeName.split(VOLUME_NAME_SEPARATOR);
    const [driverName, volumeHandle] = parts;
    if (parts.length !== 2 || driverName === undefined || volumeHandle === undefined) {
      throw new Error("volumeName missing expected data");
    }
    const name = attachmentName(volumeHandle, driverName, nodeName);
    try {
      await this.#options.api.deleteVolumeAttachment({ name });
    } catch (err) {
      if (isNotFound(err)) return;
      throw new Error(
        csiMessage(`detacher.Detach failed to delete VolumeAttachment [${name}]: ${errorMessage(err)}`),
        { cause: err },
      );
    }
    await this.#poll(
      () => {
        const attachment = this.#options.lister.get(name);
        if (!attachment) return true;
        const detachError = attachment.status?.detachError;
        if (detachError) throw new Error(detachError.message ?? "");
        return false;
      },
      // Upstream names the driver "unknown" here (it has no spec on detach); the volume name has it.
      `timed out waiting for external-attacher of ${driverName} CSI driver to detach volume ${volumeHandle}`,
      signal,
    );
  }

  /**
   * Reads each volume's VolumeAttachment. Volumes of drivers needing no attach count as attached;
   * any failure to read counts as not attached, as upstream.
   */
  async volumesAreAttached(
    specs: readonly VolumeSpec[],
    nodeName: string,
  ): Promise<Map<VolumeSpec, boolean>> {
    const entries = await Promise.all(
      specs.map(async (spec): Promise<[VolumeSpec, boolean]> => {
        let source;
        try {
          source = persistentSource(spec);
        } catch {
          return [spec, false];
        }
        if (!this.#options.attachRequired(source.driver)) return [spec, true];
        const name = attachmentName(source.volumeHandle, source.driver, nodeName);
        try {
          // The cache first; the API only for what it does not hold (upstream).
          const attachment =
            this.#options.lister.get(name) ?? (await this.#options.api.readVolumeAttachment({ name }));
          return [spec, attachment.status?.attached === true];
        } catch {
          return [spec, false];
        }
      }),
    );
    return new Map(entries);
  }

  /** Runs `done` at once and then with upstream's backoff until it is true, throws or time runs out. */
  async #poll(done: () => boolean, timeoutMessage: string, signal?: AbortSignal): Promise<void> {
    const { clock, timeoutMs } = this.#options;
    const deadline = clock.now() + timeoutMs;
    let intervalMs = INITIAL_POLL_MS;
    for (;;) {
      signal?.throwIfAborted();
      if (done()) return;
      const remainingMs = deadline - clock.now();
      if (remainingMs <= 0) throw new Error(timeoutMessage);
      await sleep(clock, Math.min(remainingMs, intervalMs * (1 + POLL_JITTER * Math.random())), signal);
      intervalMs = Math.min(intervalMs * POLL_FACTOR, MAX_POLL_MS);
    }
  }
}

/**
 * Upstream verifyAttachmentStatus: true when attached, throws when the attachment is going away or the
 * external-attacher reported an error (its message verbatim: it is the driver's own explanation).
 */
function attachmentSucceeded(attachment: V1VolumeAttachment): boolean {
  if (attachment.metadata?.deletionTimestamp) throw new Error("volume attachment is being deleted");
  if (attachment.status?.attached) return true;
  const attachError = attachment.status?.attachError;
  if (attachError) throw new Error(attachError.message ?? "");
  return false;
}
