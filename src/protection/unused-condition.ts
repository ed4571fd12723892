import type { V1PersistentVolumeClaim, V1PersistentVolumeClaimCondition } from "@kubernetes/client-node";

/** The condition type of feature PersistentVolumeClaimUnusedSinceTime (beta, on by default in 1.37). */
export const PVC_UNUSED = "Unused";

export type UnusedCondition = Pick<V1PersistentVolumeClaimCondition, "status" | "reason" | "message">;

/**
 * The Unused condition a bound claim should get now, or undefined when its current one already says
 * so (upstream updateUnusedCondition). A claim in use whose condition is Unknown is left alone.
 */
export function unusedConditionChange(
  pvc: V1PersistentVolumeClaim,
  used: boolean,
): UnusedCondition | undefined {
  const existing = findUnusedCondition(pvc);
  if (used && (!existing || existing.status === "True"))
    return { status: "False", reason: "PodUsingPVC", message: "A pod is currently referencing this PVC" };
  if (!used && existing?.status !== "True")
    return {
      status: "True",
      reason: "NoPodsUsingPVC",
      message: "No pods are currently referencing this PVC",
    };
  return undefined;
}

/**
 * The claim's Unused condition. Checked shapes: the shadow passes request bodies as they were sent
 * (a `conditions` that is no list, a null entry).
 */
export function findUnusedCondition(
  pvc: V1PersistentVolumeClaim | undefined,
): V1PersistentVolumeClaimCondition | undefined {
  const conditions: unknown = pvc?.status?.conditions;
  if (!Array.isArray(conditions)) return undefined;
  return (
    (conditions as (V1PersistentVolumeClaimCondition | null)[]).find((c) => c?.type === PVC_UNUSED) ??
    undefined
  );
}

/**
 * The Unused condition as compared (shadow mode): status and reason, without the transition time,
 * which no two writers share. Undefined when the claim has none.
 */
export function unusedConditionValue(pvc: V1PersistentVolumeClaim | undefined): string | undefined {
  const c = findUnusedCondition(pvc);
  return c ? `${c.status} ${c.reason ?? ""}`.trimEnd() : undefined;
}

/** The claim's conditions with the (first) Unused one replaced in place, or appended, stamped `now`. */
export function withUnusedCondition(
  pvc: V1PersistentVolumeClaim,
  change: UnusedCondition,
  now: Date,
): V1PersistentVolumeClaimCondition[] {
  const condition = { type: PVC_UNUSED, ...change, lastTransitionTime: now };
  const conditions = [...(pvc.status?.conditions ?? [])];
  const i = conditions.findIndex((c) => c.type === PVC_UNUSED);
  if (i < 0) conditions.push(condition);
  else conditions[i] = condition;
  return conditions;
}
