import type {
  CoreV1Event,
  V1Node,
  V1Pod,
  V1PersistentVolume,
  V1PersistentVolumeClaim,
  V1VolumeAttachment,
} from "@kubernetes/client-node";
import type { ControllerName } from "../app/controller-names.js";
import {
  ANN_BETA_STORAGE_PROVISIONER,
  ANN_DYNAMICALLY_PROVISIONED,
  ANN_STORAGE_PROVISIONER,
  EVENT_COMPONENT,
  FINALIZER_EXTERNAL_PV_PROTECTION,
  FINALIZER_IN_TREE_PV_PROTECTION,
} from "../persistentvolume/annotations.js";
import { IN_TREE_PLUGIN_PREFIX, modifyDeletionFinalizers } from "../persistentvolume/csi-migration.js";
import { accessModesKey } from "../persistentvolume/pv-helpers.js";
import { PV_PROTECTION_FINALIZER, PVC_PROTECTION_FINALIZER } from "../protection/finalizer.js";
import { unusedConditionValue } from "../protection/unused-condition.js";
import { quantityValue, tryParseQuantity } from "../util/quantity.js";
import { inTreeCsiMigration } from "../volume/csimigration/plugin-manager.js";
import { RECYCLER_POD_PREFIX } from "../volume/recycler.js";

/** What a decision is about, as issue 15 lists them. */
export type DecisionKind =
  | "binding"
  | "provisioning"
  | "phase"
  | "reclaim"
  | "finalizer-removal"
  | "volume-attachment"
  | "volumes-attached"
  | "event"
  | "claim-status"
  | "condition";

/**
 * One decision of a volume loop, either intended (a write kvc would have sent) or observed (a change
 * KCM made, seen through the informers). Decisions with the same `key` are compared by `value`.
 */
export interface Decision {
  controller: ControllerName;
  kind: DecisionKind;
  /** The decision's subject and kind, e.g. `binding pvc ns/name`. */
  key: string;
  /** What was decided, e.g. the PV a claim is bound to. */
  value: string;
  /** Values upstream could equally have chosen (equal-capacity volumes it leaves to map order). */
  equivalents?: readonly string[];
}

const BINDER: ControllerName = "persistentvolume-binder-controller";
const ATTACH_DETACH: ControllerName = "persistentvolume-attach-detach-controller";
const PVC_PROTECTION: ControllerName = "persistentvolumeclaim-protection-controller";

/** The controller that owns each finalizer it removes. */
const FINALIZER_OWNERS: Record<string, ControllerName> = {
  [PVC_PROTECTION_FINALIZER]: "persistentvolumeclaim-protection-controller",
  [PV_PROTECTION_FINALIZER]: "persistentvolume-protection-controller",
  [FINALIZER_IN_TREE_PV_PROTECTION]: BINDER,
  [FINALIZER_EXTERNAL_PV_PROTECTION]: BINDER,
};

/** The event sources of the loops kvc replaces, by component. */
const EVENT_SOURCES: Record<string, ControllerName> = {
  [EVENT_COMPONENT]: BINDER,
  "attachdetach-controller": ATTACH_DETACH,
};

type Meta = {
  metadata?: { name?: string; namespace?: string; finalizers?: string[]; deletionTimestamp?: unknown };
};

function nameOf(o: Meta): string {
  const { name = "", namespace } = o.metadata ?? {};
  return namespace ? `${namespace}/${name}` : name;
}

/**
 * Whether upstream's owner of `finalizer` removes it from `before` (anyone else may: a person, a
 * cleanup script, an external provisioner after deleting its volume; that is no decision of the loops
 * compared). The protection controllers remove theirs only from an object being deleted; the binder
 * its in-tree finalizer once it deleted a released volume's storage, and either finalizer where the
 * volume's reclaim policy or CSI migration says it does not belong (modifyDeletionFinalizers).
 */
function removedByOwner(finalizer: string, before: Meta & { status?: { phase?: string } }): boolean {
  if (finalizer === PVC_PROTECTION_FINALIZER || finalizer === PV_PROTECTION_FINALIZER) {
    return before.metadata?.deletionTimestamp != null;
  }
  const volume = before as V1PersistentVolume;
  const released = volume.status?.phase === "Released" || volume.status?.phase === "Failed";
  if (finalizer === FINALIZER_IN_TREE_PV_PROTECTION && released) return true;
  const { finalizers } = modifyDeletionFinalizers(inTreeCsiMigration, volume);
  return !(finalizers ?? []).includes(finalizer);
}

function removedFinalizers(resource: string, before: Meta, after: Meta | undefined): Decision[] {
  const kept = new Set(after?.metadata?.finalizers ?? []);
  return (before.metadata?.finalizers ?? [])
    .filter((f) => !kept.has(f) && FINALIZER_OWNERS[f] !== undefined && removedByOwner(f, before))
    .map((f) => ({
      controller: FINALIZER_OWNERS[f] as ControllerName,
      kind: "finalizer-removal",
      key: `finalizer-removal ${resource} ${nameOf(before)} ${f}`,
      value: "removed",
    }));
}

