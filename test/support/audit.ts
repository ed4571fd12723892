import { existsSync, readFileSync } from "node:fs";

/** The fields of an audit.k8s.io/v1 Event at Metadata level that tests ask about. */
export interface AuditEvent {
  verb: string;
  user: { username: string };
  userAgent?: string;
  requestURI: string;
  objectRef?: { resource?: string; namespace?: string; name?: string; subresource?: string };
  responseStatus?: { code?: number };
  /** RFC 3339 with microseconds. */
  requestReceivedTimestamp: string;
}

const WRITE_VERBS = new Set(["create", "update", "patch", "delete", "deletecollection"]);

/** Every event in a LocalControlPlane's audit log (`audit: true`), oldest first. */
export function readAuditLog(path: string): AuditEvent[] {
  if (!existsSync(path)) return [];
  return readFileSync(path, "utf8")
    .split("\n")
    .filter((l) => l.trim() !== "")
    .map((l) => JSON.parse(l) as AuditEvent);
}

/**
 * The write requests (whatever their answer: a refused write was still sent) received at or after
 * `since` (wall clock) from a client whose User-Agent contains `userAgent`.
 */
export function writesBy(path: string, userAgent: string, since: Date): AuditEvent[] {
  return readAuditLog(path).filter(
    (e) =>
      WRITE_VERBS.has(e.verb) &&
      (e.userAgent ?? "").includes(userAgent) &&
      Date.parse(e.requestReceivedTimestamp) >= since.getTime(),
  );
}

/** One line per event, for assertion messages. */
export function describeEvents(events: readonly AuditEvent[]): string {
  return events
    .map((e) => `${e.requestReceivedTimestamp} ${e.verb} ${e.requestURI} → ${e.responseStatus?.code ?? "?"}`)
    .join("\n");
}
