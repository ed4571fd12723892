import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, openSync, closeSync, readFileSync } from "node:fs";

/**
 * A child process that never outlives us. On Linux it is started under `setpriv --pdeathsig KILL`,
 * so the kernel kills it even when this process is SIGKILLed and no handler of ours can run; normal
 * exits and SIGINT/SIGTERM stop it through the registry below.
 */
export class ManagedProcess {
  readonly #child: ChildProcess;
  readonly exited: Promise<number | null>;
  #exitCode: number | null | undefined;

  constructor(
    readonly name: string,
    command: string,
    args: readonly string[],
    readonly logFile: string,
  ) {
    const fd = openSync(logFile, "a");
    const [cmd, argv] = PDEATHSIG
      ? [PDEATHSIG, ["--pdeathsig", "KILL", "--", command, ...args]]
      : [command, args];
    this.#child = spawn(cmd, argv, { stdio: ["ignore", fd, fd] });
    closeSync(fd);
    this.exited = new Promise((resolve) => {
      this.#child.once("exit", (code, signal) => {
        this.#exitCode = code ?? (signal ? null : 0);
        running.delete(this);
        resolve(this.#exitCode);
      });
      this.#child.once("error", () => {
        this.#exitCode = null;
        running.delete(this);
        resolve(null);
      });
    });
    running.add(this);
    installExitHooks();
  }

  get pid(): number | undefined {
    return this.#child.pid;
  }

  get running(): boolean {
    return this.#exitCode === undefined;
  }

  /** SIGTERM, then SIGKILL after `graceMs`; resolves once the process is gone. */
  async stop(graceMs = 10_000): Promise<void> {
    if (!this.running) return;
    this.#child.kill("SIGTERM");
    const timer = setTimeout(() => this.#child.kill("SIGKILL"), graceMs);
    await this.exited;
    clearTimeout(timer);
  }

  killNow(): void {
    if (this.running) this.#child.kill("SIGKILL");
  }

  /** The last lines the process wrote, for error messages. */
  logTail(lines = 30): string {
    if (!existsSync(this.logFile)) return "";
    return readFileSync(this.logFile, "utf8").trimEnd().split("\n").slice(-lines).join("\n");
  }
}

const PDEATHSIG =
  process.platform === "linux" && existsSync("/usr/bin/setpriv") ? "/usr/bin/setpriv" : undefined;

const running = new Set<ManagedProcess>();
const exitCallbacks = new Set<() => void>();
let hooksInstalled = false;

/** Runs `fn` synchronously when this process exits or is interrupted (after children are killed). */
export function onProcessExit(fn: () => void): () => void {
  exitCallbacks.add(fn);
  installExitHooks();
  return () => exitCallbacks.delete(fn);
}

function killAllNow(): void {
  for (const p of running) p.killNow();
  for (const fn of exitCallbacks) {
    try {
      fn();
    } catch {
      // Best effort at exit: one failed cleanup must not skip the others.
    }
  }
  exitCallbacks.clear();
}

/**
 * Kills children and runs exit callbacks on exit. A signal only causes an exit here when nobody else
 * listens for it: an application that handles SIGINT/SIGTERM itself owns its graceful shutdown.
 */
function installExitHooks(): void {
  if (hooksInstalled) return;
  hooksInstalled = true;
  process.once("exit", killAllNow);
  for (const [signal, code] of [
    ["SIGINT", 130],
    ["SIGTERM", 143],
    ["SIGHUP", 129],
  ] as const) {
    process.on(signal, () => {
      if (process.listenerCount(signal) === 1) process.exit(code);
    });
  }
}
