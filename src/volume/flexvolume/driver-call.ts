import { spawn } from "node:child_process";
import type { VolumeSpec } from "../plugin.js";

/** The controller-side commands of the FlexVolume protocol. */
export type DriverCommand = "init" | "getvolumename" | "attach" | "detach" | "isattached";

export interface DriverCapabilities {
  attach: boolean;
}

/** A driver's reply (upstream DriverStatus). */
export interface DriverStatus {
  status: string;
  message?: string;
  device?: string;
  volumeName?: string;
  attached?: boolean;
  capabilities: DriverCapabilities;
}

/** The driver answered "Not supported": callers fall back to the default behaviour. */
export class NotSupportedError extends Error {
  override readonly name = "NotSupportedError";
  constructor() {
    super("Not supported");
  }
}

/**
 * Why one call gave no usable reply: the message names the driver and command, and quotes a bounded
 * piece of what it printed, so the event a user sees says what to fix.
 */
export class DriverCallError extends Error {
  override readonly name = "DriverCallError";
}

const OUTPUT_QUOTE_LIMIT = 200;

function quote(output: string): string {
  const trimmed = output.trim();
  return JSON.stringify(
    trimmed.length > OUTPUT_QUOTE_LIMIT ? `${trimmed.slice(0, OUTPUT_QUOTE_LIMIT)}…` : trimmed,
  );
}

/** upstream handleCmdResponse: capabilities default to attach=true; non-Success fails with the driver's reason. */
export function parseDriverReply(driver: string, command: DriverCommand, stdout: string): DriverStatus {
  let reply: unknown;
  try {
    reply = JSON.parse(stdout);
  } catch {
    throw new DriverCallError(
      `FlexVolume driver ${driver}: ${command} printed no JSON reply: ${quote(stdout)}`,
    );
  }
  if (
    typeof reply !== "object" ||
    reply === null ||
    typeof (reply as { status?: unknown }).status !== "string"
  ) {
    throw new DriverCallError(
      `FlexVolume driver ${driver}: ${command} reply has no status: ${quote(stdout)}`,
    );
  }
  const r = reply as Partial<Omit<DriverStatus, "capabilities">> & {
    status: string;
    capabilities?: Partial<DriverCapabilities>;
  };
  if (r.status === "Not supported") throw new NotSupportedError();
  if (r.status !== "Success") {
    throw new DriverCallError(`${command} command failed, status: ${r.status}, reason: ${r.message ?? ""}`);
  }
  return { ...r, capabilities: { attach: r.capabilities?.attach ?? true } };
}

/**
 * The JSON options every spec-carrying call passes (upstream NewOptionsForDriver): fsType, rw/ro, the
 * PV's or inline volume's name, then the source's own options (which win on a clash, as upstream).
 */
export function driverOptions(spec: VolumeSpec): Record<string, string> {
  const source = spec.volume ? spec.volume.flexVolume : spec.persistentVolume.spec?.flexVolume;
  if (!source) throw new Error("volume is not a FlexVolume");
  // An inline volume's readOnly is its source's; a PV's is the claim's (the spec's), as upstream.
  const readOnly = spec.volume ? (source.readOnly ?? false) : spec.readOnly;
  return {
    "kubernetes.io/fsType": source.fsType ?? "",
    "kubernetes.io/readwrite": readOnly ? "ro" : "rw",
    "kubernetes.io/pvOrVolumeName": spec.volume
      ? spec.volume.name
      : (spec.persistentVolume.metadata?.name ?? ""),
    ...source.options,
  };
}

export interface RunOptions {
  executable: string;
  /** "vendor/driver", for messages. */
  driver: string;
  command: DriverCommand;
  args: readonly string[];
  timeoutMs: number;
  signal?: AbortSignal | undefined;
}

/**
 * Runs one driver call (upstream DriverCall.Run) without a shell: the executable and an argument
 * array, stdin closed. Unlike upstream, every call has a timeout, and the reply is read from stdout
 * alone (a driver logging to stderr still works; stderr is quoted when the call fails). The driver
 * runs in its own process group so a timeout or abort kills whatever it started too: a leftover
 * child holding the pipe would otherwise keep the call open.
 */
export function runDriverCall(o: RunOptions): Promise<DriverStatus> {
  return new Promise((resolve, reject) => {
    // A leader that lost its lease (or is stopping) starts no driver: an attach or detach it began
    // would race the new leader's.
    if (o.signal?.aborted) {
      reject(new DriverCallError(`FlexVolume driver ${o.driver}: ${o.command} not run: aborted`));
      return;
    }
    const child = spawn(o.executable, [o.command, ...o.args], {
      stdio: ["ignore", "pipe", "pipe"],
      detached: true,
    });
    let stdout = "";
    let stderr = "";
    let stopped: string | undefined;
    child.stdout.on("data", (c: Buffer) => (stdout += c.toString()));
    child.stderr.on("data", (c: Buffer) => (stderr += c.toString()));
    const killGroup = (why: string) => {
      stopped ??= why;
      try {
        if (child.pid !== undefined) process.kill(-child.pid, "SIGKILL");
      } catch {
        // already gone
      }
    };
    const timer = setTimeout(() => {
      killGroup("timeout");
    }, o.timeoutMs);
    const onAbort = () => {
      killGroup("aborted");
    };
    o.signal?.addEventListener("abort", onAbort, { once: true });
    const done = () => {
      clearTimeout(timer);
      o.signal?.removeEventListener("abort", onAbort);
    };
    child.on("error", (err) => {
      done();
      reject(
        new DriverCallError(`FlexVolume driver ${o.driver}: cannot run ${o.executable}: ${err.message}`),
      );
    });
    child.on("close", (code, signal) => {
      done();
      if (stopped === "timeout") {
        reject(
          new DriverCallError(`FlexVolume driver ${o.driver}: ${o.command} timeout after ${o.timeoutMs} ms`),
        );
        return;
      }
      if (stopped) {
        reject(new DriverCallError(`FlexVolume driver ${o.driver}: ${o.command} ${stopped}`));
        return;
      }
      try {
        const status = parseDriverReply(o.driver, o.command, stdout);
        if (code !== 0) {
          // upstream: "driver bug: exec error but no error in response"; the exit status wins.
          throw new DriverCallError(
            `FlexVolume driver ${o.driver}: ${o.command} exited with code ${code} despite a Success reply`,
          );
        }
        resolve(status);
      } catch (err) {
        // A failed exit with a reply is the driver's error (upstream); without one, say how it ended.
        if (
          code !== 0 &&
          err instanceof DriverCallError &&
          /printed no JSON|has no status/.test(err.message)
        ) {
          const how = signal ? `was killed by ${signal}` : `exited with code ${code}`;
          reject(
            new DriverCallError(
              `FlexVolume driver ${o.driver}: ${o.command} ${how}; stderr: ${quote(stderr)}`,
            ),
          );
          return;
        }
        reject(err instanceof Error ? err : new Error(String(err)));
      }
    });
  });
}
