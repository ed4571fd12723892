import type {
  V1CSIDriver,
  V1Node,
  V1PersistentVolume,
  V1PersistentVolumeClaim,
  V1Pod,
  V1Volume,
  V1VolumeAttachment,
  V1VolumeError,
} from "@kubernetes/client-node";
import { DEFAULT_TIMER_CONFIG } from "../attachdetach/attach-detach-controller.js";
import { resolveAttachableVolume } from "../attachdetach/cache/desired-state-of-world.js";
import { isMultiAttachAllowed } from "../attachdetach/operation-executor.js";
import { nodeHealthFrom } from "../attachdetach/reconciler.js";
import { CONTROLLER_MANAGED_ATTACH_ANNOTATION, createVolumeSpec } from "../attachdetach/util.js";
import { errorMessage } from "../runtime/api-errors.js";
import { silentLogger } from "../runtime/logger.js";
import { ephemeralClaimName } from "../volume/ephemeral.js";
import type { VolumeAttachmentApi } from "../volume/csi/attacher.js";
import { attachmentName } from "../volume/csi/attachment-name.js";
import { CSI_PLUGIN_NAME } from "../volume/csi/source.js";
import { getInTreePluginNameFromSpec } from "../volume/csimigration/translate.js";
import { attachablePlugins } from "../volume/default-plugins.js";
import { NoPluginMatchedError, VolumePluginManager } from "../volume/plugin-manager.js";
import type { VolumeSpec } from "../volume/plugin.js";
import type { RecyclerPodApi } from "../volume/recycler.js";
import { isPodTerminated } from "../volume/util/pod.js";

/**
 * `kvc explain pod`: what the attach/detach controller does with each of a pod's volumes and why,
 * decided by the controller's own code over objects read from the API: createVolumeSpec (claim →
 * PV, CSI migration), its plugins (attachablePlugins, the CSIDriver's attachRequired),
 * resolveAttachableVolume (the unique name), attachmentName, isMultiAttachAllowed, isPodTerminated
 * and the reconciler's force-detach rule. Pure: the caller reads the objects.
 */

export interface PodInputs {
  pod: V1Pod;
  /** Every node, pod (all namespaces), claim (all namespaces), PV, CSIDriver and VolumeAttachment. */
  nodes: readonly V1Node[];
  pods: readonly V1Pod[];
  claims: readonly V1PersistentVolumeClaim[];
  volumes: readonly V1PersistentVolume[];
  csiDrivers: readonly V1CSIDriver[];
  volumeAttachments: readonly V1VolumeAttachment[];
  now: Date;
}

export const POD_VOLUME_CONCLUSIONS = [
  "Attached",
  "WaitingForController",
  "WaitingForAttacher",
  "MultiAttachConflict",
  "PendingDetach",
  "Detached",
  "NotAttachable",
  "UnknownPlugin",
  "NotScheduled",
  "NodeNotManaged",
  "ClaimNotBound",
  "CannotResolve",
] as const;
export type PodVolumeConclusionKind = (typeof POD_VOLUME_CONCLUSIONS)[number];

/** When a volume no pod on `node` wants any more is detached, and whether it would be forced. */
export interface DetachOutlook {
  node: string;
  /** Pods on the node using the volume, "namespace/name"; `active` ones keep it attached. */
  pods: { name: string; active: boolean }[];
  /** No active pod on the node wants it: the controller detaches it. */
  pending: boolean;
  /** The node lists it in status.volumesInUse: the kubelet has not unmounted it. */
  mounted: boolean;
  nodeReady: boolean;
  outOfService: boolean;
  /**
   * not-needed: not mounted, detached without force; now: out-of-service taint; timeout: the node is
   * not Ready, forced maxWaitForUnmountDuration after the controller's detach request; never: the node
   * is Ready and must unmount it first. null while not pending.
   */
  forceDetach: "not-needed" | "now" | "timeout" | "never" | null;
  /** For timeout: the earliest time, from the last pod's end; null when that is not known. */
  forceDetachAfter: string | null;
  message: string;
}

