import {
  type CoreV1Api,
  type StorageV1Api,
  type V1PersistentVolume,
  type V1PersistentVolumeClaim,
  type V1Pod,
  type V1VolumeAttachment,
} from "@kubernetes/client-node";
import { strategicMergePatch } from "../runtime/client.js";

/**
 * The `kvc dev` demo workload: something for each loop to do on an empty control plane, and a table
 * that shows it settle. Static claims bind to pre-created hostPath PVs, dynamic ones are provisioned
 * by the hostPath provisioner, and pods on a managed node need their CSI volumes attached (a stand-in
 * external-attacher plays the driver's side).
 */

export const DEMO_NAMESPACE = "kvc-demo";
export const DEMO_NODE = "demo-node";
export const DEMO_CSI_DRIVER = "demo.csi.kvc.dev";
const STATIC_CLASS = "demo-static";
const HOSTPATH_CLASS = "demo-hostpath";
const CSI_CLASS = "demo-csi";

const meta = (name: string) => ({ name, labels: { "app.kubernetes.io/part-of": "kvc-demo" } });

function claim(name: string, storageClassName: string, storage: string): V1PersistentVolumeClaim {
  return {
    metadata: { ...meta(name), namespace: DEMO_NAMESPACE },
    spec: { accessModes: ["ReadWriteOnce"], storageClassName, resources: { requests: { storage } } },
  };
}

function volume(name: string, storageClassName: string, storage: string, source: object): V1PersistentVolume {
  return {
    metadata: meta(name),
    spec: {
      capacity: { storage },
      accessModes: ["ReadWriteOnce"],
      storageClassName,
      persistentVolumeReclaimPolicy: "Retain",
      ...source,
    },
  };
}

function pod(name: string, claimName: string): V1Pod {
  return {
    metadata: { ...meta(name), namespace: DEMO_NAMESPACE },
    spec: {
      nodeName: DEMO_NODE,
      containers: [{ name: "app", image: "registry.k8s.io/pause:3.10" }],
      volumes: [{ name: "data", persistentVolumeClaim: { claimName } }],
    },
  };
}

/** The claims, volumes and pods of the demo; the table expects exactly these. */
export const DEMO = {
  volumes: [
    volume("demo-static-1", STATIC_CLASS, "1Gi", { hostPath: { path: "/tmp/kvc-demo/static-1" } }),
    volume("demo-static-2", STATIC_CLASS, "2Gi", { hostPath: { path: "/tmp/kvc-demo/static-2" } }),
    volume("demo-static-5", STATIC_CLASS, "5Gi", { hostPath: { path: "/tmp/kvc-demo/static-5" } }),
    volume("demo-csi-1", CSI_CLASS, "10Gi", { csi: { driver: DEMO_CSI_DRIVER, volumeHandle: "disk-1" } }),
    volume("demo-csi-2", CSI_CLASS, "10Gi", { csi: { driver: DEMO_CSI_DRIVER, volumeHandle: "disk-2" } }),
  ],
  claims: [
    // the smallest volume that fits wins: 1Gi → static-1, 2Gi → static-2, 3Gi → static-5
    claim("static-small", STATIC_CLASS, "1Gi"),
    claim("static-medium", STATIC_CLASS, "2Gi"),
    claim("static-large", STATIC_CLASS, "3Gi"),
    claim("dynamic-a", HOSTPATH_CLASS, "1Gi"),
    claim("dynamic-b", HOSTPATH_CLASS, "1Gi"),
    claim("db-data", CSI_CLASS, "10Gi"),
    claim("web-data", CSI_CLASS, "10Gi"),
  ],
  pods: [pod("db", "db-data"), pod("web", "web-data")],
};

/**
 * A claim left Pending on purpose, outside the table: no static volume is big enough and its class
 * has no StorageClass to provision from. `kvc dev` prints the line that explains it.
 */
export const DEMO_PENDING_CLAIM = claim("too-big", STATIC_CLASS, "50Gi");
export const DEMO_EXPLAIN_COMMAND = `kvc explain pvc ${DEMO_PENDING_CLAIM.metadata?.name ?? ""} -n ${DEMO_NAMESPACE}`;

