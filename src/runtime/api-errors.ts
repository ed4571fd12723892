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

function parseStatus(body: unknown): { reason?: string; message?: string; retryAfterSeconds?: number } {
  if (typeof body === "string") {
    try {
      return parseStatus(JSON.parse(body));
    } catch {
      return { message: body };
    }
  }
  if (body && typeof body === "object") {
    const { reason, message, details } = body as Record<string, unknown>;
    const retryAfterSeconds =
      details && typeof details === "object"
        ? (details as Record<string, unknown>).retryAfterSeconds
        : undefined;
    return {
      ...(typeof reason === "string" && { reason }),
      ...(typeof message === "string" && { message }),
      ...(typeof retryAfterSeconds === "number" && { retryAfterSeconds }),
    };
  }
  return {};
}

/** apimachinery's knownReasons: a 500 or 504 with any other reason is judged by its code. */
const KNOWN_REASONS = new Set([
  "Unauthorized",
  "Forbidden",
  "NotFound",
  "AlreadyExists",
  "Conflict",
  "Gone",
  "Invalid",
  "ServerTimeout",
  "StoreReadError",
  "Timeout",
  "TooManyRequests",
  "BadRequest",
  "MethodNotAllowed",
  "NotAcceptable",
  "RequestEntityTooLarge",
  "UnsupportedMediaType",
  "InternalError",
  "Expired",
  "ServiceUnavailable",
]);

/** apierrors.IsInternalError: reason InternalError, or a 500 of no known reason. */
export function isInternalError(err: unknown): boolean {
  const s = apiStatus(err);
  return s?.reason === "InternalError" || (s?.code === 500 && !KNOWN_REASONS.has(s.reason));
}

/** apierrors.IsTimeout: reason Timeout, or a 504 of no known reason. */
export function isTimeout(err: unknown): boolean {
  const s = apiStatus(err);
  return s?.reason === "Timeout" || (s?.code === 504 && !KNOWN_REASONS.has(s.reason));
}

/** apierrors.IsTooManyRequests: reason TooManyRequests or code 429. */
export function isTooManyRequests(err: unknown): boolean {
  const s = apiStatus(err);
  return s?.reason === "TooManyRequests" || s?.code === 429;
}

/**
 * apierrors.SuggestsClientDelay: the server asks to be asked again later, by a Status with
 * retryAfterSeconds (or reason ServerTimeout with details), or by a Retry-After header (which
 * client-go puts into the error's details).
 */
export function suggestsClientDelay(err: unknown): boolean {
  if (!(err instanceof ApiException)) return false;
  const body = parseStatus(err.body);
  if (body.retryAfterSeconds !== undefined && (body.reason === "ServerTimeout" || body.retryAfterSeconds > 0))
    return true;
  const header = err.headers["retry-after"];
  return header !== undefined && Number(header) > 0;
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
