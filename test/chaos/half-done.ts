import type { V1PersistentVolume, V1PersistentVolumeClaim } from "@kubernetes/client-node";
import { ANN_BIND_COMPLETED, ANN_BOUND_BY_CONTROLLER } from "../../src/persistentvolume/annotations.js";
import { keyOf, type Observation, type World } from "./history.js";
import { uniqueVolumeName } from "./invariants.js";

/*
 * The half-done states the targeted kills wait for, read from the recorder's world when one object
 * changed: a bind between two of its four writes, an attach between the VolumeAttachment and the
 * node's status.volumesAttached.
 */

/**
 * A bind the binder started and has not finished. Upstream's write order (pv_controller.go bind, and
 * src/persistentvolume/bind.ts): PV claimRef (+ bound-by-controller), PV status Bound, claim
 * volumeName (+ bind-completed), claim status Bound. A PV an external provisioner created with a
 * claimRef is not one until the binder wrote its status (one kvc's in-tree provisioner created carries
 * bound-by-controller, as upstream's provisionClaimOperation sets it: kvc's own sequence has begun); a
 * claim that names a PV that does not name it back is the reverse order.
 */
export function bindHalfDone(pv: V1PersistentVolume, claim: V1PersistentVolumeClaim): string | undefined {
  const pvToClaim = pv.spec?.claimRef?.uid !== undefined && pv.spec.claimRef.uid === claim.metadata?.uid;
  const claimToPv = claim.spec?.volumeName !== undefined && claim.spec.volumeName === pv.metadata?.name;
  const bindCompleted = claim.metadata?.annotations?.[ANN_BIND_COMPLETED] !== undefined;
  const started =
    pv.status?.phase === "Bound" || pv.metadata?.annotations?.[ANN_BOUND_BY_CONTROLLER] !== undefined;
  const claimDone = claimToPv && bindCompleted && claim.status?.phase === "Bound";
  const state = () =>
    `PV ${keyOf(pv)} (claimRef ${pv.spec?.claimRef?.name ?? "-"}, ${pv.status?.phase ?? "-"}), ` +
    `claim ${keyOf(claim)} (volumeName ${claim.spec?.volumeName ?? "-"}, bind-completed ${bindCompleted ? "yes" : "no"}, ${claim.status?.phase ?? "-"})`;
  if (pvToClaim && started && !claimDone) return `bind half done: ${state()}`;
  if (claimToPv && bindCompleted && !pvToClaim) return `bind half done (claim first): ${state()}`;
  return undefined;
}

/**
 * An attach in flight for a pod's volume: its VolumeAttachment exists (not being deleted) and is not
 * attached yet, or is and the node's status.volumesAttached does not report it yet.
 */
export function attachInFlight(world: World, vaName: string): string | undefined {
  const va = world.VolumeAttachment.get(vaName);
  if (!va || va.metadata?.deletionTimestamp) return undefined;
  const pvName = va.spec.source.persistentVolumeName;
  const pv = world.PersistentVolume.get(pvName ?? "");
  const claim = pv?.spec?.claimRef;
  const used = [...world.Pod.values()].some(
    (p) =>
      p.spec?.nodeName === va.spec.nodeName &&
      p.metadata?.namespace === claim?.namespace &&
      (p.spec?.volumes ?? []).some((v) => v.persistentVolumeClaim?.claimName === claim?.name),
  );
  if (!pv || !used) return undefined;
  if (va.status?.attached !== true)
    return `attach in flight: VolumeAttachment ${vaName} (${pvName} on ${va.spec.nodeName}) not attached yet`;
  const name = uniqueVolumeName(pv);
  const reported = (world.Node.get(va.spec.nodeName)?.status?.volumesAttached ?? []).some(
    (v) => v.name === name,
  );
  if (!reported)
    return `attach in flight: VolumeAttachment ${vaName} attached, ${pvName} not yet in ${va.spec.nodeName}'s volumesAttached`;
  return undefined;
}

/** The half-done state of `kind` the change `o` shows (or the whole world shows, without one). */
export function halfDone(kind: "bind" | "attach", world: World, o?: Observation): string | undefined {
  if (kind === "attach") {
    const names =
      o === undefined
        ? [...world.VolumeAttachment.keys()]
        : o.kind === "VolumeAttachment" && !o.deleted
          ? [keyOf(o.object)]
          : o.kind === "Node" && !o.deleted
            ? [...world.VolumeAttachment.values()]
                .filter((va) => va.spec.nodeName === keyOf(o.object))
                .map((va) => keyOf(va))
            : [];
    return first(names, (n) => attachInFlight(world, n));
  }
  const pairs: [V1PersistentVolume | undefined, V1PersistentVolumeClaim | undefined][] =
    o === undefined
      ? [...world.PersistentVolume.values()].map((pv) => [pv, claimOf(world, pv)])
      : o.deleted
        ? []
        : o.kind === "PersistentVolume"
          ? [[o.object, claimOf(world, o.object)]]
          : o.kind === "PersistentVolumeClaim"
            ? [[world.PersistentVolume.get(o.object.spec?.volumeName ?? ""), o.object]]
            : [];
  return first(pairs, ([pv, claim]) => (pv && claim ? bindHalfDone(pv, claim) : undefined));
}

function claimOf(world: World, pv: V1PersistentVolume): V1PersistentVolumeClaim | undefined {
  const ref = pv.spec?.claimRef;
  return ref ? world.PersistentVolumeClaim.get(`${ref.namespace ?? ""}/${ref.name ?? ""}`) : undefined;
}

function first<T>(xs: readonly T[], f: (x: T) => string | undefined): string | undefined {
  for (const x of xs) {
    const r = f(x);
    if (r !== undefined) return r;
  }
  return undefined;
}
