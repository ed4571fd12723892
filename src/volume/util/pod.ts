import type { V1ContainerStatus, V1Pod } from "@kubernetes/client-node";

/**
 * Upstream volumeutil.IsPodTerminated (pkg/volume/util): Succeeded or Failed, or being deleted with
 * no container running (every status terminated or waiting).
 */
export function isPodTerminated(pod: V1Pod): boolean {
  const status = pod.status;
  if (status?.phase === "Failed" || status?.phase === "Succeeded") return true;
  return (
    pod.metadata?.deletionTimestamp !== undefined &&
    notRunning(status?.initContainerStatuses) &&
    notRunning(status?.containerStatuses) &&
    notRunning(status?.ephemeralContainerStatuses)
  );
}

function notRunning(statuses: readonly V1ContainerStatus[] = []): boolean {
  return statuses.every((s) => s.state?.terminated !== undefined || s.state?.waiting !== undefined);
}
