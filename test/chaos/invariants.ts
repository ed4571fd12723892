import type {
  V1ObjectMeta,
  V1PersistentVolume,
  V1PersistentVolumeClaim,
  V1Pod,
  V1StorageClass,
  V1VolumeAttachment,
} from "@kubernetes/client-node";
import type { AuditEvent } from "../support/audit.js";
import {
  checkVolumeSatisfyClaim,
  findMatchingVolume,
  isVolumeBoundToClaim,
  OutOfScope,
} from "./find-matching-volume.js";
import {
  isLeaderElectionWrite,
  keyOf,
  replay,
  replicaOf,
  type History,
  type LeaseTerm,
  type Observation,
  type World,
} from "./history.js";

/*
 * Upstream's promises as pure checks over a recorded history (history.ts): each returns what broke,
 * never throws, so a run reports every violation and a unit test can feed each one a history with a
 * violation in it (test/unit/chaos-invariants.test.ts).
 */

export interface Violation {
  invariant: string;
  message: string;
}

/** Upstream's maxWaitForUnmountDuration: the attach/detach controller's force-detach timeout. */
export const MAX_WAIT_FOR_UNMOUNT_MS = 6 * 60_000;
const TAINT_OUT_OF_SERVICE = "node.kubernetes.io/out-of-service";
/** The second writer's annotation (workload.ts touch()). */
export const TOUCHED = "chaos.example.com/touched";

interface KubeObject {
  metadata?: V1ObjectMeta;
  spec?: unknown;
  status?: unknown;
}

/** Every invariant over the whole history. */
export function checkHistory(h: History): Violation[] {
  return [
    ...checkObservations(h.observations),
    ...oneWriterPerTerm(h.audit, h.terms),
    ...retainedNotDeleted(h.audit, h.observations),
  ];
}

/** A Retain volume is the administrator's to delete: no kvc replica's delete of one got applied. */
export function retainedNotDeleted(
  audit: readonly AuditEvent[],
  observations: readonly Observation[],
): Violation[] {
  const retain = new Set(
    observations.flatMap((o) =>
      o.kind === "PersistentVolume" && o.object.spec?.persistentVolumeReclaimPolicy === "Retain"
        ? [o.object.metadata?.name ?? ""]
        : [],
    ),
  );
  return audit
    .filter(
      (e) =>
        e.verb === "delete" &&
        e.objectRef?.resource === "persistentvolumes" &&
        !e.objectRef.subresource &&
        retain.has(e.objectRef.name ?? "") &&
        replicaOf(e.userAgent) !== undefined &&
        (e.responseStatus?.code ?? 0) >= 200 &&
        (e.responseStatus?.code ?? 0) < 300,
    )
    .map((e) => ({
      invariant: "retain-kept",
      message: `${replicaOf(e.userAgent)} deleted PV ${e.objectRef?.name} (Retain) at ${e.requestReceivedTimestamp}`,
    }));
}

/**
 * The promises visible in object states, in one replay: no PV bound to two claims, no binding lost,
 * no single-node volume attached to two nodes, no detach of a volume a node still has in use.
 */
