import type { V1Node, V1Pod } from "@kubernetes/client-node";
import type { Clock } from "../runtime/clock.js";
import { errorMessage } from "../runtime/api-errors.js";
import { objectReference } from "../runtime/events/reference.js";
import type { LogSink } from "../runtime/logger.js";
import type { EventSink } from "../runtime/events/event-sink.js";
import { ExponentialBackoff } from "../util/exponential-backoff.js";
import {
  fullyQualifiedPluginName,
  isAttachable,
  PLUGIN_NAME_NOT_AVAILABLE,
  specName,
  splitUniqueVolumeName,
  type AttachableVolumePlugin,
  type VolumeSpec,
} from "../volume/plugin.js";
import type { VolumePluginManager } from "../volume/plugin-manager.js";
import type { ActualStateOfWorld, AttachedVolume } from "./cache/actual-state-of-world.js";
import type { VolumeToAttach } from "./cache/desired-state-of-world.js";

/** upstream operation names; an operation's backoff is reset when the other one runs under its key. */
export type OperationName = "volume_attach" | "volume_detach";

/** The plugin lookups the operations make; VolumePluginManager fits. */
export type ExecutorPluginFinder = Pick<
  VolumePluginManager,
  "findPluginBySpec" | "findPluginByName" | "findAttachablePluginBySpec"
>;

/** Reads a node from the apiserver, not a cache: the last check before a detach must be current. */
export interface NodeReader {
  /** Resolves undefined when the node does not exist (NotFound); rejects on any other error. */
  getNode(nodeName: string, signal?: AbortSignal): Promise<V1Node | undefined>;
}

/** storage_operation_duration_seconds. */
export interface OperationMetrics {
  /** `migrated`: the volume is an in-tree one translated to CSI (upstream getMigratedStatusBySpec). */
  operationCompleted(
    pluginName: string,
    operationName: OperationName,
    seconds: number,
    success: boolean,
    migrated: boolean,
  ): void;
}

export interface OperationExecutorOptions {
  plugins: ExecutorPluginFinder;
  asw: ActualStateOfWorld;
  nodes: NodeReader;
  events: EventSink;
  clock: Clock;
  log: LogSink;
  /** Aborts the plugins' attach/detach calls on shutdown. */
  signal?: AbortSignal;
  metrics?: OperationMetrics;
}

/**
 * Whether the volume may be attached to several nodes at once (upstream util.IsMultiAttachAllowed):
 * unknown (no spec, or a PV without access modes) counts as allowed and the attacher decides; a PV
 * only with ReadWriteMany or ReadOnlyMany. RWO and RWOP forbid it.
 */
export function isMultiAttachAllowed(spec: VolumeSpec | undefined): boolean {
  if (!spec) return true;
  if (spec.volume) return !spec.volume.azureDisk && !spec.volume.cinder;
  const modes = spec.persistentVolume.spec?.accessModes ?? [];
  if (modes.length === 0) return true;
  return modes.includes("ReadWriteMany") || modes.includes("ReadOnlyMany");
}

/**
 * upstream VolumeToAttach.GenerateMsg's simple (event) form: `<prefix> for volume "<spec name>" <suffix>`.
 * The space before an empty suffix is upstream's too.
 */
export function volumeMessage(spec: VolumeSpec | undefined, prefix: string, suffix: string): string {
  return `${prefix} for volume ${JSON.stringify(spec ? specName(spec) : "nil")} ${suffix}`;
}

/** The log form, naming the unique volume and the node. */
function detailedMessage(
  volume: { volumeName: string; volumeSpec: VolumeSpec | undefined; nodeName: string },
  prefix: string,
  suffix = "",
): string {
  const details = `(UniqueName: ${JSON.stringify(volume.volumeName)}) from node ${JSON.stringify(volume.nodeName)}`;
  const name = JSON.stringify(volume.volumeSpec ? specName(volume.volumeSpec) : "nil");
  return `${prefix} for volume ${name} ${details} ${suffix}`;
}

interface PendingOperation {
  readonly volumeName: string;
  /** "" when the operation locks the volume on every node. */
  nodeName: string;
  pending: boolean;
  operationName: OperationName;
  backoff: ExponentialBackoff;
}

