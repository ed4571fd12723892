import type { CoreV1Api, V1AttachedVolume, V1Node } from "@kubernetes/client-node";
import { isNotFound } from "../../runtime/api-errors.js";
import type { LogSink } from "../../runtime/logger.js";
import type { ActualStateOfWorld } from "../cache/actual-state-of-world.js";
import type { NodeStatusUpdater } from "../reconciler.js";
import { strategicMergePatch } from "../../runtime/client.js";

export interface NodeStatusUpdaterOptions {
  core: Pick<CoreV1Api, "patchNodeStatus">;
  /** The node informer's cache: a node it does not hold is skipped until it appears. */
  getNode(nodeName: string): V1Node | undefined;
  asw: Pick<
    ActualStateOfWorld,
    "getVolumesToReportAttached" | "getVolumesToReportAttachedForNode" | "setNodeStatusUpdateNeeded"
  >;
  log: LogSink;
}

/**
 * Writes the ASW's per-node reports to node.status.volumesAttached (upstream statusupdater). The list is
 * atomic in the Node API, so the patch carries it whole: a strategic-merge patch replaces it, never
 * merges into what another writer left. A failed write flags the node again for the next pass; a
 * node that does not exist is skipped without retrying until it is created (its add event flags it).
 */
export class APINodeStatusUpdater implements NodeStatusUpdater {
  readonly #o: NodeStatusUpdaterOptions;

  constructor(options: NodeStatusUpdaterOptions) {
    this.#o = options;
  }

  async updateNodeStatuses(): Promise<void> {
    const failures: string[] = [];
    await Promise.all(
      [...this.#o.asw.getVolumesToReportAttached()].map(async ([nodeName, volumes]) => {
        try {
          await this.#process(nodeName, volumes);
        } catch {
          failures.push(nodeName);
        }
      }),
    );
    if (failures.length > 0) throw new Error(`unable to update ${failures.length} nodes`);
  }

  async updateNodeStatusForNode(nodeName: string): Promise<void> {
    const volumes = this.#o.asw.getVolumesToReportAttachedForNode(nodeName);
    if (volumes) await this.#process(nodeName, volumes);
  }

  async #process(nodeName: string, volumes: V1AttachedVolume[]): Promise<void> {
    const node = this.#o.getNode(nodeName);
    if (!node) {
      this.#o.log.debug(
        { node: nodeName },
        "Could not update node status. Failed to find node in NodeInformer cache",
      );
      return;
    }
    // Sent even when the cache already shows this list (where upstream's two-way patch is empty but
    // still sent): the cache may lag a write of ours, and a stale entry left in volumesAttached would
    // tell the kubelet a detached volume is still there.
    try {
      await this.#o.core.patchNodeStatus(
        { name: nodeName, body: { status: { volumesAttached: volumes.length > 0 ? volumes : null } } },
        strategicMergePatch,
      );
    } catch (err) {
      if (isNotFound(err)) {
        this.#o.log.debug({ node: nodeName }, "Could not update node status, node does not exist - skipping");
        return;
      }
      this.#o.asw.setNodeStatusUpdateNeeded(nodeName);
      this.#o.log.info({ node: nodeName, err }, "Could not update node status; re-marking for update");
      throw err;
    }
  }
}