export function checkObservations(observations: readonly Observation[]): Violation[] {
  const out: Violation[] = [];
  const report = (invariant: string, message: string) => out.push({ invariant, message });
  /** Claim uid → the PV it was seen Bound to. */
  const boundTo = new Map<string, string>();
  /** PV name → the claim uid it was seen Bound to. */
  const pvBoundTo = new Map<string, string>();
  /** `${node}|${pv}` → when a live pod on the node was last seen using the PV. */
  const lastUse = new Map<string, number>();
  /** PV uids seen Released with policy Retain: upstream never makes them Available or Bound again. */
  const retained = new Set<string>();

  replay(observations, (o, world) => {
    switch (o.kind) {
      case "PersistentVolumeClaim": {
        const c = o.object;
        const uid = c.metadata?.uid ?? "";
        const was = boundTo.get(uid);
        const volume = c.spec?.volumeName ?? "";
        if (o.deleted) return;
        if (was !== undefined && volume !== was) {
          report("binding-lost", `claim ${keyOf(c)} (rv ${o.rv}) was Bound to ${was}, now names "${volume}"`);
        }
        if (c.status?.phase === "Lost" && was !== undefined && world.PersistentVolume.has(was)) {
          report("binding-lost", `claim ${keyOf(c)} (rv ${o.rv}) is Lost while its PV ${was} exists`);
        }
        if (c.status?.phase !== "Bound" || !volume) return;
        boundTo.set(uid, volume);
        for (const other of world.PersistentVolumeClaim.values()) {
          if (other.metadata?.uid === uid || keyOf(other) === keyOf(c)) continue;
          if (other.status?.phase === "Bound" && other.spec?.volumeName === volume) {
            report(
              "double-bind",
              `PV ${volume} is bound to claims ${keyOf(other)} and ${keyOf(c)} at once (rv ${o.rv})`,
            );
          }
        }
        return;
      }
      case "PersistentVolume": {
        const pv = o.object;
        const name = pv.metadata?.name ?? "";
        if (o.deleted) {
          pvBoundTo.delete(name);
          return;
        }
        const uid = pv.spec?.claimRef?.uid ?? "";
        const was = pvBoundTo.get(name);
        if (was && uid && uid !== was) {
          const claim = [...world.PersistentVolumeClaim.values()].find((c) => c.metadata?.uid === was);
          if (claim && !claim.metadata?.deletionTimestamp && claim.spec?.volumeName === name) {
            report(
              "binding-lost",
              `PV ${name} (rv ${o.rv}) moved from live claim ${keyOf(claim)} to claim uid ${uid}`,
            );
          }
        }
        const pvUid = pv.metadata?.uid ?? "";
        const phase = pv.status?.phase ?? "";
        if (retained.has(pvUid) && phase !== "Released" && phase !== "Failed") {
          report("retain-kept", `PV ${name} (Retain) was Released and is now ${phase} (rv ${o.rv})`);
        }
        if (phase === "Released" && pv.spec?.persistentVolumeReclaimPolicy === "Retain") retained.add(pvUid);
        if (pv.status?.phase === "Bound" && uid) pvBoundTo.set(name, uid);
        else if (!uid) pvBoundTo.delete(name);
        return;
      }
      case "Pod": {
        const pod = o.object;
        const node = pod.spec?.nodeName;
        if (o.deleted || !node) return;
        for (const pv of podVolumes(pod, world)) lastUse.set(`${node}|${pv}`, o.at);
        return;
      }
      case "VolumeAttachment": {
        const va = o.object;
        const before = world.VolumeAttachment.get(keyOf(va));
        const pvName = va.spec.source.persistentVolumeName ?? "";
        const pv = world.PersistentVolume.get(pvName);
        if (!o.deleted && va.status?.attached && pv && isSingleNode(pv)) {
          const others = [...world.VolumeAttachment.values()].filter(
            (x) =>
              x.spec.source.persistentVolumeName === pvName &&
              x.spec.nodeName !== va.spec.nodeName &&
              x.status?.attached,
          );
          for (const x of others) {
            report(
              "multi-attach",
              `single-node PV ${pvName} attached to ${x.spec.nodeName} and ${va.spec.nodeName} (rv ${o.rv})`,
            );
          }
        }
        const detachStarts =
          (o.deleted || va.metadata?.deletionTimestamp) && before && !before.metadata?.deletionTimestamp;
        if (detachStarts && pv) {
          const why = mountedAtDetach(va, pv, world, lastUse.get(`${va.spec.nodeName}|${pvName}`), o.at);
          if (why) report("detach-of-mounted", `${why} (rv ${o.rv})`);
        }
        return;
      }
      case "Node":
        return;
    }
  });
  return out;
}

/**
 * Why detaching `va` now breaks the promise, or undefined: the node reports the volume in use and
 * neither force rule applies (the out-of-service taint; an unready node past the unmount timeout).
 */
function mountedAtDetach(
  va: V1VolumeAttachment,
  pv: V1PersistentVolume,
  world: World,
  lastUsedAt: number | undefined,
  at: number,
): string | undefined {
  const node = world.Node.get(va.spec.nodeName);
  const unique = uniqueVolumeName(pv);
  if (!node || !unique || !(node.status?.volumesInUse ?? []).includes(unique)) return undefined;
  if ((node.spec?.taints ?? []).some((t) => t.key === TAINT_OUT_OF_SERVICE)) return undefined;
  const ready = (node.status?.conditions ?? []).find((c) => c.type === "Ready")?.status === "True";
  if (!ready && (lastUsedAt === undefined || at - lastUsedAt > MAX_WAIT_FOR_UNMOUNT_MS)) return undefined;
  return `VolumeAttachment ${keyOf(va)} detached while node ${va.spec.nodeName} has ${unique} in use`;
}

