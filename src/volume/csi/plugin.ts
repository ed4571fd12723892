import type { V1CSIDriver } from "@kubernetes/client-node";
import { errorMessage } from "../../runtime/api-errors.js";
import { realClock, type Clock } from "../../runtime/clock.js";
import type { Indexer } from "../../runtime/informer/store.js";
import type { AttachableVolumePlugin, Attacher, Detacher, VolumeSpec } from "../plugin.js";
import { CSIAttacher, type VolumeAttachmentApi, type VolumeAttachmentLister } from "./attacher.js";
import { CSI_PLUGIN_NAME, csiMessage, persistentSource, VOLUME_NAME_SEPARATOR } from "./source.js";

/** CSIDriver objects by name: the CSIDriver informer's cache. */
export type CSIDriverLister = Pick<Indexer<V1CSIDriver>, "get">;

export interface CSIPluginOptions {
  /** VolumeAttachment create/read/delete: the controller's StorageV1Api. */
  volumeAttachments: VolumeAttachmentApi;
  /** The VolumeAttachment informer's cache, where attach and detach wait for the external-attacher. */
  volumeAttachmentLister: VolumeAttachmentLister;
  /** Must have synced: a driver without a CSIDriver object is attached. */
  csiDrivers: CSIDriverLister;
  /** How long attach and detach wait for the external-attacher (default 2 min, upstream csiTimeout). */
  timeoutMs?: number | undefined;
  clock?: Clock | undefined;
  /** Shadow mode (src/shadow): see CSIAttacherOptions.shadow. */
  shadow?: boolean | undefined;
}

const CSI_TIMEOUT_MS = 2 * 60_000;

/**
 * Upstream pkg/volume/csi as the attach/detach controller uses it: every CSI driver is served by this
 * one plugin, which hands attaching to the driver's external-attacher through VolumeAttachments.
 */
export class CSIPlugin implements AttachableVolumePlugin {
  readonly name = CSI_PLUGIN_NAME;
  readonly #attacher: CSIAttacher;
  readonly #csiDrivers: CSIDriverLister;

  constructor(options: CSIPluginOptions) {
    this.#csiDrivers = options.csiDrivers;
    this.#attacher = new CSIAttacher({
      api: options.volumeAttachments,
      lister: options.volumeAttachmentLister,
      attachRequired: (driver) => this.#attachRequired(driver),
      timeoutMs: options.timeoutMs ?? CSI_TIMEOUT_MS,
      clock: options.clock ?? realClock,
      shadow: options.shadow,
    });
  }

  canSupport(spec: VolumeSpec): boolean {
    return spec.persistentVolume?.spec?.csi !== undefined || spec.volume?.csi !== undefined;
  }

  /** "<driver>^<volumeHandle>"; detach parses it back, having no spec. */
  getVolumeName(spec: VolumeSpec): string {
    try {
      const { driver, volumeHandle } = persistentSource(spec);
      return `${driver}${VOLUME_NAME_SEPARATOR}${volumeHandle}`;
    } catch (err) {
      throw new Error(
        csiMessage(`plugin.GetVolumeName failed to extract volume source from spec: ${errorMessage(err)}`),
        {
          cause: err,
        },
      );
    }
  }

  /** False for inline (ephemeral) CSI volumes and for drivers whose CSIDriver says attachRequired=false. */
  canAttach(spec: VolumeSpec): boolean {
    if (spec.volume?.csi) return false;
    return this.#attachRequired(persistentSource(spec).driver);
  }

  newAttacher(): Attacher {
    return this.#attacher;
  }

  newDetacher(): Detacher {
    return this.#attacher;
  }

  #attachRequired(driver: string): boolean {
    return this.#csiDrivers.get(driver)?.spec.attachRequired !== false;
  }
}
