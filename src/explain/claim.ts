import type {
  V1CSIDriver,
  V1Lease,
  V1Node,
  V1PersistentVolume,
  V1PersistentVolumeClaim,
  V1StorageClass,
} from "@kubernetes/client-node";
import { ANN_BIND_COMPLETED, ANN_SELECTED_NODE, VolumeBindingMode } from "../persistentvolume/annotations.js";
import { defaultStorageClass } from "../persistentvolume/provision.js";
import { checkVolumeSatisfyClaim } from "../persistentvolume/claim-sync.js";
import {
  BETA_STORAGE_CLASS_ANNOTATION,
  getClaimClass,
  isDelayBindingMode,
  isVolumeBoundToClaim,
} from "../persistentvolume/pv-helpers.js";
import {
  claimQuery,
  labelSelectorText,
  VolumeIndex,
  volumeVerdict,
  type MismatchReason,
  type ReasonCode,
} from "../persistentvolume/volume-index.js";
import { compareQuantities, tryParseQuantity, type Quantity } from "../util/quantity.js";
import { deepCopy } from "../util/deep-copy.js";

/**
 * `kvc explain pvc`: what the PV binder does with a claim and why, decided by the binder's own
 * matcher (VolumeIndex.findBestMatch for the choice, volumeVerdict for each volume) over objects
 * read from the API. Pure: the caller reads the objects.
 */

/** Everything the binder would look at for this claim. */
export interface ClaimInputs {
  claim: V1PersistentVolumeClaim;
  volumes: readonly V1PersistentVolume[];
  classes: readonly V1StorageClass[];
  /** The selected node, when the claim names one and it could be read. */
  selectedNode?: V1Node | undefined;
  csiDrivers: readonly V1CSIDriver[];
  /** Undefined when they could not be listed (e.g. forbidden). */
  leases: readonly V1Lease[] | undefined;
  now: Date;
}

export const CONCLUSIONS = [
  "Bound",
  "Lost",
  "BindRequested",
  "WaitForRequestedVolume",
  "Bind",
  "Provision",
  "WaitForFirstConsumer",
  "ClassNotFound",
  "WaitForVolumeAvailable",
  "NoMatchNoClass",
  "Invalid",
] as const;
export type ConclusionKind = (typeof CONCLUSIONS)[number];

export interface VolumeVerdict {
  name: string;
  /** Match: the binder may use it; the chosen one carries `chosen`. */
  verdict: "Match" | "Mismatch";
  chosen: boolean;
  preBound: boolean;
  capacity: string | null;
  reasons: MismatchReason[];
}

export interface ProvisionerStatus {
  name: string;
  /** in-tree: kvc's own plugins; external: a CSI driver or another provisioner process. */
  kind: "in-tree" | "external" | "none";
  /** Whether something suggests it is running: a CSIDriver object or a held leader Lease. */
  alive: boolean | null;
  evidence: string;
}

export interface ClaimExplanation {
  apiVersion: "kvc.explain/v1";
  kind: "ClaimExplanation";
  claim: {
    namespace: string;
    name: string;
    phase: string;
    volumeName: string | null;
    demands: {
      storageClass: string | null;
      /** spec, annotation (beta), default (assigned by the binder), none. */
      storageClassSource: "spec" | "annotation" | "default" | "none";
      accessModes: string[];
      size: string | null;
      volumeMode: string;
      selector: string | null;
      bindingMode: string | null;
      selectedNode: string | null;
      volumeAttributesClass: string | null;
    };
  };
  volumes: {
    total: number;
    matching: number;
    /** Volumes failing each reason (a volume can count under several). */
    byReason: Partial<Record<ReasonCode, number>>;
    verdicts: VolumeVerdict[];
  };
  conclusion: {
    kind: ConclusionKind;
    volume: string | null;
    provisioner: ProvisionerStatus | null;
    message: string;
  };
  suggestions: string[];
}

const LEASE_STALE_MS = 5 * 60_000;