/**
 * No two replicas write in one lease term: every write a kvc replica got applied (2xx; the Lease
 * writes of its elector aside) was received while it held the Lease, by the audit log's clock and the
 * Lease's acquireTime (one machine, one clock).
 */
export function oneWriterPerTerm(audit: readonly AuditEvent[], terms: readonly LeaseTerm[]): Violation[] {
  const out: Violation[] = [];
  const sorted = [...terms].sort((a, b) => a.acquiredAt - b.acquiredAt);
  /** Per replica, when the apiserver last applied a Lease write of its elector. */
  const renewedAt = new Map<string, number>();
  for (const e of audit) {
    const replica = replicaOf(e.userAgent);
    const code = e.responseStatus?.code ?? 0;
    if (!replica || code < 200 || code >= 300) continue;
    const at = Date.parse(e.requestReceivedTimestamp);
    if (isLeaderElectionWrite(e)) {
      renewedAt.set(replica, at);
      continue;
    }
    const term = sorted.findLast((t) => t.acquiredAt <= at);
    if (term?.holder === replica) continue;
    const renewed = renewedAt.get(replica);
    out.push({
      invariant: "two-writers",
      message: `${replica} wrote (${e.verb} ${e.requestURI} at ${e.requestReceivedTimestamp}) ${
        term
          ? `in the term ${term.holder} acquired at ${new Date(term.acquiredAt).toISOString()}`
          : "before any term"
      }; its last Lease write was received ${renewed === undefined ? "never" : `${at - renewed} ms before`}`,
    });
  }
  return out;
}

/** An event the cluster recorded about an object: what makes a waiting object "explained". */
export interface Explanation {
  uid: string;
  reason: string;
}

/** Claim reasons that explain a Pending claim no volume fits (upstream's event reasons). */
const PENDING_REASONS = new Set(["WaitForFirstConsumer", "FailedBinding", "ProvisioningFailed"]);
/** Volume reasons that explain a reclaim that did not happen (a Released or Failed volume). */
const RECLAIM_FAILED_REASONS = new Set([
  "VolumeFailedDelete",
  "VolumeFailedRecycle",
  "VolumeUnknownReclaimPolicy",
]);

/**
 * The settled state, upstream's end state for every object (pv_controller.go syncClaim, syncVolume):
 * - a claim is Bound to a volume that names it back and is Bound, or Pending while no volume fits it
 *   (by find-matching-volume.ts, upstream's FindMatchingVolume written again: an Available volume
 *   that fits, or one pre-bound to it, is a violation) and an event says why;
 * - a volume is Available (no claimRef, or pre-bound by name only), Bound (to a live claim naming it
 *   back), Released (its claim gone; Retain stays so, Delete must go, Recycle must come back
 *   Available, unless an event says the reclaim failed), or Failed with a status message or an event
 *   saying why; never still Pending (the phase before the controller's first sync);
 * - no provisioned volume outlives its claim; every desired attachment attached and reported; no
 *   VolumeAttachment without a pod that wants it.
 */
