import { ApiException } from "@kubernetes/client-node";

/** The parts of a metav1.Status the runtime decides on. */
export interface ApiStatus {
  code: number;
  reason: string;
  message: string;
}

/**
 * Reads the HTTP code and metav1.Status of an error thrown by client-node (ApiException, whose body
 * is the raw Status text) or passed to a watch's done callback (an Error with `statusCode`).
 * Undefined for errors that never reached the apiserver (network, timeout).
 */
export function apiStatus(err: unknown): ApiStatus | undefined {
  if (err instanceof ApiException) {
    const body = parseStatus(err.body);
    return { code: err.code, reason: body.reason ?? "", message: body.message ?? "" };
  }
  if (err instanceof Error && "statusCode" in err && typeof err.statusCode === "number") {
    return { code: err.statusCode, reason: "", message: err.message };
  }
  return undefined;
}

function parseStatus(body: unknown): { reason?: string; message?: string } {
  if (typeof body === "string") {
    try {
      return parseStatus(JSON.parse(body));
    } catch {
      return { message: body };
    }
  }
  if (body && typeof body === "object") {
    const { reason, message } = body as Record<string, unknown>;
    return {
      ...(typeof reason === "string" && { reason }),
      ...(typeof message === "string" && { message }),
    };
  }
  return {};
}

export function isNotFound(err: unknown): boolean {
  return apiStatus(err)?.code === 404;
}

/** The object `read` answers, or undefined where it does not exist (404); other errors are thrown. */
export async function unlessNotFound<T>(read: Promise<T>): Promise<T | undefined> {
  try {
    return await read;
  } catch (err) {
    if (isNotFound(err)) return undefined;
    throw err;
  }
}

/** 409 with reason AlreadyExists: a create found the name taken. */
export function isAlreadyExists(err: unknown): boolean {
  const s = apiStatus(err);
  return s?.code === 409 && s.reason === "AlreadyExists";
}

/** 409 that is not AlreadyExists: an update carried a stale resourceVersion. */
export function isConflict(err: unknown): boolean {
  const s = apiStatus(err);
  return s?.code === 409 && s.reason !== "AlreadyExists";
}

/** 410: the resourceVersion asked for was compacted away; the caller must relist. */
export function isGone(err: unknown): boolean {
  return apiStatus(err)?.code === 410;
}

/** The message of any error, for logs and events. */
export function errorMessage(err: unknown): string {
  const s = apiStatus(err);
  if (s?.message) return s.message;
  return err instanceof Error ? err.message : String(err);
}