/**
 * The attach/detach controller's operations (upstream operationExecutor with nestedpendingoperations,
 * controller side): at most one attach or detach in flight per volume, or per volume and node when the
 * volume allows multi-attach. The keys nest: a volume-wide key ("" node) conflicts with every key of
 * the volume, so an RWO attach never starts while a detach of the same volume known without a spec
 * (keyed per node) is running anywhere. A failed operation keeps its key in backoff (500 ms doubling
 * to 2m2s) until it succeeds.
 *
 * Operations run concurrently without a bound, as upstream's goroutines. p-queue would cap the plugin
 * calls in flight but not add safety (the keys already serialise each volume), and a cap would let slow
 * attaches (CSI waits up to 2 minutes for the external-attacher) hold back unrelated volumes while
 * still counting as pending.
 */
export class OperationExecutor {
  readonly #o: OperationExecutorOptions;
  /**
   * By volume name: every lookup names its volume, so it reads only that volume's entries. Upstream
   * keeps one slice and scans all of it, which at 10,000 pending attaches made each reconciler pass
   * quadratic (issue 30 goal 4).
   */
  readonly #operations = new Map<string, PendingOperation[]>();
  readonly #running = new Set<Promise<void>>();

  constructor(options: OperationExecutorOptions) {
    this.#o = options;
  }

  /** Whether an operation is running for the volume on the node; nodeName "" asks for any node. */
  isOperationPending(volumeName: string, nodeName: string): boolean {
    return this.#find(volumeName, nodeName)?.pending ?? false;
  }