export function checkSettled(
  world: World,
  events: readonly Explanation[],
  classes: ReadonlyMap<string, V1StorageClass>,
): Violation[] {
  const out: Violation[] = [];
  const report = (invariant: string, message: string) => out.push({ invariant, message });
  const explained = (uid: string | undefined, reasons: Set<string>) =>
    events.some((e) => e.uid === uid && reasons.has(e.reason));
  const claimsByUid = new Map([...world.PersistentVolumeClaim.values()].map((c) => [c.metadata?.uid, c]));
  const volumes = [...world.PersistentVolume.values()];

  for (const c of world.PersistentVolumeClaim.values()) {
    const phase = c.status?.phase ?? "Pending";
    if (phase === "Bound") {
      const pv = world.PersistentVolume.get(c.spec?.volumeName ?? "");
      if (!pv || pv.spec?.claimRef?.uid !== c.metadata?.uid)
        report(
          "claim-settled",
          `claim ${keyOf(c)} is Bound to ${c.spec?.volumeName}, which does not name it`,
        );
      else if (pv.status?.phase !== "Bound")
        report("claim-settled", `claim ${keyOf(c)} is Bound to ${keyOf(pv)}, which is ${pv.status?.phase}`);
      continue;
    }
    if (phase !== "Pending") {
      report("claim-settled", `claim ${keyOf(c)} is ${phase}`);
      continue;
    }
    let fit: string | undefined;
    try {
      fit = pendingFit(c, volumes, world, classes);
    } catch (err) {
      if (!(err instanceof OutOfScope)) throw err;
      report("oracle-scope", `claim ${keyOf(c)}: the matcher oracle does not cover ${err.message}`);
      continue;
    }
    if (fit) report("claim-settled", `claim ${keyOf(c)} is Pending while ${fit}`);
    else if (!explained(c.metadata?.uid, PENDING_REASONS))
      report("claim-settled", `claim ${keyOf(c)} is Pending, no volume fits it, and no event says why`);
  }

  for (const pv of volumes) {
    const name = pv.metadata?.name ?? "";
    const policy = pv.spec?.persistentVolumeReclaimPolicy ?? "Retain";
    const phase = pv.status?.phase ?? "Pending";
    const ref = pv.spec?.claimRef;
    const claim = ref?.uid ? claimsByUid.get(ref.uid) : undefined;
    const claimGone = ref?.uid !== undefined && ref.uid !== "" && !claim;
    switch (phase) {
      case "Available":
        if (ref?.uid)
          report("volume-settled", `PV ${name} is Available while its claimRef names claim uid ${ref.uid}`);
        break;
      case "Bound":
        if (claimGone)
          report("reclaim", `PV ${name} is Bound to claim ${ref.name} (uid ${ref.uid}), which is gone`);
        else if (!claim) report("volume-settled", `PV ${name} is Bound without a claim uid`);
        else if (claim.spec?.volumeName !== name)
          report(
            "volume-settled",
            `PV ${name} is Bound to claim ${keyOf(claim)}, which names "${claim.spec?.volumeName ?? ""}"`,
          );
        break;
      case "Released":
        if (claim) report("volume-settled", `PV ${name} is Released while its claim ${keyOf(claim)} lives`);
        else if (policy !== "Retain" && !explained(pv.metadata?.uid, RECLAIM_FAILED_REASONS))
          report("reclaim", `PV ${name} is Released with policy ${policy}, not reclaimed`);
        break;
      case "Failed":
        // The reason is written with the phase (status.message); the event after it is best-effort
        // and sent once, on the phase change (upstream's updateVolumePhaseWithEvent): a leader that
        // loses its lease between the two writes leaves only the message (the long run, 2026-12-05).
        if (!pv.status?.message && !explained(pv.metadata?.uid, RECLAIM_FAILED_REASONS))
          report(
            "volume-settled",
            `PV ${name} is Failed and neither its status message nor an event says why`,
          );
        break;
      default:
        report("volume-settled", `PV ${name} is ${phase}: the controller never synced it`);
    }
    const provisioned = pv.metadata?.annotations?.["pv.kubernetes.io/provisioned-by"] !== undefined;
    if (provisioned && policy === "Delete" && claimGone && phase !== "Released") {
      report("orphaned-volume", `provisioned PV ${name} (${phase}) outlived its claim ${ref.name}`);
    }
  }
  const wanted = new Set<string>();
  for (const pod of world.Pod.values()) {
    const node = pod.spec?.nodeName;
    if (!node || pod.metadata?.deletionTimestamp) continue;
    for (const pvName of podVolumes(pod, world)) {
      const pv = world.PersistentVolume.get(pvName);
      if (!pv?.spec?.csi) continue;
      wanted.add(`${node}|${pvName}`);
      const va = [...world.VolumeAttachment.values()].find(
        (x) => x.spec.nodeName === node && x.spec.source.persistentVolumeName === pvName,
      );
      const reported = (world.Node.get(node)?.status?.volumesAttached ?? []).some(
        (v) => v.name === uniqueVolumeName(pv),
      );
      if (!va?.status?.attached || !reported) {
        const elsewhere = [...world.Node.values()]
          .filter((n) => (n.status?.volumesAttached ?? []).some((v) => v.name === uniqueVolumeName(pv)))
          .map((n) => n.metadata?.name);
        report(
          "attachment-settled",
          `pod ${keyOf(pod)} wants ${pvName} on ${node}: ${
            va ? (va.status?.attached ? "attached" : "not attached") : "no VolumeAttachment"
          }, ${reported ? "" : "not "}reported in the node's volumesAttached (reported by: ${
            elsewhere.join(", ") || "none"
          })`,
        );
      }
    }
  }
  for (const va of world.VolumeAttachment.values()) {
    if (!wanted.has(`${va.spec.nodeName}|${va.spec.source.persistentVolumeName ?? ""}`)) {
      report("attachment-settled", `VolumeAttachment ${keyOf(va)} has no pod on its node that wants it`);
    }
  }
  return out;
}

