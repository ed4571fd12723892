import type { V1PersistentVolume, V1Pod, V1VolumeAttachment } from "@kubernetes/client-node";
import type { AuditEvent } from "../support/audit.js";
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

/** Every invariant over the whole history. */
export function checkHistory(h: History): Violation[] {
  return [...checkObservations(h.observations), ...oneWriterPerTerm(h.audit, h.terms)];
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

/** Claim reasons that explain a Pending claim after settling (upstream's event reasons). */
const PENDING_REASONS = new Set(["WaitForFirstConsumer", "FailedBinding", "ProvisioningFailed"]);
const RELEASED_REASONS = new Set(["VolumeFailedDelete", "VolumeFailedRecycle", "VolumeUnknownReclaimPolicy"]);

/**
 * The settled state: every claim Bound or explained, every Released volume reclaimed per its policy,
 * no orphaned provisioned volume, every desired attachment attached and reported, no
 * VolumeAttachment without a pod that wants it.
 */
export function checkSettled(world: World, events: readonly Explanation[]): Violation[] {
  const out: Violation[] = [];
  const report = (invariant: string, message: string) => out.push({ invariant, message });
  const explained = (uid: string | undefined, reasons: Set<string>) =>
    events.some((e) => e.uid === uid && reasons.has(e.reason));
  const claimsByUid = new Map([...world.PersistentVolumeClaim.values()].map((c) => [c.metadata?.uid, c]));

  for (const c of world.PersistentVolumeClaim.values()) {
    const phase = c.status?.phase ?? "Pending";
    if (phase === "Bound") {
      const pv = world.PersistentVolume.get(c.spec?.volumeName ?? "");
      if (pv?.spec?.claimRef?.uid !== c.metadata?.uid)
        report(
          "claim-settled",
          `claim ${keyOf(c)} is Bound to ${c.spec?.volumeName}, which does not name it`,
        );
    } else if (!(phase === "Pending" && explained(c.metadata?.uid, PENDING_REASONS))) {
      report("claim-settled", `claim ${keyOf(c)} is ${phase} without an explanation`);
    }
  }

  for (const pv of world.PersistentVolume.values()) {
    const name = pv.metadata?.name ?? "";
    const policy = pv.spec?.persistentVolumeReclaimPolicy ?? "Retain";
    const phase = pv.status?.phase;
    const ref = pv.spec?.claimRef;
    const claimGone = ref?.uid !== undefined && !claimsByUid.has(ref.uid);
    if (phase === "Released" && policy !== "Retain" && !explained(pv.metadata?.uid, RELEASED_REASONS)) {
      report("reclaim", `PV ${name} is Released with policy ${policy}, not reclaimed`);
    } else if (phase === "Bound" && claimGone) {
      report("reclaim", `PV ${name} is Bound to claim ${ref.name} (uid ${ref.uid}), which is gone`);
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