  /** False while an operation runs for the key, or one of the same name failed within its backoff. */
  isOperationSafeToRetry(volumeName: string, nodeName: string, operationName: OperationName): boolean {
    const op = this.#find(volumeName, nodeName);
    if (!op) return true;
    if (op.pending) return false;
    return op.operationName !== operationName || op.backoff.safeToRetry(this.#o.clock.now());
  }

  /**
   * Starts attaching unless an operation for the volume is running or backing off; returns whether it
   * started. The attach records the result in the ASW (Attached, or Uncertain on failure) and the
   * pods' events, and the ASW flags the node's status for an update.
   */
  attachVolume(volume: VolumeToAttach): boolean {
    const nodeKey = isMultiAttachAllowed(volume.volumeSpec) ? volume.nodeName : "";
    let pluginName = PLUGIN_NAME_NOT_AVAILABLE;
    try {
      pluginName = fullyQualifiedPluginName(
        this.#o.plugins.findPluginBySpec(volume.volumeSpec).name,
        volume.volumeSpec,
      );
    } catch {
      // the attach itself reports the missing plugin
    }
    return this.#run(volume, nodeKey, "volume_attach", pluginName, () => this.#attach(volume));
  }

  /**
   * Resolves what detaching the volume needs (upstream GenerateDetachVolumeFunc) and returns the
   * function that starts it: with `verifySafeToDetach` the node is read first and the detach fails
   * while the node still reports the volume in use; it returns whether it started (not while an
   * operation for the volume runs or backs off). A failed detach leaves the volume Uncertain, so it is
   * neither reported attached nor forgotten.
   *
   * Throws when no plugin can detach the volume. Unlike upstream, which retries that on every
   * reconciler pass (and rewrites the node's status each time), the failure counts as a failed detach
   * of the volume's key and backs off as one: no tight loop for an attachment nothing can resolve.
   */
  prepareDetach(volume: AttachedVolume): (verifySafeToDetach: boolean) => boolean {
    const nodeKey = isMultiAttachAllowed(volume.volumeSpec) ? volume.nodeName : "";
    let plugin: AttachableVolumePlugin;
    let name: string;
    try {
      ({ plugin, name } = this.#detachablePlugin(volume));
    } catch (err) {
      this.#failedBeforeStart(volume.volumeName, nodeKey, "volume_detach");
      throw err;
    }
    const pluginName = volume.volumeSpec
      ? fullyQualifiedPluginName(plugin.name, volume.volumeSpec)
      : plugin.name;
    return (verifySafeToDetach) => {
      const detacher = plugin.newDetacher();
      return this.#run(volume, nodeKey, "volume_detach", pluginName, async () => {
        try {
          if (verifySafeToDetach) await this.#verifySafeToDetach(volume);
          await detacher.detach(name, volume.nodeName, this.#o.signal);
        } catch (err) {
          this.#o.asw.markVolumeAsUncertain(volume.volumeName, volume.volumeSpec, volume.nodeName);
          throw new Error(detailedMessage(volume, "DetachVolume.Detach failed", `: ${errorMessage(err)}`), {
            cause: err,
          });
        }
        this.#o.log.info({}, detailedMessage(volume, "DetachVolume.Detach succeeded"));
        this.#o.asw.markVolumeAsDetached(volume.volumeName, volume.nodeName);
      });
    };
  }

  /**
   * Asks each node's plugins whether the ASW's confirmed attachments still exist, forgetting those
   * that do not (upstream VerifyVolumesAreAttached). Not keyed: it runs beside attach and detach, and
   * errors are only logged so the next sync period tries again.
   */
  verifyVolumesAreAttached(volumesPerNode: ReadonlyMap<string, readonly AttachedVolume[]>): void {
    for (const [nodeName, volumes] of volumesPerNode) {
      this.#track(
        this.#verifyNode(nodeName, volumes).catch((err: unknown) => {
          this.#o.log.error({ node: nodeName, err }, "VerifyVolumesAreAttached failed");
        }),
      );
    }
  }

  /** Whether any operation (attach, detach, verification) is running. */
  hasRunningOperations(): boolean {
    return this.#running.size > 0;
  }

  /** Resolves once no operation is running, including ones started meanwhile (tests, shutdown). */
  async waitForCompletion(): Promise<void> {
    while (this.#running.size > 0) await Promise.all(this.#running);
  }

  async #attach(volume: VolumeToAttach): Promise<void> {
    const { volumeName, volumeSpec, nodeName } = volume;
    let plugin: AttachableVolumePlugin | undefined;
    try {
      plugin = this.#o.plugins.findAttachablePluginBySpec(volumeSpec);
      if (!plugin) throw new Error("no attachable volume plugin matched");
    } catch (err) {
      throw this.#attachFailed(volume, "AttachVolume.FindAttachablePluginBySpec failed", err);
    }
    let devicePath: string;
    try {
      devicePath = await plugin.newAttacher().attach(volumeSpec, nodeName, this.#o.signal);
    } catch (err) {
      // The storage may have attached it: Uncertain, so it is detached if no longer wanted.
      this.#o.asw.markVolumeAsUncertain(volumeName, volumeSpec, nodeName);
      throw this.#attachFailed(volume, "AttachVolume.Attach failed", err);
    }
    try {
      this.#o.asw.markVolumeAsAttached(volumeName, volumeSpec, nodeName, devicePath);
    } catch (err) {
      throw this.#attachFailed(volume, "AttachVolume.MarkVolumeAsAttached failed", err);
    }
    this.#podEvents(
      volume.scheduledPods,
      "Normal",
      "SuccessfulAttachVolume",
      volumeMessage(volumeSpec, "AttachVolume.Attach succeeded", ""),
    );
    this.#o.log.info({}, detailedMessage(volume, "AttachVolume.Attach succeeded"));
  }

  /** Emits upstream's Warning FailedAttachVolume on every scheduled pod and returns the error to log. */
  #attachFailed(volume: VolumeToAttach, prefix: string, err: unknown): Error {
    const suffix = `: ${errorMessage(err)}`;
    this.#podEvents(
      volume.scheduledPods,
      "Warning",
      "FailedAttachVolume",
      volumeMessage(volume.volumeSpec, prefix, suffix),
    );
    return new Error(detailedMessage(volume, prefix, suffix), { cause: err });
  }

  #podEvents(pods: readonly V1Pod[], type: "Normal" | "Warning", reason: string, message: string): void {
    for (const pod of pods) this.#o.events.event(objectReference(pod, "Pod"), type, reason, message);
  }

  /**
   * The plugin and its volume name for a detach (upstream findDetachablePluginBySpec, or the unique
   * name's plugin for a volume known only from node status). CSI detaches even when its CSIDriver no
   * longer requires attach: a VolumeAttachment may still exist.
   */
  #detachablePlugin(volume: AttachedVolume): { plugin: AttachableVolumePlugin; name: string } {
    const fail = (prefix: string, err: unknown) =>
      new Error(detailedMessage(volume, prefix, `: ${errorMessage(err)}`), { cause: err });
    if (!volume.volumeSpec) {
      let split: { pluginName: string; volumeName: string };
      try {
        split = splitUniqueVolumeName(volume.volumeName);
      } catch (err) {
        throw fail("DetachVolume.SplitUniqueName failed", err);
      }
      let plugin;
      try {
        plugin = this.#o.plugins.findPluginByName(split.pluginName);
      } catch (err) {
        throw fail("DetachVolume.FindAttachablePluginByName failed", err);
      }
      if (!isAttachable(plugin)) {
        throw fail("DetachVolume.FindAttachablePluginByName failed", "plugin is not attachable");
      }
      return { plugin, name: split.volumeName };
    }
    const spec = volume.volumeSpec;
    let plugin;
    try {
      plugin = this.#o.plugins.findPluginBySpec(spec);
    } catch (err) {
      throw fail("DetachVolume.findDetachablePluginBySpec failed", err);
    }
    if (!isAttachable(plugin) || (plugin.name !== "kubernetes.io/csi" && !plugin.canAttach(spec))) {
      throw fail("DetachVolume.findDetachablePluginBySpec failed", "plugin is not detachable");
    }
    try {
      return { plugin, name: plugin.getVolumeName(spec) };
    } catch (err) {
      throw fail("DetachVolume.GetVolumeName failed", err);
    }
  }

  /** upstream verifyVolumeIsSafeToDetach: a node that is gone cannot be using the volume. */
  async #verifySafeToDetach(volume: AttachedVolume): Promise<void> {
    let node: V1Node | undefined;
    try {
      node = await this.#o.nodes.getNode(volume.nodeName, this.#o.signal);
    } catch (err) {
      throw new Error(`DetachVolume failed fetching node from API server: ${errorMessage(err)}`, {
        cause: err,
      });
    }
    if (!node) {
      this.#o.log.warn(
        {},
        detailedMessage(volume, "Node not found on API server. DetachVolume will skip safe to detach check"),
      );
      return;
    }
    if (node.status?.volumesInUse?.includes(volume.volumeName)) {
      throw new Error("volume is still in use by node, according to Node status");
    }
  }

  async #verifyNode(nodeName: string, volumes: readonly AttachedVolume[]): Promise<void> {
    const byPlugin = new Map<AttachableVolumePlugin, Map<VolumeSpec, string>>();
    for (const volume of volumes) {
      if (!volume.volumeSpec) continue; // known only from node status: nothing to ask the plugin with
      try {
        const plugin = this.#o.plugins.findPluginBySpec(volume.volumeSpec);
        if (!isAttachable(plugin)) continue;
        const specs = byPlugin.get(plugin) ?? new Map<VolumeSpec, string>();
        specs.set(volume.volumeSpec, volume.volumeName);
        byPlugin.set(plugin, specs);
      } catch (err) {
        this.#o.log.error({ err }, detailedMessage(volume, "VolumesAreAttached.FindPluginBySpec failed"));
      }
    }
    for (const [plugin, specs] of byPlugin) {
      let attached: Map<VolumeSpec, boolean>;
      try {
        attached = await plugin.newAttacher().volumesAreAttached([...specs.keys()], nodeName);
      } catch (err) {
        this.#o.log.error({ node: nodeName, plugin: plugin.name, err }, "VolumesAreAttached failed");
        continue;
      }
      for (const [spec, isAttached] of attached) {
        const volumeName = specs.get(spec);
        if (isAttached || volumeName === undefined) continue;
        this.#o.asw.markVolumeAsDetached(volumeName, nodeName);
        this.#o.log.info(
          { volumeName, node: nodeName },
          "VerifyVolumesAreAttached determined volume is no longer attached to node, therefore it was marked as detached",
        );
      }
    }
  }

  /**
   * upstream nestedPendingOperations.isOperationExists: a running operation matching the key wins;
   * otherwise the exact key, else any matching one (whose backoff then applies).
   */
  #find(volumeName: string, nodeName: string): PendingOperation | undefined {
    let found: PendingOperation | undefined;
    for (const op of this.#operations.get(volumeName) ?? []) {
      if (op.nodeName !== "" && nodeName !== "" && op.nodeName !== nodeName) continue;
      if (op.pending) return op;
      if (!found || op.nodeName === nodeName) found = op;
    }
    return found;
  }

  /**
   * Records an operation that could not start as failed under its key: it then waits out the same
   * backoff as one that ran and failed. A running operation for the key is left alone.
   */
  #failedBeforeStart(volumeName: string, nodeName: string, operationName: OperationName): void {
    let op = this.#find(volumeName, nodeName);
    if (op?.pending) return;
    if (!op) {
      op = { volumeName, nodeName, pending: false, operationName, backoff: new ExponentialBackoff() };
      this.#add(op);
    } else if (op.operationName !== operationName) {
      op.operationName = operationName;
      op.backoff = new ExponentialBackoff();
    }
    op.nodeName = nodeName;
    op.backoff.update(this.#o.clock.now());
  }

  /**
   * upstream nestedPendingOperations.Run: refuses while pending, or in backoff for the same operation.
   * `nodeKey` is the operation's key ("" for every node); `volume.nodeName` the node it works on.
   */
  #run(
    volume: { volumeName: string; nodeName: string; volumeSpec?: VolumeSpec | undefined },
    nodeKey: string,
    operationName: OperationName,
    pluginName: string,
    fn: () => Promise<void>,
  ): boolean {
    const { volumeName } = volume;
    let entry = this.#find(volumeName, nodeKey);
    if (entry?.pending) return false;
    if (entry && !entry.backoff.safeToRetry(this.#o.clock.now())) {
      if (entry.operationName === operationName) return false;
      // The other operation may run at once and starts its own backoff.
      entry.operationName = operationName;
      entry.backoff = new ExponentialBackoff();
    }
    if (entry) {
      // The entry takes the new key, so success removes exactly it.
      entry.nodeName = nodeKey;
      entry.pending = true;
    } else {
      entry = {
        volumeName,
        nodeName: nodeKey,
        pending: true,
        operationName,
        backoff: new ExponentialBackoff(),
      };
      this.#add(entry);
    }
    const op = entry;
    const startedAt = this.#o.clock.now();
    const completed = (success: boolean) => {
      const seconds = (this.#o.clock.now() - startedAt) / 1000;
      const migrated = volume.volumeSpec?.migrated ?? false;
      this.#o.metrics?.operationCompleted(pluginName, operationName, seconds, success, migrated);
    };
    // Asynchronous, like upstream's goroutine: nothing of fn runs before the caller's pass ends.
    this.#track(
      Promise.resolve()
        .then(fn)
        .then(
          () => {
            completed(true);
            this.#remove(op);
          },
          (err: unknown) => {
            completed(false);
            op.pending = false;
            op.backoff.update(this.#o.clock.now());
            this.#o.log.error(
              {
                volumeName,
                node: volume.nodeName,
                operation: operationName,
                err,
                retryAfterMs: op.backoff.durationMs,
              },
              "Operation failed; no retries permitted until the backoff has passed",
            );
          },
        ),
    );
    return true;
  }

  #add(op: PendingOperation): void {
    const ops = this.#operations.get(op.volumeName);
    if (ops) ops.push(op);
    else this.#operations.set(op.volumeName, [op]);
  }

  #remove(op: PendingOperation): void {
    const ops = this.#operations.get(op.volumeName) ?? [];
    const i = ops.indexOf(op);
    if (i >= 0) ops.splice(i, 1);
    if (ops.length === 0) this.#operations.delete(op.volumeName);
  }

  #track(run: Promise<void>): void {
    const tracked = run.finally(() => {
      this.#running.delete(tracked);
    });
    this.#running.add(tracked);
  }
}