const phaseKey = (resource: string, name: string) => `phase ${resource} ${name}`;

function phase(resource: string, before: string | undefined, after: string | undefined, name: string) {
  if (after === undefined || after === before) return [];
  const d: Decision = { controller: BINDER, kind: "phase", key: phaseKey(resource, name), value: after };
  return [d];
}

/** A decision one side makes alone, as the consequence of a tie. */
export interface TieConsequence {
  side: "kvc" | "upstream";
  key: string;
  value: string;
}

/**
 * What follows from a tie (both sides bound the claim, to different but equally good volumes), one
 * side alone: each marks the volume it chose Bound. Nothing else: a later phase of either volume, or
 * its binding to another claim, is a decision of its own.
 */
export function tieConsequences(kvc: Decision, upstream: Decision): TieConsequence[] {
  if (kvc.kind !== "binding" || upstream.kind !== "binding") return [];
  return [
    { side: "kvc", key: phaseKey("pv", kvc.value), value: "Bound" },
    { side: "upstream", key: phaseKey("pv", upstream.value), value: "Bound" },
  ];
}

/**
 * Whether the binder itself creates the volumes of `provisioner`: an in-tree plugin not migrated to
 * CSI. Other volumes are created by an external provisioner; the binder's decision was the hand-off.
 */
function provisionedInTree(provisioner: string): boolean {
  return (
    provisioner.startsWith(IN_TREE_PLUGIN_PREFIX) &&
    inTreeCsiMigration.migratedDriver(provisioner) === undefined
  );
}

/**
 * The binder's decisions in a PV's change (undefined before: created; undefined after: deleted).
 * A PV's creation counts only when the binder provisioned it (a user's or an external provisioner's
 * PV is no decision of the binder), and then it is the claim's binding too: the binder creates the
 * volume pre-bound to the claim (upstream provisionClaimOperation sets its claimRef), and the claim's
 * volumeName that follows only completes it. A claimRef naming a claim is the claim's binding, as the
 * claim's volumeName is: the same decision seen twice.
 */
export function volumeDecisions(
  before: V1PersistentVolume | undefined,
  after: V1PersistentVolume | undefined,
): Decision[] {
  const name = nameOf(after ?? before ?? {});
  const out: Decision[] = [];
  if (!before) {
    const provisioner = after?.metadata?.annotations?.[ANN_DYNAMICALLY_PROVISIONED];
    const claim = after?.spec?.claimRef;
    if (provisioner && claim && provisionedInTree(provisioner)) {
      out.push({
        controller: BINDER,
        kind: "provisioning",
        key: `provisioning pvc ${claim.namespace ?? ""}/${claim.name ?? ""}`,
        value: `provisioned by ${provisioner}`,
      });
      out.push({
        controller: BINDER,
        kind: "binding",
        key: `binding pvc ${claim.namespace ?? ""}/${claim.name ?? ""}`,
        value: name,
      });
    }
    return out;
  }
  const deleting = (v: V1PersistentVolume | undefined) => !v || v.metadata?.deletionTimestamp !== undefined;
  // The reclaim policy's deletion: asked for (not completed: a finalizer may hold it) of a released or
  // failed Delete volume. A user may delete any PV, e.g. a Bound one, later Released by its deletion.
  const last = before.status?.phase;
  if (
    deleting(after) &&
    !deleting(before) &&
    (last === "Released" || last === "Failed") &&
    before.spec?.persistentVolumeReclaimPolicy === "Delete"
  ) {
    out.push({ controller: BINDER, kind: "reclaim", key: `reclaim pv ${name}`, value: "delete" });
  }
  if (!after) return [...out, ...removedFinalizers("pv", before, after)];
  const ref = after.spec?.claimRef;
  if (ref?.name && ref.name !== before.spec?.claimRef?.name) {
    out.push({
      controller: BINDER,
      kind: "binding",
      key: `binding pvc ${ref.namespace ?? ""}/${ref.name}`,
      value: name,
    });
  }
  out.push(...phase("pv", before.status?.phase, after.status?.phase, name));
  return [...out, ...removedFinalizers("pv", before, after)];
}

/**
 * A volume's recycle: its recycler pod created (kvc's and upstream's have the same name, after the
 * volume). Its outcome shows in the events and the volume's phase.
 */
export function recyclerPodDecisions(before: V1Pod | undefined, after: V1Pod | undefined): Decision[] {
  const name = after?.metadata?.name;
  if (before || !name?.startsWith(RECYCLER_POD_PREFIX)) return [];
  const volume = name.slice(RECYCLER_POD_PREFIX.length);
  return [{ controller: BINDER, kind: "reclaim", key: `reclaim pv ${volume}`, value: "recycle" }];
}

/** The key of the pvc-protection controller's Unused condition of `claim`. */
export function unusedConditionKey(claim: V1PersistentVolumeClaim): string {
  return `unused pvc ${nameOf(claim)}`;
}

