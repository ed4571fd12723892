import { closeSync, existsSync, openSync, readFileSync, readSync, statSync } from "node:fs";

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

/** Whether the event is a write request (whatever its answer: a refused write was still sent). */
export function isWrite(e: AuditEvent): boolean {
  return WRITE_VERBS.has(e.verb);
}

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
      isWrite(e) &&
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

/**
 * Reads an audit log in pieces: each next() returns the events appended since the previous call (a
 * long run's log is read once, not once per question). A line still being written waits for the next.
 */
export class AuditLogTail {
  #offset: number;

  /** `fromEnd`: skip what the log holds now (a benchmark's setup, too large to read at once). */
  constructor(
    private readonly path: string,
    { fromEnd = false }: { fromEnd?: boolean } = {},
  ) {
    this.#offset = fromEnd && existsSync(path) ? statSync(path).size : 0;
  }

  next(): AuditEvent[] {
    if (!existsSync(this.path)) return [];
    const size = statSync(this.path).size;
    if (size <= this.#offset) return [];
    const buf = Buffer.alloc(size - this.#offset);
    const fd = openSync(this.path, "r");
    try {
      readSync(fd, buf, 0, buf.length, this.#offset);
    } finally {
      closeSync(fd);
    }
    const text = buf.toString("utf8");
    const complete = text.lastIndexOf("\n") + 1;
    this.#offset += Buffer.byteLength(text.slice(0, complete));
    return text
      .slice(0, complete)
      .split("\n")
      .filter((l) => l.trim() !== "")
      .map((l) => JSON.parse(l) as AuditEvent);
  }
}
