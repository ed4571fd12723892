import { rm } from "node:fs/promises";
import { resolve, sep } from "node:path";
import type { SideEffectGate } from "../../runtime/write-gate.js";
import type { Deleter } from "../plugin.js";

/**
 * Removes a hostPath PV's directory, but only strictly inside the provisioner's base directory:
 * a released PV pointing at /etc or /home must never be wiped. (Upstream accepts anything matching
 * "/tmp/.+"; this is the narrower rule.) Paths are resolved first so ".." cannot escape.
 */
export class HostPathDeleter implements Deleter {
  constructor(
    private readonly baseDir: string,
    private readonly path: string,
    /** Shadow mode: checked as for real, nothing removed. */
    private readonly shadow = false,
    /** A leader's write gate: the directory is removed only when it admits it. */
    private readonly gate?: SideEffectGate,
  ) {}

  async delete(): Promise<void> {
    const target = resolve(this.path);
    if (!target.startsWith(resolve(this.baseDir) + sep)) {
      throw new Error(`host_path deleter only deletes directories under ${this.baseDir}/, not ${this.path}`);
    }
    if (this.shadow) return;
    const remove = () => rm(target, { recursive: true, force: true });
    await (this.gate ? this.gate.runSideEffect(remove) : remove());
  }
}
