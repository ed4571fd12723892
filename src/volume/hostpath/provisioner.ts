import { randomUUID } from "node:crypto";
import { mkdir } from "node:fs/promises";
import { join } from "node:path";
import type { V1PersistentVolume } from "@kubernetes/client-node";
import type { SideEffectGate } from "../../runtime/write-gate.js";
import type { ProvisionOptions, Provisioner } from "../plugin.js";

/** Access modes of a provisioned volume when the claim asks for none. */
const DEFAULT_ACCESS_MODES = ["ReadWriteOnce"];

/**
 * Creates `<baseDir>/<uuid>` on this machine and a PV pointing at it. The PV is only usable by pods
 * on this node: single-node development and testing only.
 */
export class HostPathProvisioner implements Provisioner {
  constructor(
    private readonly pluginName: string,
    private readonly baseDir: string,
    private readonly options: ProvisionOptions,
    /** Shadow mode: the PV is described, its directory not created. */
    private readonly shadow = false,
    /** A leader's write gate: the directory is created only when it admits it. */
    private readonly gate?: SideEffectGate,
  ) {}

  async provision(): Promise<V1PersistentVolume> {
    const { pvc, pvName, reclaimPolicy } = this.options;
    if (pvc.spec?.volumeMode === "Block") {
      throw new Error(`${this.pluginName} does not support block volume provisioning`);
    }
    const path = join(this.baseDir, randomUUID());
    const storage = pvc.spec?.resources?.requests?.storage;
    const accessModes = pvc.spec?.accessModes?.length ? pvc.spec.accessModes : DEFAULT_ACCESS_MODES;
    if (!this.shadow) {
      const make = () => mkdir(path, { recursive: true, mode: 0o750 });
      await (this.gate ? this.gate.runSideEffect(make) : make());
    }
    return {
      apiVersion: "v1",
      kind: "PersistentVolume",
      metadata: { name: pvName, annotations: { "kubernetes.io/createdby": "hostpath-dynamic-provisioner" } },
      spec: {
        persistentVolumeReclaimPolicy: reclaimPolicy,
        accessModes: [...accessModes],
        ...(storage !== undefined && { capacity: { storage } }),
        hostPath: { path },
      },
    };
  }
}