/** The binder's decisions in a claim's change; a claim's creation is the user's. */
export function claimDecisions(
  before: V1PersistentVolumeClaim | undefined,
  after: V1PersistentVolumeClaim | undefined,
): Decision[] {
  if (!before) return [];
  const name = nameOf(before);
  if (!after) return removedFinalizers("pvc", before, after);
  const out: Decision[] = [];
  const volume = after.spec?.volumeName;
  if (volume && volume !== before.spec?.volumeName) {
    out.push({ controller: BINDER, kind: "binding", key: `binding pvc ${name}`, value: volume });
  }
  const handedTo = (c: V1PersistentVolumeClaim) =>
    c.metadata?.annotations?.[ANN_STORAGE_PROVISIONER] ??
    c.metadata?.annotations?.[ANN_BETA_STORAGE_PROVISIONER];
  const provisioner = handedTo(after);
  if (provisioner && provisioner !== handedTo(before)) {
    out.push({
      controller: BINDER,
      kind: "provisioning",
      key: `provisioning-handoff pvc ${name}`,
      value: provisioner,
    });
  }
  out.push(...phase("pvc", before.status?.phase, after.status?.phase, name));
  out.push(...claimStatus(name, before, after));
  const unused = unusedConditionValue(after);
  if (unused !== undefined && unused !== unusedConditionValue(before)) {
    out.push({
      controller: PVC_PROTECTION,
      kind: "condition",
      key: unusedConditionKey(after),
      value: unused,
    });
  }
  return [...out, ...removedFinalizers("pvc", before, after)];
}

/**
 * The binder's claim status beside the phase (upstream updateClaimStatus): the access modes and
 * capacity it copies from the volume as the claim becomes Bound, or clears as it is Lost. Only with a
 * phase change: a capacity changed alone is a resize (the expander's, not compared). The capacity
 * compared by value (1Gi is 1024Mi).
 */
function claimStatus(
  name: string,
  before: V1PersistentVolumeClaim,
  after: V1PersistentVolumeClaim,
): Decision[] {
  const text = ({ status }: V1PersistentVolumeClaim) => {
    const capacity = status?.capacity?.storage;
    const parsed = tryParseQuantity(capacity);
    const value = parsed ? String(quantityValue(parsed)) : (capacity ?? "<none>");
    return `accessModes ${accessModesKey(status?.accessModes) || "<none>"}, capacity ${value}`;
  };
  const value = text(after);
  if (before.status?.phase === after.status?.phase || value === text(before)) return [];
  return [{ controller: BINDER, kind: "claim-status", key: `claim-status pvc ${name}`, value }];
}

/** A VolumeAttachment's creation (for which volume and node) and deletion (deletion requested). */
export function attachmentDecisions(
  before: V1VolumeAttachment | undefined,
  after: V1VolumeAttachment | undefined,
): Decision[] {
  const va = after ?? before;
  if (!va) return [];
  const key = `volume-attachment ${nameOf(va)}`;
  const d = (value: string): Decision[] => [
    { controller: ATTACH_DETACH, kind: "volume-attachment", key, value },
  ];
  if (!before && after) {
    // Optional chaining throughout: a recorded request's body is whatever the client sent.
    const spec = after.spec as Partial<V1VolumeAttachment["spec"]> | undefined;
    const volume = spec?.source?.persistentVolumeName ?? "inline";
    return d(`created ${spec?.attacher ?? ""} ${volume} on ${spec?.nodeName ?? ""}`);
  }
  const deleting = (v: V1VolumeAttachment | undefined) => !v || v.metadata?.deletionTimestamp !== undefined;
  return deleting(after) && !deleting(before) ? d("deleted") : [];
}

/**
 * The attach/detach controller's report of a node's attached volumes, per volume: reported attached,
 * or no longer. Per volume, not the whole list: the two controllers may reach the same list through
 * different intermediate ones (one reporting two attaches at once, the other one by one).
 */
export function nodeDecisions(before: V1Node | undefined, after: V1Node | undefined): Decision[] {
  if (!before || !after) return [];
  const names = (n: V1Node) => new Set((n.status?.volumesAttached ?? []).map((v) => v.name));
  const [was, is] = [names(before), names(after)];
  const d = (volume: string, value: string): Decision => ({
    controller: ATTACH_DETACH,
    kind: "volumes-attached",
    key: `volumes-attached node ${nameOf(after)} ${volume}`,
    value,
  });
  return [
    ...[...is].filter((v) => !was.has(v)).map((v) => d(v, "attached")),
    ...[...was].filter((v) => !is.has(v)).map((v) => d(v, "detached")),
  ].sort((a, b) => a.key.localeCompare(b.key));
}

/** An event of one of kvc's loops: its reason, about its object (repeats are one decision). */
export function eventDecisions(event: CoreV1Event): Decision[] {
  const controller = EVENT_SOURCES[event.source?.component ?? event.reportingComponent ?? ""];
  if (!controller || !event.reason) return [];
  const o = (event.involvedObject as CoreV1Event["involvedObject"] | undefined) ?? {};
  const about = `${o.kind ?? ""} ${o.namespace ? `${o.namespace}/` : ""}${o.name ?? ""}`;
  return [
    {
      controller,
      kind: "event",
      key: `event ${about} ${event.reason}`,
      value: `${event.type} ${event.reason}`,
    },
  ];
}
