import type { KubeConfig } from "@kubernetes/client-node";
import { errorMessage, isNotFound } from "../runtime/api-errors.js";
import { ApiClients, loadKubeConfig } from "../runtime/client.js";
import { ANN_SELECTED_NODE } from "../persistentvolume/annotations.js";
import type { ClaimInputs } from "./claim.js";
import type { PodInputs } from "./pod.js";
import type { VolumeInputs } from "./volume.js";

/** kubectl's connection flags, as `kvc explain` takes them. */
export interface ConnectionFlags {
  kubeconfig?: string | undefined;
  context?: string | undefined;
  namespace?: string | undefined;
}

/** Read-only access to the cluster: explain only gets and lists. */
export class ClusterReader {
  readonly namespace: string;
  readonly #clients: ApiClients;

  constructor(flags: ConnectionFlags, env: NodeJS.ProcessEnv = process.env) {
    const kc: KubeConfig = loadKubeConfig(flags.kubeconfig, undefined, env);
    if (flags.context) {
      if (!kc.contexts.some((c) => c.name === flags.context)) {
        throw new Error(`context "${flags.context}" does not exist in the kubeconfig`);
      }
      kc.setCurrentContext(flags.context);
    }
    // As kubectl: -n, else the context's namespace, else "default".
    this.namespace = flags.namespace || kc.getContextObject(kc.currentContext)?.namespace || "default";
    this.#clients = new ApiClients(kc, { qps: 50, burst: 100, requestTimeoutMs: 30_000 });
  }

  /** Everything explainClaim reads; undefined when the claim does not exist. */
  async claimInputs(name: string, now = new Date()): Promise<ClaimInputs | undefined> {
    const { core } = this.#clients;
    const namespace = this.namespace;
    let claim;
    try {
      claim = await core.readNamespacedPersistentVolumeClaim({ namespace, name });
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw new Error(`reading PersistentVolumeClaim ${namespace}/${name}: ${errorMessage(err)}`, {
        cause: err,
      });
    }
    const selectedNode = claim.metadata?.annotations?.[ANN_SELECTED_NODE];
    const [context, node] = await Promise.all([
      this.claimContext(),
      selectedNode ? core.readNode({ name: selectedNode }).catch(() => undefined) : undefined,
    ]);
    return { claim, ...context, selectedNode: node, now };
  }

  /** What explainClaim reads besides the claim and its selected node. */
  async claimContext(): Promise<Omit<ClaimInputs, "claim" | "selectedNode" | "now">> {
    const { core, storage, coordination } = this.#clients;
    const [volumes, classes, csiDrivers, leases] = await Promise.all([
      listAll("PersistentVolumes", (p) => core.listPersistentVolume(p)),
      listAll("StorageClasses", (p) => storage.listStorageClass(p)),
      listAll("CSIDrivers", (p) => storage.listCSIDriver(p)),
      // Only a hint that a provisioner runs: not being allowed to list Leases is no failure.
      listAll("Leases", (p) => coordination.listLeaseForAllNamespaces(p)).catch(() => undefined),
    ]);
    return { volumes, classes, csiDrivers, leases };
  }

  /** Everything explainVolume reads; undefined when the volume does not exist. */
  async volumeInputs(name: string): Promise<VolumeInputs | undefined> {
    const { core } = this.#clients;
    let volume;
    try {
      volume = await core.readPersistentVolume({ name });
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw new Error(`reading PersistentVolume ${name}: ${errorMessage(err)}`, { cause: err });
    }
    const ref = volume.spec?.claimRef;
    const [claim, events] = await Promise.all([
      ref?.name
        ? core
            .readNamespacedPersistentVolumeClaim({ namespace: ref.namespace ?? "", name: ref.name })
            .catch((err: unknown) => {
              if (isNotFound(err)) return undefined;
              throw new Error(`reading the volume's claim: ${errorMessage(err)}`, { cause: err });
            })
        : undefined,
      // Events about a cluster-scoped object land in "default"; listing all namespaces finds them anywhere.
      listAll("Events", (p) =>
        core.listEventForAllNamespaces({
          ...p,
          fieldSelector: `involvedObject.kind=PersistentVolume,involvedObject.name=${name}`,
        }),
      ),
    ]);
    return { volume, claim, events };
  }

  /**
   * Everything explainPod reads; undefined when the pod does not exist. Claims and pods of every
   * namespace: another namespace's pod may hold the volume on another node.
   */
  async podInputs(name: string, now = new Date()): Promise<PodInputs | undefined> {
    const { core } = this.#clients;
    const namespace = this.namespace;
    let pod;
    try {
      pod = await core.readNamespacedPod({ namespace, name });
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw new Error(`reading Pod ${namespace}/${name}: ${errorMessage(err)}`, { cause: err });
    }
    return { pod, ...(await this.podContext()), now };
  }

  /** What explainPod reads besides the pod. */
  async podContext(): Promise<Omit<PodInputs, "pod" | "now">> {
    const { core, storage } = this.#clients;
    const [nodes, pods, claims, volumes, csiDrivers, volumeAttachments] = await Promise.all([
      listAll("Nodes", (p) => core.listNode(p)),
      listAll("Pods", (p) => core.listPodForAllNamespaces(p)),
      listAll("PersistentVolumeClaims", (p) => core.listPersistentVolumeClaimForAllNamespaces(p)),
      listAll("PersistentVolumes", (p) => core.listPersistentVolume(p)),
      listAll("CSIDrivers", (p) => storage.listCSIDriver(p)),
      listAll("VolumeAttachments", (p) => storage.listVolumeAttachment(p)),
    ]);
    return { nodes, pods, claims, volumes, csiDrivers, volumeAttachments };
  }
}

/** All pages of a list. */
async function listAll<T>(
  what: string,
  page: (params: {
    limit: number;
    _continue?: string;
  }) => Promise<{ items: T[]; metadata?: { _continue?: string } }>,
): Promise<T[]> {
  const items: T[] = [];
  let next: string | undefined;
  try {
    do {
      const list = await page(next === undefined ? { limit: 500 } : { limit: 500, _continue: next });
      items.push(...list.items);
      next = list.metadata?._continue || undefined;
    } while (next);
  } catch (err) {
    throw new Error(`listing ${what}: ${errorMessage(err)}`, { cause: err });
  }
  return items;
}