/** Creates the demo's objects; ones that exist already (a second run on the same cluster) are kept. */
export async function applyDemoWorkload(
  core: Pick<
    CoreV1Api,
    | "createNamespace"
    | "createNode"
    | "patchNodeStatus"
    | "createPersistentVolume"
    | "createNamespacedPersistentVolumeClaim"
    | "createNamespacedPod"
  >,
  storage: Pick<StorageV1Api, "createStorageClass" | "createCSIDriver">,
  isAlreadyExists: (err: unknown) => boolean,
): Promise<void> {
  const create = async (write: () => Promise<unknown>) => {
    try {
      await write();
    } catch (err) {
      if (!isAlreadyExists(err)) throw err;
    }
  };
  await create(() => core.createNamespace({ body: { metadata: meta(DEMO_NAMESPACE) } }));
  await create(() =>
    storage.createStorageClass({
      body: {
        metadata: meta(HOSTPATH_CLASS),
        provisioner: "kubernetes.io/host-path",
        reclaimPolicy: "Delete",
      },
    }),
  );
  await create(() =>
    storage.createCSIDriver({ body: { metadata: meta(DEMO_CSI_DRIVER), spec: { attachRequired: true } } }),
  );
  // A node whose kubelet leaves attaching to the controller (it sets this annotation itself).
  await create(() =>
    core.createNode({
      body: {
        metadata: {
          ...meta(DEMO_NODE),
          annotations: { "volumes.kubernetes.io/controller-managed-attach-detach": "true" },
        },
      },
    }),
  );
  await core.patchNodeStatus(
    {
      name: DEMO_NODE,
      body: {
        status: {
          conditions: [{ type: "Ready", status: "True", reason: "Demo", message: "no kubelet: kvc dev" }],
        },
      },
    },
    strategicMergePatch,
  );
  for (const pv of DEMO.volumes) await create(() => core.createPersistentVolume({ body: pv }));
  for (const pvc of [...DEMO.claims, DEMO_PENDING_CLAIM]) {
    await create(() => core.createNamespacedPersistentVolumeClaim({ namespace: DEMO_NAMESPACE, body: pvc }));
  }
  for (const p of DEMO.pods)
    await create(() => core.createNamespacedPod({ namespace: DEMO_NAMESPACE, body: p }));
}

export interface DemoState {
  claims: readonly V1PersistentVolumeClaim[];
  attachments: readonly V1VolumeAttachment[];
}

/** Every demo claim is Bound and every demo pod's volume is attached. */
export function isSettled(state: DemoState): boolean {
  const bound = state.claims.filter((c) => c.status?.phase === "Bound").length;
  const attached = state.attachments.filter((va) => va.status?.attached === true).length;
  return bound === DEMO.claims.length && attached === DEMO.pods.length;
}

/** The table `kvc dev` redraws: claims with phase and volume, then the VolumeAttachments. */
export function renderDemoTable(state: DemoState): string {
  const rows: string[][] = [["CLAIM", "CLASS", "PHASE", "VOLUME"]];
  for (const want of DEMO.claims) {
    const c = state.claims.find((x) => x.metadata?.name === want.metadata?.name);
    rows.push([
      want.metadata?.name ?? "",
      want.spec?.storageClassName ?? "",
      c?.status?.phase ?? "-",
      c?.spec?.volumeName ?? "",
    ]);
  }
  const table = [align(rows), ""];
  const vaRows: string[][] = [["VOLUMEATTACHMENT", "VOLUME", "NODE", "ATTACHED"]];
  for (const va of [...state.attachments].sort((a, b) =>
    (a.spec.source.persistentVolumeName ?? "").localeCompare(b.spec.source.persistentVolumeName ?? ""),
  )) {
    vaRows.push([
      `${(va.metadata?.name ?? "").slice(0, 16)}…`,
      va.spec.source.persistentVolumeName ?? "",
      va.spec.nodeName,
      String(va.status?.attached ?? false),
    ]);
  }
  if (vaRows.length === 1) vaRows.push(["(none yet)", "", "", ""]);
  table.push(align(vaRows));
  const bound = state.claims.filter((c) => c.status?.phase === "Bound").length;
  const attached = state.attachments.filter((va) => va.status?.attached === true).length;
  table.push(
    "",
    `${bound}/${DEMO.claims.length} claims Bound, ${attached}/${DEMO.pods.length} volumes attached` +
      (isSettled(state) ? " — settled" : ""),
  );
  return table.join("\n");
}

function align(rows: string[][]): string {
  const widths = rows[0]?.map((_, i) => Math.max(...rows.map((r) => (r[i] ?? "").length))) ?? [];
  return rows
    .map((r) =>
      r
        .map((cell, i) => cell.padEnd(widths[i] ?? 0))
        .join("  ")
        .trimEnd(),
    )
    .join("\n");
}