export function explainClaim(inputs: ClaimInputs): ClaimExplanation {
  const { claim } = inputs;
  const spec = claim.spec ?? {};
  const annotations = claim.metadata?.annotations ?? {};
  const classes = { get: (name: string) => inputs.classes.find((c) => c.metadata?.name === name) };
  const index = new VolumeIndex();
  for (const pv of inputs.volumes) index.add(pv);
  // syncUnboundClaim's matching path: the claim names no volume and has never been bound.
  const matching = annotations[ANN_BIND_COMPLETED] === undefined && !spec.volumeName;
  const bestMatch = (c: V1PersistentVolumeClaim) => {
    const delay = isDelayBindingMode(c, classes);
    return delay instanceof Error ? undefined : index.findBestMatch(c, delay).volume;
  };
  // The binder matches the claim as it is first; only when nothing matches does it give a claim
  // that names no class at all the default class, then match again.
  const noClass = !(BETA_STORAGE_CLASS_ANNOTATION in annotations) && spec.storageClassName === undefined;
  const defaultClass =
    matching && noClass && !bestMatch(claim) ? defaultStorageClass(inputs.classes) : undefined;
  let effective = claim;
  if (defaultClass) {
    effective = deepCopy(claim);
    (effective.spec ??= {}).storageClassName = defaultClass.metadata?.name ?? "";
  }
  const className = getClaimClass(effective);
  const storageClass = className ? classes.get(className) : undefined;
  const delayBinding = isDelayBindingMode(effective, classes);
  const selectedNodeName = annotations[ANN_SELECTED_NODE];
  const nodeLabels = inputs.selectedNode?.metadata?.labels;
  // With a selected node the scheduler has chosen (FindMatchingVolume's node path); else the controller's.
  const target =
    selectedNodeName !== undefined ? { name: selectedNodeName, labels: nodeLabels ?? {} } : undefined;

  const demands: ClaimExplanation["claim"]["demands"] = {
    storageClass: className || null,
    storageClassSource: defaultClass
      ? "default"
      : BETA_STORAGE_CLASS_ANNOTATION in annotations
        ? "annotation"
        : spec.storageClassName !== undefined
          ? "spec"
          : "none",
    accessModes: [...(spec.accessModes ?? [])],
    size: spec.resources?.requests?.storage ?? null,
    volumeMode: spec.volumeMode ?? "Filesystem",
    selector: spec.selector ? labelSelectorText(spec.selector) : null,
    // As the binder reads it: no class, or a class that does not exist, binds at once.
    bindingMode: storageClass
      ? (storageClass.volumeBindingMode ?? null)
      : delayBinding === false
        ? VolumeBindingMode.Immediate
        : null,
    selectedNode: selectedNodeName ?? null,
    volumeAttributesClass: spec.volumeAttributesClassName ?? null,
  };
  const base = {
    apiVersion: "kvc.explain/v1" as const,
    kind: "ClaimExplanation" as const,
    claim: {
      namespace: claim.metadata?.namespace ?? "",
      name: claim.metadata?.name ?? "",
      phase: claim.status?.phase ?? "Pending",
      volumeName: spec.volumeName || null,
      demands,
    },
  };

  const query = claimQuery(effective, target);
  if (query instanceof Error && matching) {
    return {
      ...base,
      volumes: { total: inputs.volumes.length, matching: 0, byReason: {}, verdicts: [] },
      conclusion: conclusion("Invalid", `the binder cannot match this claim: ${query.message}`),
      suggestions: ["fix the claim's spec (selector, access modes, storage request) and re-create it"],
    };
  }
  const chosen = matching ? bestMatch(effective) : undefined;
  const verdicts =
    query instanceof Error
      ? []
      : inputs.volumes.map((pv): VolumeVerdict => {
          const reasons = volumeVerdict(query, pv);
          const ref = pv.spec?.claimRef;
          return {
            name: pv.metadata?.name ?? "",
            verdict: reasons.length === 0 ? "Match" : "Mismatch",
            chosen: pv === chosen,
            preBound: ref != null && reasons.every((r) => r.code !== "BoundToOther"),
            capacity: pv.spec?.capacity?.storage ?? null,
            reasons,
          };
        });
  const byReason: Partial<Record<ReasonCode, number>> = {};
  for (const v of verdicts) for (const r of v.reasons) byReason[r.code] = (byReason[r.code] ?? 0) + 1;
  if (!(query instanceof Error)) verdicts.sort(nearestFirst(query.request));
  const volumes = {
    total: inputs.volumes.length,
    matching: verdicts.filter((v) => v.verdict === "Match").length,
    byReason,
    verdicts,
  };

  const decided = decide(inputs, effective, {
    chosen,
    className,
    storageClass,
    delayBinding,
    defaultClass: defaultClass?.metadata?.name,
    verdicts,
    turningAvailable: matching && !chosen ? index.findTurningAvailable(effective) : undefined,
  });
  return { ...base, volumes, conclusion: decided, suggestions: suggest(decided, verdicts, demands) };
}

