import {
  type CoreV1Api,
  type KubeConfig,
  type StorageV1Api,
  type V1NodeSpec,
  type V1VolumeAttachment,
} from "@kubernetes/client-node";
import { Registry } from "prom-client";
import { AttachDetachController, type TimerConfig } from "../../src/attachdetach/attach-detach-controller.js";
import { CONTROLLER_MANAGED_ATTACH_ANNOTATION } from "../../src/attachdetach/util.js";
import { isNotFound } from "../../src/runtime/api-errors.js";
import { ApiClients } from "../../src/runtime/client.js";
import { realClock } from "../../src/runtime/clock.js";
import { EventRecorder } from "../../src/runtime/events/recorder.js";
import { InformerFactory } from "../../src/runtime/informer/index.js";
import { silentLogger } from "../../src/runtime/logger.js";
import { waitFor } from "../../src/util/wait.js";
import { defaultPlugins } from "../../src/volume/default-plugins.js";
import { FlexVolumeProber } from "../../src/volume/flexvolume/prober.js";
import { VolumePluginManager } from "../../src/volume/plugin-manager.js";
import { mergePatch, strategicMergePatch } from "../../src/runtime/client.js";

/*
 * The attach/detach controller run in-process on a real apiserver, so that its timers can be short
 * (as upstream's integration tests set TimerConfig), and the CSI external-attacher the tests play.
 */

export interface InProcessAttachDetach {
  controller: AttachDetachController;
  plugins: VolumePluginManager;
  registry: Registry;
  /** Stops the controller and its informers and waits until they have. */
  stop(): Promise<void>;
}

/**
 * Starts an attach/detach controller with its own clients and informers, as a restarted process
 * would have. `flexVolumePluginDir` adds a FlexVolume prober on that directory.
 */
export async function startAttachDetachController(
  kubeConfig: KubeConfig,
  options: { timers?: Partial<TimerConfig>; flexVolumePluginDir?: string } = {},
): Promise<InProcessAttachDetach> {
  const clients = new ApiClients(kubeConfig, { qps: -1, burst: 0 });
  const informers = new InformerFactory({ kubeConfig, apis: clients });
  const plugins = new VolumePluginManager(silentLogger);
  plugins.register(
    defaultPlugins({
      enableHostPathProvisioner: false,
      pods: clients.core,
      csi: {
        volumeAttachments: clients.storage,
        volumeAttachmentLister: informers.volumeAttachments().store,
        csiDrivers: informers.csiDrivers().store,
      },
    }),
  );
  const events = new EventRecorder({
    component: "attachdetach-controller",
    core: clients.core,
    clock: realClock,
    logger: silentLogger,
  });
  const registry = new Registry();
  const controller = new AttachDetachController({
    clients,
    informers,
    plugins,
    events,
    logger: silentLogger,
    registry,
    reconcilerSyncPeriodMs: 60_000,
    disableReconciliationSync: false,
    disableForceDetachOnTimeout: false,
    ...(options.timers && { timers: options.timers }),
  });
  const prober =
    options.flexVolumePluginDir === undefined
      ? undefined
      : new FlexVolumeProber({
          pluginDir: options.flexVolumePluginDir,
          log: silentLogger,
          callTimeoutMs: 2_000,
        });
  if (prober) await plugins.addProber(prober);
  const stop = new AbortController();
  const done = Promise.all([informers.start(stop.signal), controller.run(stop.signal)]);
  return {
    controller,
    plugins,
    registry,
    stop: async () => {
      stop.abort();
      await done;
      prober?.close();
      await events.close();
    },
  };
}

/** The VolumeAttachment, or undefined while there is none. */
export async function readAttachment(
  storage: StorageV1Api,
  name: string,
): Promise<V1VolumeAttachment | undefined> {
  try {
    return await storage.readVolumeAttachment({ name });
  } catch (err) {
    if (isNotFound(err)) return undefined;
    throw err;
  }
}

/**
 * Plays the CSI external-attacher once: waits for the VolumeAttachment `name` and marks it
 * attached. `what` names the wait in a timeout (e.g. with the controller's logs appended).
 */
export async function attachWhenAsked(
  storage: StorageV1Api,
  name: string,
  { timeoutMs = 60_000, what = `VolumeAttachment ${name}` }: { timeoutMs?: number; what?: string } = {},
): Promise<V1VolumeAttachment> {
  const va = await waitFor(() => readAttachment(storage, name), { timeoutMs, what });
  await storage.patchVolumeAttachmentStatus({ name, body: { status: { attached: true } } }, mergePatch);
  return va;
}

/** The name node status and the controller give a CSI volume. */
export const csiUniqueName = (driver: string, handle: string) => `kubernetes.io/csi/${driver}^${handle}`;

/**
 * Plays the scheduler and the kubelet's registration: a node whose attachments the controller
 * manages, and pod `pod` on it using CSI volume `handle` of `driver` through a claim and a
 * statically provisioned PV, both named `name` in storage class `name`. `bound` waits for the claim
 * to be Bound (with the caller's diagnostics) before the pod is created.
 */