export interface AttachmentStatus {
  name: string;
  exists: boolean;
  attached: boolean | null;
  attachError: { message: string; time: string | null } | null;
  detachError: { message: string; time: string | null } | null;
  deleting: boolean;
}

export interface PodVolumeExplanation {
  /** The pod's volume name. */
  name: string;
  /** Which source the pod names: persistentVolumeClaim, ephemeral, csi, awsElasticBlockStore, … */
  source: string;
  claim: string | null;
  persistentVolume: string | null;
  /** The controller's plugin for it, e.g. kubernetes.io/csi; null when none of its plugins supports it. */
  plugin: string | null;
  driver: string | null;
  /** The in-tree plugin a migrated volume was translated from. */
  migratedFrom: string | null;
  attachable: boolean | null;
  /** The CSIDriver's spec.attachRequired; null without a CSIDriver object (then attached). */
  attachRequired: boolean | null;
  /** The controller's key, as node status.volumesAttached and volumesInUse name it. */
  uniqueName: string | null;
  multiAttachAllowed: boolean | null;
  attachment: AttachmentStatus | null;
  /** The pod's node's status for this volume. */
  nodeStatus: { volumesAttached: boolean; volumesInUse: boolean } | null;
  /** Other nodes holding (attached) or wanting (an active pod) the volume. */
  otherNodes: {
    node: string;
    attached: boolean;
    attachment: AttachmentStatus | null;
    detach: DetachOutlook;
  }[];
  /** The detach from the pod's own node, once the pod is terminated. */
  detach: DetachOutlook | null;
  conclusion: { kind: PodVolumeConclusionKind; message: string };
}

export interface PodExplanation {
  apiVersion: "kvc.explain/v1";
  kind: "PodExplanation";
  pod: { namespace: string; name: string; phase: string; node: string | null; terminated: boolean };
  node: {
    name: string;
    exists: boolean;
    managed: boolean;
    ready: boolean;
    outOfService: boolean;
  } | null;
  volumes: PodVolumeExplanation[];
  /** The first volume that is not attached (or needs nothing), else all is well. */
  conclusion: { kind: PodVolumeConclusionKind; volume: string | null; message: string };
  suggestions: string[];
}

const SETTLED: ReadonlySet<PodVolumeConclusionKind> = new Set(["Attached", "NotAttachable", "Detached"]);

export function explainPod(inputs: PodInputs): PodExplanation {
  const { pod } = inputs;
  const namespace = pod.metadata?.namespace ?? "";
  const nodeName = pod.spec?.nodeName || null;
  const world = new World(inputs);
  const node = nodeName ? world.node(nodeName) : undefined;
  const health = nodeName ? world.health(nodeName) : undefined;
  const suggestions = new Set<string>();
  const volumes = (pod.spec?.volumes ?? []).map((v) => explainVolume(world, pod, v, suggestions));
  const blocking = volumes.find((v) => !SETTLED.has(v.conclusion.kind));
  const shown = blocking ?? volumes.find((v) => v.conclusion.kind === "Attached") ?? volumes[0];
  return {
    apiVersion: "kvc.explain/v1",
    kind: "PodExplanation",
    pod: {
      namespace,
      name: pod.metadata?.name ?? "",
      phase: pod.status?.phase ?? "Pending",
      node: nodeName,
      terminated: isPodTerminated(pod),
    },
    node:
      nodeName && health
        ? {
            name: nodeName,
            exists: node !== undefined,
            managed: isManaged(node),
            ready: health.ready,
            outOfService: health.outOfService,
          }
        : null,
    volumes,
    conclusion: shown
      ? {
          kind: shown.conclusion.kind,
          volume: shown.name,
          message: blocking
            ? `volume ${shown.name}: ${shown.conclusion.message}`
            : shown.conclusion.kind === "Attached"
              ? "every volume that needs attaching is attached and reported to the kubelet"
              : "no volume needs attaching (or all are detached)",
        }
      : { kind: "NotAttachable", volume: null, message: "the pod has no volumes" },
    suggestions: [...suggestions],
  };
}

function isManaged(node: V1Node | undefined): boolean {
  return node?.metadata?.annotations?.[CONTROLLER_MANAGED_ATTACH_ANNOTATION] !== undefined;
}