interface Decision {
  chosen: V1PersistentVolume | undefined;
  className: string;
  storageClass: V1StorageClass | undefined;
  /** isDelayBindingMode's answer: an Error stops the binder's matching path. */
  delayBinding: boolean | Error;
  defaultClass: string | undefined;
  verdicts: readonly VolumeVerdict[];
  /** An unbound volume that fits and is not yet Available (VolumeIndex.findTurningAvailable). */
  turningAvailable: V1PersistentVolume | undefined;
}

/** syncClaim's branches (claim-sync.ts), in its order. */
function decide(
  inputs: ClaimInputs,
  claim: V1PersistentVolumeClaim,
  d: Decision,
): ClaimExplanation["conclusion"] {
  const annotations = claim.metadata?.annotations ?? {};
  const volumeName = claim.spec?.volumeName ?? "";
  if (annotations[ANN_BIND_COMPLETED] !== undefined) {
    const pv = inputs.volumes.find((v) => v.metadata?.name === volumeName);
    const ref = pv?.spec?.claimRef;
    // syncBoundClaim: a volume whose claimRef holds another UID belongs to another claim.
    if (volumeName && pv && ref && (ref.uid ?? "") !== (claim.metadata?.uid ?? "")) {
      return conclusion(
        "Lost",
        `volume ${volumeName} is bound to another claim (${ref.namespace ?? ""}/${ref.name ?? ""}): the claim is Lost (ClaimMisbound)`,
        volumeName,
      );
    }
    if (volumeName && pv) return conclusion("Bound", `bound to volume ${volumeName}`, volumeName);
    return conclusion(
      "Lost",
      volumeName
        ? `the claim's volume ${volumeName} no longer exists: the claim is Lost`
        : "the bound claim lost its volumeName: the claim is Lost",
      volumeName || null,
    );
  }
  if (volumeName) {
    // syncUnboundClaim's requested-volume path: the binder's own checkVolumeSatisfyClaim, where
    // the selector and the volume's phase do not count.
    const pv = inputs.volumes.find((v) => v.metadata?.name === volumeName);
    if (!pv) {
      return conclusion(
        "WaitForRequestedVolume",
        `the claim asks for volume ${volumeName}, which does not exist; the binder waits for it`,
        volumeName,
      );
    }
    const ref = pv.spec?.claimRef;
    if (ref == null) {
      const mismatch = checkVolumeSatisfyClaim(pv, claim);
      if (mismatch === undefined)
        return conclusion("BindRequested", `would bind the requested volume ${volumeName}`, volumeName);
      return conclusion(
        "WaitForRequestedVolume",
        `cannot bind to the requested volume ${volumeName}: ${mismatch}; the claim stays Pending`,
        volumeName,
      );
    }
    if (isVolumeBoundToClaim(pv, claim)) {
      return conclusion(
        "BindRequested",
        `would bind the requested volume ${volumeName}, whose claimRef names this claim`,
        volumeName,
      );
    }
    return conclusion(
      "WaitForRequestedVolume",
      `the requested volume ${volumeName} is already bound to a different claim (${ref.namespace ?? ""}/${ref.name ?? ""}); the claim stays Pending`,
      volumeName,
    );
  }
  if (d.delayBinding instanceof Error) {
    return conclusion("Invalid", `the binder cannot sync this claim: ${d.delayBinding.message}`);
  }
  if (d.chosen) {
    const name = d.chosen.metadata?.name ?? "";
    return conclusion("Bind", `would bind volume ${name}`, name);
  }
  const selectedNode = annotations[ANN_SELECTED_NODE];
  const prefix = d.defaultClass ? `the binder assigns the default class ${d.defaultClass}, then ` : "";
  if (d.delayBinding && selectedNode === undefined) {
    const fits = d.verdicts.filter((v) => v.verdict === "Match").length;
    return conclusion(
      "WaitForFirstConsumer",
      `${prefix}waits for a pod using the claim to be scheduled (class ${d.className} binds WaitForFirstConsumer); ` +
        `${fits} volume(s) fit apart from the node, the scheduler then picks one or asks for provisioning`,
    );
  }
  if (d.className !== "") {
    if (!d.storageClass) {
      return conclusion(
        "ClassNotFound",
        `${prefix}cannot provision: StorageClass ${d.className} does not exist`,
      );
    }
    const provisioner = provisionerStatus(d.storageClass.provisioner, inputs);
    const node = selectedNode !== undefined ? ` for node ${selectedNode}` : "";
    return {
      ...conclusion(
        "Provision",
        `${prefix}no volume matches: provision${node} through ${d.storageClass.provisioner} (class ${d.className})`,
      ),
      provisioner,
    };
  }
  if (d.turningAvailable) {
    // Not upstream (claim-sync.ts): the binder waits for it without a FailedBinding event.
    const name = d.turningAvailable.metadata?.name ?? "";
    const phase = d.turningAvailable.status?.phase ?? "no phase";
    return conclusion(
      "WaitForVolumeAvailable",
      `waits for volume ${name} (${phase}), which fits and is not bound: it binds once the volume's sync makes it Available`,
      name,
    );
  }
  return conclusion(
    "NoMatchNoClass",
    "no persistent volumes available for this claim and no storage class is set",
  );
}

