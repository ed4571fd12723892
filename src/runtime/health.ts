/** A named health check: returns normally when healthy, throws (with the reason) when not. */
export interface HealthCheck {
  name: string;
  check(): void | Promise<void>;
  /**
   * Show the failure's message to authenticated clients instead of withholding it: for reasons an
   * operator must see (a misconfiguration). Anonymous clients never see a reason, as upstream's.
   */
  showReason?: boolean;
}

export interface HealthReport {
  healthy: boolean;
  /** One line per check in the shape of Kubernetes' verbose health output: `[+]name ok`. */
  lines: string[];
}

/**
 * Runs every check; as the apiserver's /healthz, failing reasons are not exposed, only names (but a
 * showReason check's to an `authenticated` client).
 */
export async function runChecks(
  checks: readonly HealthCheck[],
  { authenticated }: { authenticated: boolean },
): Promise<HealthReport> {
  const lines: string[] = [];
  let healthy = true;
  for (const c of checks) {
    try {
      await c.check();
      lines.push(`[+]${c.name} ok`);
    } catch (err) {
      healthy = false;
      const reason = c.showReason && authenticated && err instanceof Error ? err.message : "reason withheld";
      lines.push(`[-]${c.name} failed: ${reason}`);
    }
  }
  return { healthy, lines };
}