/**
 * The volume a Pending claim should be bound to, described, or undefined: for a claim naming a
 * volume (the binder's third write, or a half-done bind), that volume when it is unbound and fits or
 * names the claim (pv_controller.go syncUnboundClaim); else upstream's pick among all volumes.
 */
function pendingFit(
  c: V1PersistentVolumeClaim,
  volumes: readonly V1PersistentVolume[],
  world: World,
  classes: ReadonlyMap<string, V1StorageClass>,
): string | undefined {
  const named = c.spec?.volumeName;
  if (named) {
    const pv = world.PersistentVolume.get(named);
    if (!pv) return undefined;
    if (!pv.spec?.claimRef)
      return checkVolumeSatisfyClaim(pv, c) === undefined
        ? `the PV ${named} it names is unbound and fits it`
        : undefined;
    return isVolumeBoundToClaim(pv, c) ? `the PV ${named} it names is bound to it` : undefined;
  }
  const pv = findMatchingVolume(c, volumes, classes);
  if (!pv) return undefined;
  return pv.spec?.claimRef
    ? `PV ${keyOf(pv)} is pre-bound to it (${pv.status?.phase ?? "no phase"})`
    : `PV ${keyOf(pv)} is Available and fits it`;
}

/**
 * What "unchanged" means for the settled state: every object's spec, status, finalizers,
 * deletionTimestamp, labels and annotations, without its resourceVersion and the second writer's
 * mark (which it changes all run long).
 */
export function settledState(world: World): string {
  const kinds = Object.keys(world).sort() as (keyof World)[];
  return JSON.stringify(
    kinds.map((kind) =>
      [...(world[kind] as Map<string, KubeObject>)]
        .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
        .map(([key, o]) => {
          const m = o.metadata;
          const annotations = Object.entries(m?.annotations ?? {}).filter(([k]) => k !== TOUCHED);
          return [key, m?.uid, m?.deletionTimestamp, m?.finalizers, m?.labels, annotations, o.spec, o.status];
        }),
    ),
  );
}

/**
 * Settled: `polls` consecutive polls pass the settled checks and see one state (settledState). A
 * state that passes once on its way elsewhere is not settled.
 */
export class SettleWindow {
  #state: string | undefined;
  #same = 0;

  constructor(readonly polls: number) {}

  /** Records one poll; whether the window is full. */
  observe(violations: readonly Violation[], state: string): boolean {
    this.#same = violations.length > 0 ? 0 : state === this.#state ? this.#same + 1 : 1;
    this.#state = state;
    return this.#same >= this.polls;
  }

  /** How many consecutive passing polls saw the current state. */
  get same(): number {
    return this.#same;
  }
}

/** The PVs a pod's claims are bound to (by the claims' volumeName). */
function podVolumes(pod: V1Pod, world: World): string[] {
  const ns = pod.metadata?.namespace ?? "";
  return (pod.spec?.volumes ?? []).flatMap((v) => {
    const claim = v.persistentVolumeClaim?.claimName;
    const pv = claim ? world.PersistentVolumeClaim.get(`${ns}/${claim}`)?.spec?.volumeName : undefined;
    return pv ? [pv] : [];
  });
}

/** Upstream's RWO/RWOP rule: a volume no access mode lets several nodes use. */
function isSingleNode(pv: V1PersistentVolume): boolean {
  const modes = pv.spec?.accessModes ?? [];
  return !modes.includes("ReadWriteMany") && !modes.includes("ReadOnlyMany");
}

/** The name a node reports in volumesInUse/volumesAttached, for the CSI volumes the suite uses. */
export function uniqueVolumeName(pv: V1PersistentVolume): string | undefined {
  const csi = pv.spec?.csi;
  return csi ? `kubernetes.io/csi/${csi.driver}^${csi.volumeHandle}` : undefined;
}
