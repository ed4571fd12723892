import type { CoreV1Event, V1PersistentVolume, V1PersistentVolumeClaim } from "@kubernetes/client-node";
import {
  ANN_DYNAMICALLY_PROVISIONED,
  FINALIZER_EXTERNAL_PV_PROTECTION,
  FINALIZER_IN_TREE_PV_PROTECTION,
  ReclaimPolicy,
  VolumePhase,
} from "../persistentvolume/annotations.js";
import { getVolumeClass, isVolumeBoundToClaim } from "../persistentvolume/pv-helpers.js";
import { PV_PROTECTION_FINALIZER } from "../protection/finalizer.js";

/** `kvc explain pv`: a volume's phase and why, and what holds its deletion. Pure. */

export interface VolumeInputs {
  volume: V1PersistentVolume;
  /** The claim its claimRef names, when it exists. */
  claim: V1PersistentVolumeClaim | undefined;
  /** Events about the volume, any order. */
  events: readonly CoreV1Event[];
}

export const VOLUME_CONCLUSIONS = [
  "NotSynced",
  "Available",
  "PreBound",
  "Bound",
  "ClaimGone",
  "Retained",
  "WillDelete",
  "WillRecycle",
  "Failed",
] as const;
export type VolumeConclusionKind = (typeof VOLUME_CONCLUSIONS)[number];

export interface VolumeExplanation {
  apiVersion: "kvc.explain/v1";
  kind: "VolumeExplanation";
  volume: {
    name: string;
    phase: string;
    storageClass: string | null;
    capacity: string | null;
    reclaimPolicy: string;
    claimRef: string | null;
    provisionedBy: string | null;
    deletionTimestamp: string | null;
  };
  conclusion: { kind: VolumeConclusionKind; message: string };
  /** Why deletion waits, one entry per finalizer. */
  finalizers: { name: string; meaning: string }[];
  lastWarning: { reason: string; message: string; time: string | null } | null;
  suggestions: string[];
}

const FINALIZER_MEANING: Record<string, string> = {
  [PV_PROTECTION_FINALIZER]:
    "pv-protection: removed by kvc's pv-protection controller once the volume is not Bound",
  [FINALIZER_IN_TREE_PV_PROTECTION]:
    "the binder removes it after deleting the in-tree volume's storage (reclaim policy Delete)",
  [FINALIZER_EXTERNAL_PV_PROTECTION]:
    "the CSI external-provisioner removes it after deleting the storage: is it running?",
};

export function explainVolume({ volume, claim, events }: VolumeInputs): VolumeExplanation {
  const spec = volume.spec ?? {};
  const ref = spec.claimRef;
  const refText = ref ? `${ref.namespace ?? ""}/${ref.name ?? ""}` : null;
  const phase = volume.status?.phase ?? "";
  const policy = spec.persistentVolumeReclaimPolicy ?? ReclaimPolicy.Retain;
  const provisionedBy = volume.metadata?.annotations?.[ANN_DYNAMICALLY_PROVISIONED] ?? null;
  const warning = lastWarning(events);
  const suggestions: string[] = [];
  let kind: VolumeConclusionKind;
  let message: string;
  // The claim ref is the truth the binder acts on; the phase is its last report (syncVolume).
  const claimMatches = claim !== undefined && isVolumeBoundToClaim(volume, claim);
  switch (phase) {
    case "":
    case VolumePhase.Pending:
      kind = "NotSynced";
      message = "the binder has not synced this volume yet (is kvc running?)";
      break;
    case VolumePhase.Available:
      if (refText) {
        kind = "PreBound";
        message = `pre-bound to claim ${refText}, which ${claim ? "exists: binding follows" : "does not exist yet"}`;
      } else {
        kind = "Available";
        message = `free: a claim of class "${getVolumeClass(volume)}" asking for at most ${spec.capacity?.storage ?? "?"} can bind it`;
      }
      break;
    case VolumePhase.Bound:
      if (claimMatches) {
        kind = "Bound";
        message = `bound to claim ${refText ?? ""}`;
      } else {
        kind = "ClaimGone";
        message = `its claim ${refText ?? ""} ${claim ? "is another object now (UID differs)" : "no longer exists"}: the binder releases it`;
      }
      break;
    case VolumePhase.Released:
      if (policy === ReclaimPolicy.Delete) {
        kind = "WillDelete";
        message = `released by ${refText ?? "its claim"}; reclaim policy Delete: the volume and its storage are deleted${
          provisionedBy && !provisionedBy.startsWith("kubernetes.io/")
            ? ` by ${provisionedBy}`
            : " by the binder"
        }`;
      } else if (policy === ReclaimPolicy.Recycle) {
        kind = "WillRecycle";
        message = `released by ${refText ?? "its claim"}; reclaim policy Recycle: scrubbed, then Available again`;
      } else {
        kind = "Retained";
        message = `released by ${refText ?? "its claim"}; reclaim policy Retain: kept with its data, never bound again as is`;
        suggestions.push(
          `to reuse it, remove its claimRef: kubectl patch pv ${volume.metadata?.name ?? ""} --type=json -p '[{"op":"remove","path":"/spec/claimRef"}]'`,
        );
      }
      break;
    default:
      kind = "Failed";
      message = `phase ${phase}: ${volume.status?.message || warning?.message || "no message"}`;
      suggestions.push(
        "fix the cause in the last warning, or delete the volume's storage by hand and the PV",
      );
  }
  const finalizers = (volume.metadata?.finalizers ?? []).map((name) => ({
    name,
    meaning: FINALIZER_MEANING[name] ?? "set by another component, which alone removes it",
  }));
  const deleting = volume.metadata?.deletionTimestamp;
  if (deleting && finalizers.length) {
    suggestions.push(`deletion waits for its finalizers: ${finalizers.map((f) => f.name).join(", ")}`);
  }
  return {
    apiVersion: "kvc.explain/v1",
    kind: "VolumeExplanation",
    volume: {
      name: volume.metadata?.name ?? "",
      phase: phase || "Pending",
      storageClass: getVolumeClass(volume) || null,
      capacity: spec.capacity?.storage ?? null,
      reclaimPolicy: policy,
      claimRef: refText,
      provisionedBy,
      deletionTimestamp: deleting ? new Date(deleting).toISOString() : null,
    },
    conclusion: { kind, message },
    finalizers,
    lastWarning: warning,
    suggestions,
  };
}

function lastWarning(events: readonly CoreV1Event[]): VolumeExplanation["lastWarning"] {
  const time = (e: CoreV1Event) =>
    new Date(e.lastTimestamp ?? e.eventTime ?? e.metadata.creationTimestamp ?? 0);
  const warnings = events
    .filter((e) => e.type === "Warning")
    .sort((a, b) => time(b).getTime() - time(a).getTime());
  const last = warnings[0];
  if (!last) return null;
  return { reason: last.reason ?? "", message: last.message ?? "", time: time(last).toISOString() };
}
