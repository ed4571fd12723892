import { pino, type Logger } from "pino";

export type { Logger } from "pino";

/**
 * What runtime components need from a logger: pino's (object, message) methods, errors under
 * `err`. A pino Logger fits as is; tests can pass a small recorder.
 */
export interface LogSink {
  debug(obj: object, msg: string): void;
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
  error(obj: object, msg: string): void;
}

/**
 * A logger that adds `bindings` to every line, e.g. `{ controller }` so that one controller's lines
 * can be picked out: pino's own child() where the sink is pino, otherwise the bindings merged into
 * each call (test recorders).
 */
export function childLogger(log: LogSink, bindings: Record<string, unknown>): LogSink {
  if ("child" in log && typeof log.child === "function") return (log as Logger).child(bindings);
  return {
    debug: (obj, msg) => {
      log.debug({ ...bindings, ...obj }, msg);
    },
    info: (obj, msg) => {
      log.info({ ...bindings, ...obj }, msg);
    },
    warn: (obj, msg) => {
      log.warn({ ...bindings, ...obj }, msg);
    },
    error: (obj, msg) => {
      log.error({ ...bindings, ...obj }, msg);
    },
  };
}

export const silentLogger: LogSink = {
  debug() {},
  info() {},
  warn() {},
  error() {},
};

export type LoggingFormat = "json" | "text";

export interface LoggerOptions {
  /** klog-style verbosity (-v/--v): 0–2 info, 3–4 debug, 5+ trace. */
  verbosity: number;
  /** json (default, Kubernetes' structured shape) or text (pino-pretty, for people). */
  format: LoggingFormat;
  /** Where JSON lines go; stderr like klog unless a test captures them. */
  destination?: NodeJS.WritableStream | undefined;
}

/** Maps klog verbosity onto pino levels. */
export function levelForVerbosity(v: number): "info" | "debug" | "trace" {
  if (v >= 5) return "trace";
  if (v >= 3) return "debug";
  return "info";
}

/**
 * A pino logger writing Kubernetes' JSON log shape: `ts` (epoch seconds), `msg`, `err`, and object
 * references as `{name, namespace}` (see objectRef).
 */
export function createLogger({ verbosity, format, destination }: LoggerOptions): Logger {
  const options = {
    level: levelForVerbosity(verbosity),
    base: null,
    messageKey: "msg",
    errorKey: "err",
    timestamp: () => `,"ts":${(Date.now() / 1000).toFixed(6)}`,
  };
  if (format === "text") {
    return pino({
      ...options,
      transport: {
        target: "pino-pretty",
        options: { destination: 2, messageKey: "msg", timestampKey: "ts" },
      },
    });
  }
  return pino(options, (destination ?? process.stderr) as pino.DestinationStream);
}

/** klog.KObj: how an object is named in a log line. */
export function objectRef(obj: { metadata?: { name?: string; namespace?: string } }): {
  name: string;
  namespace?: string;
} {
  const { name = "", namespace } = obj.metadata ?? {};
  return namespace ? { name, namespace } : { name };
}