function conclusion(
  kind: ConclusionKind,
  message: string,
  volume: string | null = null,
): ClaimExplanation["conclusion"] {
  return { kind, volume, provisioner: null, message };
}

const NO_PROVISIONER = "kubernetes.io/no-provisioner";

/** Whether the class's provisioner looks alive: a CSIDriver named after it, or a held leader Lease. */
export function provisionerStatus(
  name: string,
  inputs: Pick<ClaimInputs, "csiDrivers" | "leases" | "now">,
): ProvisionerStatus {
  if (name === NO_PROVISIONER) {
    return {
      name,
      kind: "none",
      alive: false,
      evidence: "the class cannot provision: create a matching PersistentVolume by hand",
    };
  }
  if (name.startsWith("kubernetes.io/")) {
    return { name, kind: "in-tree", alive: true, evidence: "an in-tree plugin: kvc provisions it itself" };
  }
  const driver = inputs.csiDrivers.find((d) => d.metadata?.name === name);
  // external-provisioner's leader election Lease is named after the provisioner, "/" as "-".
  const leaseName = name.replace(/\//g, "-");
  const lease = inputs.leases?.find((l) => l.metadata?.name === leaseName && l.spec?.holderIdentity);
  if (lease) {
    const renewed = lease.spec?.renewTime ? new Date(lease.spec.renewTime).getTime() : NaN;
    const fresh = inputs.now.getTime() - renewed < LEASE_STALE_MS;
    return {
      name,
      kind: "external",
      alive: fresh,
      evidence: `Lease ${lease.metadata?.namespace ?? ""}/${leaseName} held by ${lease.spec?.holderIdentity ?? ""}${
        fresh ? "" : ", not renewed for over 5 minutes"
      }`,
    };
  }
  if (driver) return { name, kind: "external", alive: true, evidence: `CSIDriver ${name} is registered` };
  return {
    name,
    kind: "external",
    alive: inputs.leases === undefined ? null : false,
    evidence:
      `no CSIDriver ${name}` +
      (inputs.leases === undefined ? " (Leases could not be read)" : ` and no Lease ${leaseName}`) +
      ": is the provisioner installed and running?",
  };
}

/** The chosen volume, then fewest reasons, then capacity nearest the request (above, then below). */
function nearestFirst(request: Quantity) {
  const capacity = (v: VolumeVerdict) => tryParseQuantity(v.capacity ?? undefined);
  const fits = (q: Quantity | undefined) => q !== undefined && compareQuantities(q, request) >= 0;
  return (a: VolumeVerdict, b: VolumeVerdict): number => {
    const x = capacity(a);
    const y = capacity(b);
    const byDistance = () => {
      if (fits(x) !== fits(y)) return fits(x) ? -1 : 1;
      if (!x || !y) return Number(!x) - Number(!y);
      return fits(x) ? compareQuantities(x, y) : compareQuantities(y, x);
    };
    return (
      Number(b.chosen) - Number(a.chosen) ||
      a.reasons.length - b.reasons.length ||
      byDistance() ||
      (a.name < b.name ? -1 : a.name > b.name ? 1 : 0)
    );
  };
}

/** What the user can change, from the conclusion and the nearest volume's reasons. */
function suggest(
  decided: ClaimExplanation["conclusion"],
  verdicts: readonly VolumeVerdict[],
  demands: ClaimExplanation["claim"]["demands"],
): string[] {
  const out: string[] = [];
  switch (decided.kind) {
    case "NoMatchNoClass":
      out.push("set spec.storageClassName to a class that provisions, or mark a StorageClass as default");
      break;
    case "ClassNotFound":
      out.push(
        `create StorageClass ${demands.storageClass ?? ""} or use an existing class (the claim must be re-created)`,
      );
      break;
    case "Provision":
      if (decided.provisioner && decided.provisioner.alive !== true) {
        out.push(`install or start the provisioner ${decided.provisioner.name}`);
      }
      break;
    case "WaitForFirstConsumer":
      out.push("create a pod that uses the claim; binding happens when it is scheduled");
      break;
    default:
      break;
  }
  if (decided.kind === "Bound" || decided.kind === "Bind" || decided.kind === "BindRequested") return out;
  const nearest = verdicts.find(
    (v) => v.verdict === "Mismatch" && !v.reasons.some((r) => r.code === "BoundToOther"),
  );
  if (nearest) {
    const fixes = nearest.reasons.map((r) => FIX[r.code](r));
    out.push(`to use volume ${nearest.name}: ${fixes.join("; ")}`);
  }
  return out;
}

const FIX: Record<ReasonCode, (r: MismatchReason) => string> = {
  BoundToOther: (r) => `it belongs to ${r.found}`,
  AccessModes: (r) => `request access modes the volume offers (${r.found})`,
  TooSmall: (r) => `request at most ${r.found} (or resize the volume)`,
  VolumeMode: (r) => `set volumeMode ${r.found}`,
  AttributesClass: (r) => `set volumeAttributesClassName ${r.found}`,
  Deleting: () => "it is being deleted; use another volume",
  NodeAffinity: () => "it cannot be used on the selected node; let the pod schedule elsewhere",
  NotAvailable: (r) => `it is ${r.found}; make it Available (clear its claimRef if Released and Retain)`,
  Selector: (r) => `relax the selector (${r.wanted}) or label the volume`,
  ClassMismatch: (r) => `set storageClassName ${r.found === "<none>" ? '""' : r.found}`,
};
