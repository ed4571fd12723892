import type { JsonRequest } from "./client.js";

/** The fields of /version kvc reads (apimachinery's version.Info). */
export interface VersionInfo {
  major: string;
  minor: string;
  gitVersion: string;
  /** Set by apiservers from v1.31 on: the release whose APIs and defaults it serves (--emulated-version). */
  emulationMajor?: string | undefined;
  emulationMinor?: string | undefined;
}

/**
 * GET /version, client-go discovery's ServerVersion: the apiserver's version.Info. Readable by every
 * authenticated user (system:public-info-viewer), so kvc's own identity needs no extra RBAC.
 */
export async function serverVersion(request: JsonRequest, signal?: AbortSignal): Promise<VersionInfo> {
  const body = await request("GET", "/version", signal ? { signal } : {});
  const info = (typeof body === "object" && body !== null ? body : {}) as Record<string, unknown>;
  const text = (key: string) => (typeof info[key] === "string" ? info[key] : "");
  const optional = (key: string) => (typeof info[key] === "string" ? info[key] : undefined);
  return {
    major: text("major"),
    minor: text("minor"),
    gitVersion: text("gitVersion"),
    emulationMajor: optional("emulationMajor"),
    emulationMinor: optional("emulationMinor"),
  };
}
