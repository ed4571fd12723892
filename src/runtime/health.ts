/** A named health check: returns normally when healthy, throws (with the reason) when not. */
export interface HealthCheck {
  name: string;
  check(): void | Promise<void>;
  /** Show the failure's message instead of withholding it: for reasons an operator must see (a misconfiguration) that reveal nothing sensitive. */
  showReason?: boolean;
}

export interface HealthReport {
  healthy: boolean;
  /** One line per check in the shape of Kubernetes' verbose health output: `[+]name ok`. */
  lines: string[];
}

/** Runs every check; as the apiserver's /healthz, failing reasons are not exposed (unless showReason), only names. */
export async function runChecks(checks: readonly HealthCheck[]): Promise<HealthReport> {
  const lines: string[] = [];
  let healthy = true;
  for (const c of checks) {
    try {
      await c.check();
      lines.push(`[+]${c.name} ok`);
    } catch (err) {
      healthy = false;
      const reason = c.showReason && err instanceof Error ? err.message : "reason withheld";
      lines.push(`[-]${c.name} failed: ${reason}`);
    }
  }
  return { healthy, lines };
}