/** A pod volume resolved as the controller resolves it. */
interface Resolved {
  spec: VolumeSpec;
  /** Undefined when no attaching is needed (or no plugin supports it). */
  uniqueName: string | undefined;
}

/** The objects read, indexed, with the controller's plugins over them. */
class World {
  readonly plugins: VolumePluginManager;
  readonly #inputs: PodInputs;
  readonly #nodes: Map<string, V1Node>;
  readonly #claims: Map<string, V1PersistentVolumeClaim>;
  readonly #volumes: Map<string, V1PersistentVolume>;
  readonly #attachments: Map<string, V1VolumeAttachment>;
  /** unique volume name → the pods using it ("uses" resolved as the controller does). */
  #users: Map<string, V1Pod[]> | undefined;

  constructor(inputs: PodInputs) {
    this.#inputs = inputs;
    this.#nodes = byName(inputs.nodes, (n) => n.metadata?.name);
    this.#claims = byName(inputs.claims, (c) => `${c.metadata?.namespace ?? ""}/${c.metadata?.name ?? ""}`);
    this.#volumes = byName(inputs.volumes, (v) => v.metadata?.name);
    this.#attachments = byName(inputs.volumeAttachments, (va) => va.metadata?.name);
    const drivers = byName(inputs.csiDrivers, (d) => d.metadata?.name);
    this.plugins = new VolumePluginManager(silentLogger);
    // The attach/detach controller's plugins. Explain only asks them questions: nothing calls the
    // APIs they would attach, detach or recycle through.
    this.plugins.register(
      attachablePlugins({
        enableHostPathProvisioner: false,
        pods: NO_WRITES,
        csi: {
          volumeAttachments: NO_WRITES,
          volumeAttachmentLister: { get: (name) => this.#attachments.get(name) },
          csiDrivers: { get: (name) => drivers.get(name) },
        },
      }),
    );
    this.csiDriver = (name) => drivers.get(name);
    this.now = inputs.now;
  }

  readonly csiDriver: (name: string) => V1CSIDriver | undefined;
  readonly now: Date;

  readonly lookups = {
    getClaim: (namespace: string, name: string) => this.#claims.get(`${namespace}/${name}`),
    getVolume: (name: string) => this.#volumes.get(name),
  };

  node(name: string): V1Node | undefined {
    return this.#nodes.get(name);
  }

  health(name: string): { ready: boolean; outOfService: boolean } {
    const health = nodeHealthFrom((n) => this.#nodes.get(n));
    return { ready: health.isReady(name), outOfService: health.hasOutOfServiceTaint(name) };
  }

  attachment(name: string): V1VolumeAttachment | undefined {
    return this.#attachments.get(name);
  }

  /** Throws createVolumeSpec's and the plugins' errors. */
  resolve(pod: V1Pod, podVolume: V1Volume): Resolved {
    const spec = createVolumeSpec(pod, podVolume, this.lookups);
    if (!this.plugins.findAttachablePluginBySpec(spec)) return { spec, uniqueName: undefined };
    return { spec, uniqueName: resolveAttachableVolume(this.plugins, spec).volumeName };
  }

  /** The scheduled pods using the volume, any node (errors resolving a pod's volume skip it, as the controller). */
  users(uniqueName: string): V1Pod[] {
    if (!this.#users) {
      this.#users = new Map();
      for (const pod of this.#inputs.pods) {
        if (!pod.spec?.nodeName) continue;
        for (const podVolume of pod.spec.volumes ?? []) {
          let name: string | undefined;
          try {
            name = this.resolve(pod, podVolume).uniqueName;
          } catch {
            continue;
          }
          if (name === undefined) continue;
          const users = this.#users.get(name) ?? [];
          if (!users.includes(pod)) users.push(pod);
          this.#users.set(name, users);
        }
      }
    }
    return this.#users.get(uniqueName) ?? [];
  }

  /** The VolumeAttachments of a CSI volume, on any node: their names are its hash on that node. */
  attachmentsOf(csi: { driver: string; volumeHandle: string }): V1VolumeAttachment[] {
    return this.#inputs.volumeAttachments.filter(
      (va) => va.metadata?.name === attachmentName(csi.volumeHandle, csi.driver, va.spec.nodeName),
    );
  }

  /** Nodes whose status lists the volume attached. */
  nodesReporting(uniqueName: string): string[] {
    return this.#inputs.nodes
      .filter((n) => n.status?.volumesAttached?.some((v) => v.name === uniqueName))
      .map((n) => n.metadata?.name ?? "");
  }
}

// Never called: explain's plugins only answer questions (see World). The cast covers the overloads.
const refuse = () => Promise.reject(new Error("kvc explain never writes"));
const NO_WRITES = {
  createNamespacedPod: refuse,
  readNamespacedPod: refuse,
  deleteNamespacedPod: refuse,
  listNamespacedEvent: refuse,
  createVolumeAttachment: refuse,
  readVolumeAttachment: refuse,
  deleteVolumeAttachment: refuse,
} as unknown as RecyclerPodApi & VolumeAttachmentApi;

function byName<T>(items: readonly T[], key: (item: T) => string | undefined): Map<string, T> {
  return new Map(items.map((item) => [key(item) ?? "", item]));
}

const podName = (pod: V1Pod) => `${pod.metadata?.namespace ?? ""}/${pod.metadata?.name ?? ""}`;

/** The V1Volume field naming its source (the first one set besides name). */
function sourceOf(podVolume: V1Volume): string {
  return Object.keys(podVolume).find((k) => k !== "name" && podVolume[k as keyof V1Volume] != null) ?? "";
}

function volumeError(e: V1VolumeError | undefined): AttachmentStatus["attachError"] {
  if (!e) return null;
  return { message: e.message ?? "", time: e.time ? new Date(e.time).toISOString() : null };
}

function attachmentStatus(name: string, va: V1VolumeAttachment | undefined): AttachmentStatus {
  return {
    name,
    exists: va !== undefined,
    attached: va ? va.status?.attached === true : null,
    attachError: volumeError(va?.status?.attachError),
    detachError: volumeError(va?.status?.detachError),
    deleting: va?.metadata?.deletionTimestamp !== undefined,
  };
}

/** The CSI driver and handle of a spec the CSI plugin attaches, else undefined. */
function csiSource(spec: VolumeSpec): { driver: string; volumeHandle: string } | undefined {
  const csi = spec.persistentVolume?.spec?.csi;
  return csi ? { driver: csi.driver, volumeHandle: csi.volumeHandle } : undefined;
}

function explainVolume(
  world: World,
  pod: V1Pod,
  podVolume: V1Volume,
  suggestions: Set<string>,
): PodVolumeExplanation {
  const namespace = pod.metadata?.namespace ?? "";
  const claim =
    podVolume.persistentVolumeClaim?.claimName ??
    (podVolume.ephemeral ? ephemeralClaimName(pod, podVolume) : null);
  const result: PodVolumeExplanation = {
    name: podVolume.name,
    source: sourceOf(podVolume),
    claim,
    persistentVolume: claim ? world.lookups.getClaim(namespace, claim)?.spec?.volumeName || null : null,
    plugin: null,
    driver: podVolume.csi?.driver ?? null,
    migratedFrom: null,
    attachable: null,
    attachRequired: null,
    uniqueName: null,
    multiAttachAllowed: null,
    attachment: null,
    nodeStatus: null,
    otherNodes: [],
    detach: null,
    conclusion: { kind: "CannotResolve", message: "" },
  };
  const conclude = (kind: PodVolumeConclusionKind, message: string) => {
    result.conclusion = { kind, message };
    return result;
  };

  let spec: VolumeSpec;
  try {
    spec = createVolumeSpec(pod, podVolume, world.lookups);
  } catch (err) {
    const message = errorMessage(err);
    const pvc = claim ? world.lookups.getClaim(namespace, claim) : undefined;
    if (pvc && (pvc.status?.phase !== "Bound" || !pvc.spec?.volumeName)) {
      suggestions.add(`kvc explain pvc ${claim ?? ""} -n ${namespace}`);
      return conclude(
        "ClaimNotBound",
        `claim ${claim ?? ""} is ${pvc.status?.phase ?? "Pending"}: nothing is attached before it is bound (kvc explain pvc ${claim ?? ""} -n ${namespace})`,
      );
    }
    return conclude("CannotResolve", `the controller cannot build the volume's spec: ${message}`);
  }
  if (spec.migrated) {
    const original = podVolume.persistentVolumeClaim || podVolume.ephemeral ? result.persistentVolume : null;
    result.migratedFrom = getInTreePluginNameFromSpec(
      original ? world.lookups.getVolume(original) : undefined,
      original ? undefined : podVolume,
    );
  }
  const csi = csiSource(spec);
  if (csi) {
    result.driver = csi.driver;
    const driverObject = world.csiDriver(csi.driver);
    result.attachRequired = driverObject ? driverObject.spec.attachRequired !== false : null;
  }

  let attachable;
  try {
    result.plugin = world.plugins.findPluginBySpec(spec).name;
    attachable = world.plugins.findAttachablePluginBySpec(spec);
  } catch (err) {
    if (!(err instanceof NoPluginMatchedError)) {
      return conclude("CannotResolve", `the controller's plugins cannot handle it: ${errorMessage(err)}`);
    }
    result.attachable = false;
    if (podVolume.flexVolume || spec.persistentVolume?.spec?.flexVolume) {
      return conclude(
        "UnknownPlugin",
        "a FlexVolume: attachable only if the controller's plugin directory has its driver and the driver attaches (not visible from here)",
      );
    }
    return conclude(
      "NotAttachable",
      "no attach/detach plugin handles it (the kubelet mounts it): nothing to attach",
    );
  }
  result.attachable = attachable !== undefined;
  if (!attachable) {
    const why =
      result.plugin === CSI_PLUGIN_NAME
        ? spec.volume?.csi
          ? "an inline CSI volume is published by the kubelet, never attached"
          : `CSIDriver ${result.driver ?? ""} says attachRequired: false`
        : `plugin ${result.plugin} does not attach it`;
    return conclude("NotAttachable", `${why}: nothing to attach`);
  }
  let uniqueName: string;
  try {
    uniqueName = resolveAttachableVolume(world.plugins, spec).volumeName;
  } catch (err) {
    return conclude("CannotResolve", errorMessage(err));
  }
  result.uniqueName = uniqueName;
  const multiAttach = isMultiAttachAllowed(spec);
  result.multiAttachAllowed = multiAttach;

  const nodeName = pod.spec?.nodeName;
  if (!nodeName)
    return conclude(
      "NotScheduled",
      "the pod is not scheduled: a volume is attached to its node once it has one",
    );
  const node = world.node(nodeName);
  const vaName = (n: string) => (csi ? attachmentName(csi.volumeHandle, csi.driver, n) : undefined);
  const statusOn = (n: string) => {
    const name = vaName(n);
    return name === undefined ? null : attachmentStatus(name, world.attachment(name));
  };
  result.attachment = statusOn(nodeName);
  result.nodeStatus = {
    volumesAttached: node?.status?.volumesAttached?.some((v) => v.name === uniqueName) ?? false,
    volumesInUse: node?.status?.volumesInUse?.includes(uniqueName) ?? false,
  };

  // Other nodes holding it (reported attached, or a VolumeAttachment the external-attacher confirmed)
  // or with an active pod wanting it.
  const users = world.users(uniqueName).filter((p) => p.metadata?.uid !== pod.metadata?.uid);
  const otherNames = new Set<string>(world.nodesReporting(uniqueName));
  // As processPodVolumes: only pods on managed nodes are wanted by the controller.
  for (const u of users) {
    const n = u.spec?.nodeName;
    if (n && !isPodTerminated(u) && isManaged(world.node(n))) otherNames.add(n);
  }
  otherNames.delete(nodeName);
  for (const other of [...otherNames].sort()) {
    const attachment = statusOn(other);
    const reported = world.node(other)?.status?.volumesAttached?.some((v) => v.name === uniqueName) ?? false;
    result.otherNodes.push({
      node: other,
      attached: reported || attachment?.attached === true,
      attachment,
      detach: detachOutlook(world, other, uniqueName, users),
    });
  }
  // VolumeAttachments of this volume on nodes no status or pod names (a crash between writes).
  if (csi) {
    for (const va of world.attachmentsOf(csi)) {
      const other = va.spec.nodeName;
      if (other === nodeName || result.otherNodes.some((o) => o.node === other)) continue;
      const attachment = attachmentStatus(va.metadata?.name ?? "", va);
      result.otherNodes.push({
        node: other,
        attached: attachment.attached === true,
        attachment,
        detach: detachOutlook(world, other, uniqueName, users),
      });
    }
  }

  if (!node) return conclude("NodeNotManaged", `node ${nodeName} does not exist`);
  if (!isManaged(node)) {
    suggestions.add(
      `node ${nodeName} lacks the ${CONTROLLER_MANAGED_ATTACH_ANNOTATION} annotation: its kubelet attaches volumes itself (--enable-controller-attach-detach=false)`,
    );
    return conclude(
      "NodeNotManaged",
      `node ${nodeName} is not managed by the attach/detach controller (no ${CONTROLLER_MANAGED_ATTACH_ANNOTATION} annotation): its kubelet attaches`,
    );
  }

  if (isPodTerminated(pod)) {
    const attachedHere = result.nodeStatus.volumesAttached || result.attachment?.exists === true;
    if (!attachedHere)
      return conclude("Detached", "the pod is terminated and the volume is not attached to its node");
    result.detach = detachOutlook(world, nodeName, uniqueName, [...users, pod]);
    return conclude(
      result.detach.pending ? "PendingDetach" : "Attached",
      result.detach.pending ? result.detach.message : `the pod is terminated; ${result.detach.message}`,
    );
  }

  if (result.nodeStatus.volumesAttached) {
    return conclude(
      "Attached",
      `attached to ${nodeName} and reported in its status.volumesAttached${result.nodeStatus.volumesInUse ? "; the kubelet has mounted it" : ": the kubelet may mount it"}`,
    );
  }
  // The first holder: a single-node volume is attached to one node at most.
  const h = result.otherNodes.find((o) => o.attached);
  if (!multiAttach && h) {
    suggestions.add(multiAttachSuggestion(h));
    return conclude(
      "MultiAttachConflict",
      `Multi-Attach: the ${spec.persistentVolume?.spec?.accessModes?.join(",") || "single-node"} volume is attached to node ${h.node}; ${h.detach.message}`,
    );
  }
  const va = result.attachment;
  if (va?.exists && !va.attached) {
    const driver = result.driver ?? "";
    suggestions.add(
      `check the external-attacher of CSI driver ${driver} (its logs, and VolumeAttachment ${va.name})`,
    );
    return conclude(
      "WaitingForAttacher",
      `VolumeAttachment ${va.name} waits for the external-attacher of ${driver}${va.attachError ? `, which reported: ${va.attachError.message}` : ""}`,
    );
  }
  if (va?.attached) {
    return conclude(
      "WaitingForController",
      `VolumeAttachment ${va.name} is attached; the controller lists it in node ${nodeName}'s status.volumesAttached next`,
    );
  }
  const wanted = result.otherNodes.filter((o) => o.detach.pods.some((p) => p.active));
  const race =
    !multiAttach && wanted.length > 0
      ? `; also wanted on node ${wanted.map((o) => o.node).join(", ")}: only one node can attach it`
      : "";
  suggestions.add("is kvc running with its attach/detach controller (the leader's logs)?");
  return conclude(
    "WaitingForController",
    `the controller has not attached it to ${nodeName} yet${va ? ` (no VolumeAttachment ${va.name})` : ""}${race}`,
  );
}

function multiAttachSuggestion(holder: PodVolumeExplanation["otherNodes"][number]): string {
  const taint = `kubectl taint node ${holder.node} node.kubernetes.io/out-of-service=nodeshutdown:NoExecute`;
  const active = holder.detach.pods.filter((p) => p.active).map((p) => p.name);
  if (active.length > 0) {
    return `pod(s) ${active.join(", ")} on node ${holder.node} must end first; if the node is down, taint it: ${taint}`;
  }
  if (holder.detach.forceDetach === "never") {
    return `the kubelet on ${holder.node} must unmount it; if the node is down, taint it: ${taint}`;
  }
  if (holder.detach.forceDetach === "timeout") {
    return `wait for the forced detach from ${holder.node}; if the node is down for good, taint it to detach now: ${taint}`;
  }
  return `wait for the detach from ${holder.node}`;
}

/**
 * What the reconciler does about the volume on `node` (its detachUndesiredVolumes): kept while an
 * active pod there uses it; else detached, forced only when it is still mounted and the node is
 * tainted out-of-service (at once) or not Ready (after maxWaitForUnmountDuration, 6 minutes).
 */
function detachOutlook(
  world: World,
  node: string,
  uniqueName: string,
  users: readonly V1Pod[],
): DetachOutlook {
  const here = users.filter((p) => p.spec?.nodeName === node);
  const pods = here.map((p) => ({ name: podName(p), active: !isPodTerminated(p) }));
  const { ready, outOfService } = world.health(node);
  const mounted = world.node(node)?.status?.volumesInUse?.includes(uniqueName) ?? false;
  const base = { node, pods, mounted, nodeReady: ready, outOfService };
  const active = pods.filter((p) => p.active).map((p) => p.name);
  if (active.length > 0) {
    return {
      ...base,
      pending: false,
      forceDetach: null,
      forceDetachAfter: null,
      message: `pod(s) ${active.join(", ")} on node ${node} still use it (not terminated${ready ? "" : `; node ${node} is not Ready, so its pods' end may never be reported: force-delete them or taint the node out-of-service`})`,
    };
  }
  const waitMin = DEFAULT_TIMER_CONFIG.maxWaitForUnmountMs / 60_000;
  if (!mounted) {
    return {
      ...base,
      pending: true,
      forceDetach: "not-needed",
      forceDetachAfter: null,
      message: `no pod on ${node} uses it and the node reports it unmounted: the controller detaches it`,
    };
  }
  if (outOfService) {
    return {
      ...base,
      pending: true,
      forceDetach: "now",
      forceDetachAfter: null,
      message: `node ${node} is tainted out-of-service: the controller force-detaches it now, though still mounted`,
    };
  }
  if (ready) {
    return {
      ...base,
      pending: true,
      forceDetach: "never",
      forceDetachAfter: null,
      message: `no pod on ${node} uses it, but node ${node} still reports it mounted (volumesInUse) and is Ready: the detach waits for its kubelet to unmount (never forced while Ready)`,
    };
  }
  const ended = lastEnd(here);
  const at = ended === undefined ? undefined : ended + DEFAULT_TIMER_CONFIG.maxWaitForUnmountMs;
  const after = at === undefined ? null : new Date(at).toISOString();
  const when =
    at === undefined
      ? " (the request time is in the controller's memory; the pods are gone)"
      : at <= world.now.getTime()
        ? ` (due since ${after})`
        : ` (at the earliest ${after}, in ${Math.ceil((at - world.now.getTime()) / 60_000)} min)`;
  return {
    ...base,
    pending: true,
    forceDetach: "timeout",
    forceDetachAfter: after,
    message: `still mounted on node ${node}, which is not Ready: force-detached ${waitMin} minutes after the controller's detach request${when}, unless --disable-force-detach-on-timeout`,
  };
}

/** When the last of the pods ended (its containers' finish, else its deletion), ms; undefined: unknown. */
function lastEnd(pods: readonly V1Pod[]): number | undefined {
  let last: number | undefined;
  for (const pod of pods) {
    const finished = [...(pod.status?.containerStatuses ?? []), ...(pod.status?.initContainerStatuses ?? [])]
      .map((s) => s.state?.terminated?.finishedAt)
      .filter((t) => t !== undefined)
      .map((t) => new Date(t).getTime());
    const deleted = pod.metadata?.deletionTimestamp;
    const end =
      finished.length > 0 ? Math.max(...finished) : deleted ? new Date(deleted).getTime() : undefined;
    if (end !== undefined && !Number.isNaN(end)) last = Math.max(last ?? end, end);
  }
  return last;
}