export async function podWithCSIVolumeOnManagedNode(
  core: CoreV1Api,
  o: {
    name: string;
    pod: string;
    node: string;
    driver: string;
    handle: string;
    bound(name: string): Promise<unknown>;
  },
): Promise<void> {
  await createManagedNode(core, o.node);
  await core.createPersistentVolume({
    body: {
      metadata: { name: o.name },
      spec: {
        capacity: { storage: "1Gi" },
        accessModes: ["ReadWriteOnce"],
        storageClassName: o.name,
        csi: { driver: o.driver, volumeHandle: o.handle },
      },
    },
  });
  await core.createNamespacedPersistentVolumeClaim({
    namespace: "default",
    body: {
      metadata: { name: o.name },
      spec: {
        accessModes: ["ReadWriteOnce"],
        storageClassName: o.name,
        resources: { requests: { storage: "1Gi" } },
      },
    },
  });
  await o.bound(o.name);
  await createPodWithClaim(core, { namespace: "default", name: o.pod, node: o.node, claimName: o.name });
}

/** A pod scheduled to `node` (as the scheduler leaves it) that mounts claim `claimName` as volume "data". */
export async function createPodWithClaim(
  core: CoreV1Api,
  o: { namespace: string; name: string; node: string; claimName: string },
): Promise<void> {
  await core.createNamespacedPod({
    namespace: o.namespace,
    body: {
      metadata: { name: o.name },
      spec: {
        nodeName: o.node,
        containers: [{ name: "c", image: "registry.k8s.io/pause:3.10" }],
        volumes: [{ name: "data", persistentVolumeClaim: { claimName: o.claimName } }],
      },
    },
  });
}

/**
 * A CSI PV `pv-<handle>` and claim `claim-<handle>` bound to each other as the binder leaves them
 * (claimRef with the claim's UID, claim phase Bound), without running the binder. Returns the claim's name.
 */
export async function boundCSIClaim(
  core: CoreV1Api,
  o: { namespace: string; driver: string; handle: string; accessMode?: string },
): Promise<string> {
  const claimName = `claim-${o.handle}`;
  const accessModes = [o.accessMode ?? "ReadWriteOnce"];
  const pvc = await core.createNamespacedPersistentVolumeClaim({
    namespace: o.namespace,
    body: {
      metadata: { name: claimName },
      spec: {
        accessModes,
        resources: { requests: { storage: "1Gi" } },
        volumeName: `pv-${o.handle}`,
        storageClassName: "",
      },
    },
  });
  await core.createPersistentVolume({
    body: {
      metadata: { name: `pv-${o.handle}` },
      spec: {
        capacity: { storage: "1Gi" },
        accessModes,
        storageClassName: "",
        claimRef: { namespace: o.namespace, name: claimName, uid: pvc.metadata?.uid ?? "" },
        csi: { driver: o.driver, volumeHandle: o.handle },
      },
    },
  });
  await core.patchNamespacedPersistentVolumeClaimStatus(
    { namespace: o.namespace, name: claimName, body: { status: { phase: "Bound" } } },
    mergePatch,
  );
  return claimName;
}

/** Waits until `node`'s status lists the CSI volume attached. */
export async function nodeReportsAttached(
  core: CoreV1Api,
  node: string,
  uniqueName: string,
  { timeoutMs = 60_000, what = `node ${node} to report ${uniqueName} attached` } = {},
): Promise<void> {
  await waitFor(
    async () =>
      (await core.readNode({ name: node })).status?.volumesAttached?.some((v) => v.name === uniqueName),
    { timeoutMs, what },
  );
}

/**
 * Plays the kubelet registering a node whose attachments the controller manages; with `ready`, it
 * also reports the Ready condition ("True", "False" or "Unknown").
 */
export async function createManagedNode(
  core: CoreV1Api,
  name: string,
  {
    ready,
    spec,
    labels,
  }: { ready?: NodeReadyStatus; spec?: V1NodeSpec; labels?: Record<string, string> } = {},
): Promise<void> {
  await core.createNode({
    body: {
      metadata: {
        name,
        ...(labels && { labels }),
        annotations: { [CONTROLLER_MANAGED_ATTACH_ANNOTATION]: "true" },
      },
      ...(spec && { spec }),
    },
  });
  if (ready !== undefined) await setNodeReady(core, name, ready);
}

export type NodeReadyStatus = "True" | "False" | "Unknown";

/** Plays the kubelet (or the node lifecycle controller): the node's Ready condition. */
export async function setNodeReady(core: CoreV1Api, name: string, status: NodeReadyStatus): Promise<void> {
  await core.patchNodeStatus(
    {
      name,
      body: {
        status: { conditions: [{ type: "Ready", status, reason: "Test", message: "set by the test" }] },
      },
    },
    strategicMergePatch,
  );
}

/** Plays the kubelet: the volumes (unique names) it has mounted on `node`. */
export async function setVolumesInUse(core: CoreV1Api, node: string, uniqueNames: string[]): Promise<void> {
  await core.patchNodeStatus(
    { name: node, body: { status: { volumesInUse: uniqueNames.length > 0 ? uniqueNames : null } } },
    mergePatch,
  );
}
