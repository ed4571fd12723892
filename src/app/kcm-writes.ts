import { ANN_BIND_COMPLETED, ANN_BOUND_BY_CONTROLLER } from "../persistentvolume/annotations.js";
import { PV_PROTECTION_FINALIZER, PVC_PROTECTION_FINALIZER } from "../protection/finalizer.js";
import { PVC_UNUSED } from "../protection/unused-condition.js";
import type { ControllerName } from "./controller-names.js";

/**
 * Which of the volume loops' fields a field manager other than kvc wrote, read from an object's
 * metadata.managedFields as the apiserver sends them (JSON, before the informers trim them). Pure:
 * the warning built on it (log, Event, metric) is kcm-writes-warning.ts.
 *
 * The apiserver names a manager after the writer's User-Agent up to its first "/" (prefixFromUserAgent
 * in k8s.io/apiserver's handlers). Every client of kube-controller-manager has the User-Agent
 * "kube-controller-manager/<version> (<os>/<arch>) kubernetes/<commit>/<controller>" (client-go's
 * DefaultKubernetesUserAgent plus AddUserAgent), so all its loops write as "kube-controller-manager":
 * its other loops too (node lifecycle, TTL, ephemeral volumes ...). Only the fields that the four
 * replaced loops alone write count, never a whole entry. kvc writes as "kube-volume-controller".
 */
export const KCM_FIELD_MANAGER = "kube-controller-manager";

/** The kinds whose informers the check reads, by client-node model name (ResourceType.model). */
export const WATCHED_KINDS = {
  V1PersistentVolume: "PersistentVolume",
  V1PersistentVolumeClaim: "PersistentVolumeClaim",
  V1Node: "Node",
  V1VolumeAttachment: "VolumeAttachment",
} as const;

export type WatchedKind = (typeof WATCHED_KINDS)[keyof typeof WATCHED_KINDS];

/** A volume-loop field written by a foreign manager: what the warning names. */
export interface LoopWrite {
  manager: string;
  kind: WatchedKind;
  /** The field as a path, e.g. "spec.claimRef" or "metadata.finalizers[kubernetes.io/pv-protection]". */
  field: string;
  /** The replaced loop that writes this field. */
  loop: ControllerName;
  /** When the manager last wrote its entry (RFC 3339, seconds). */
  time: string;
}

interface LoopField {
  /** Keys down fieldsV1, e.g. ["f:spec", "f:claimRef"]. */
  readonly path: readonly string[];
  readonly field: string;
  readonly loop: ControllerName;
}

const BINDER = "persistentvolume-binder-controller";
const ATTACH_DETACH = "persistentvolume-attach-detach-controller";

const annotation = (name: string): LoopField => ({
  path: ["f:metadata", "f:annotations", `f:${name}`],
  field: `metadata.annotations[${name}]`,
  loop: BINDER,
});
const finalizer = (name: string, loop: ControllerName): LoopField => ({
  path: ["f:metadata", "f:finalizers", `v:${JSON.stringify(name)}`],
  field: `metadata.finalizers[${name}]`,
  loop,
});
const field = (path: string, loop: ControllerName): LoopField => ({
  path: path.split(".").map((p) => `f:${p}`),
  field: path,
  loop,
});

/*
 * What each replaced loop writes of each kind (upstream's pv_controller, attach/detach's node status
 * updater and CSI attacher, the protection controllers). A protection finalizer shows up only where
 * the loop added it: the admission plugin adds most (owned by no manager), and a removal leaves no
 * owned field behind.
 */
const LOOP_FIELDS: Record<WatchedKind, readonly LoopField[]> = {
  PersistentVolume: [
    field("spec.claimRef", BINDER),
    field("status.phase", BINDER),
    annotation(ANN_BOUND_BY_CONTROLLER),
    finalizer(PV_PROTECTION_FINALIZER, "persistentvolume-protection-controller"),
  ],
  PersistentVolumeClaim: [
    field("spec.volumeName", BINDER),
    field("status.phase", BINDER),
    annotation(ANN_BIND_COMPLETED),
    annotation(ANN_BOUND_BY_CONTROLLER),
    finalizer(PVC_PROTECTION_FINALIZER, "persistentvolumeclaim-protection-controller"),
    // The PersistentVolumeClaimUnusedSinceTime condition: what shows the protection loop when the
    // finalizer (added by admission, owned by nobody) does not.
    {
      path: ["f:status", "f:conditions", `k:${JSON.stringify({ type: PVC_UNUSED })}`],
      field: `status.conditions[${PVC_UNUSED}]`,
      loop: "persistentvolumeclaim-protection-controller",
    },
  ],
  // KCM's node lifecycle loop writes the same status entry (conditions): only volumesAttached counts.
  // The list is atomic, so kvc's first change of it takes it over; until then a node KCM attached to
  // before the cut-over, once KCM marks it unreachable, shows a write that is not attach/detach's.
  Node: [field("status.volumesAttached", ATTACH_DETACH)],
  // Created by attach/detach's CSI attacher; nothing else in KCM writes one.
  VolumeAttachment: [field("spec.attacher", ATTACH_DETACH)],
};

// A default parameter's array literal would be a new array on every call, on the hot path.
const KCM_ONLY: readonly string[] = [KCM_FIELD_MANAGER];

/**
 * The first volume-loop field of `kind` that one of `managers` wrote at or after `since`, per the
 * object's managedFields; undefined if none. `since` is RFC 3339 in UTC with whole seconds, as the
 * apiserver writes entry times, so the times compare as strings (no Date per entry). An entry's time
 * is that of the manager's latest write to any of its fields: the newer the entry, the likelier the
 * owned volume field is the one just written. Allocates only when it finds a write.
 */
export function loopWriteIn(
  kind: WatchedKind,
  managedFields: unknown,
  since: string,
  managers: readonly string[] = KCM_ONLY,
): LoopWrite | undefined {
  if (!Array.isArray(managedFields)) return undefined;
  for (const entry of managedFields as unknown[]) {
    if (entry === null || typeof entry !== "object") continue;
    const { manager, time, fieldsV1 } = entry as { manager?: unknown; time?: unknown; fieldsV1?: unknown };
    if (typeof manager !== "string" || !managers.includes(manager)) continue;
    if (typeof time !== "string" || time < since) continue;
    for (const f of LOOP_FIELDS[kind]) {
      if (owns(fieldsV1, f.path)) return { manager, kind, field: f.field, loop: f.loop, time };
    }
  }
  return undefined;
}

function owns(fieldsV1: unknown, path: readonly string[]): boolean {
  let node = fieldsV1;
  for (const key of path) {
    if (node === null || typeof node !== "object") return false;
    node = (node as Record<string, unknown>)[key];
  }
  return node !== undefined;
}

/** An instant as the apiserver writes managedFields times: RFC 3339, UTC, whole seconds. */
export function managedFieldsTime(ms: number): string {
  return new Date(Math.floor(ms / 1000) * 1000).toISOString().replace(".000Z", "Z");
}
