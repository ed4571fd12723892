import { join } from "node:path";
import type { LogSink } from "../../runtime/logger.js";
import type { SideEffectGate } from "../../runtime/write-gate.js";
import {
  specName,
  type AttachableVolumePlugin,
  type Attacher,
  type Detacher,
  type VolumeSpec,
} from "../plugin.js";
import {
  driverOptions,
  NotSupportedError,
  runDriverCall,
  type DriverCapabilities,
  type DriverCommand,
  type DriverStatus,
} from "./driver-call.js";

/**
 * Per call: upstream has none (only the kubelet's waitforattach is bounded), so a hung driver holds
 * its volume's operation forever. Two minutes matches how long the CSI attacher waits for its
 * external-attacher: long enough for a cloud attach, short enough to surface a stuck driver.
 */
export const DEFAULT_CALL_TIMEOUT_MS = 2 * 60_000;

/** "vendor~driver" (the directory) → "vendor/driver" (upstream UnescapeQualifiedName). */
export function driverNameOf(directory: string): string {
  return directory.replace("~", "/");
}

/** The executable inside a driver's directory: the part after "~" (upstream getExecutable). */
export function executableOf(directory: string): string {
  return directory.slice(directory.indexOf("~") + 1);
}

function flexSource(spec: VolumeSpec) {
  return spec.volume ? spec.volume.flexVolume : spec.persistentVolume.spec?.flexVolume;
}

export interface FlexVolumePluginOptions {
  pluginDir: string;
  /** The driver's directory name, "vendor~driver". */
  directory: string;
  capabilities: DriverCapabilities;
  callTimeoutMs: number;
  log: LogSink;
  /**
   * Shadow mode (src/shadow): the driver is never run. attach and detach act on the storage; init,
   * getvolumename and isattached only ask, but a driver is any program (it may load modules, call
   * its storage's API) and the shadow must leave the machine as it found it. See SHADOW_REPLIES.
   */
  shadow?: boolean;
  /** A leader's write gate: attach and detach run only when it admits them, as API writes. */
  gate?: SideEffectGate | undefined;
}

/** The commands that change the world; the others only ask the driver. */
const ACTING_COMMANDS = new Set<DriverCommand>(["attach", "detach"]);

/**
 * What shadow mode takes as the driver's answer to each command it does not run: attach and detach
 * succeed; init reports upstream's default capabilities (attach: true, what a driver that leaves them
 * out gets); getvolumename's answer is never used; isattached is "Not supported", upstream's
 * fallback, so every attachment counts as still there and no detach is decided from a check the
 * shadow did not make.
 */
const SHADOW_REPLIES: Record<DriverCommand, "Success" | "Not supported"> = {
  init: "Success",
  getvolumename: "Not supported",
  attach: "Success",
  detach: "Success",
  isattached: "Not supported",
};

/**
 * One FlexVolume driver as a volume plugin (upstream flexVolumePlugin, controller side): named as the
 * driver ("vendor/driver"), supporting flexVolume sources with that driver, attachable when its
 * init reported capabilities.attach. Commands a driver answered "Not supported" are not run again.
 */
export class FlexVolumePlugin implements AttachableVolumePlugin {
  readonly name: string;
  readonly #executable: string;
  readonly #o: FlexVolumePluginOptions;
  readonly #unsupported = new Set<DriverCommand>();

  constructor(options: FlexVolumePluginOptions) {
    this.#o = options;
    this.name = driverNameOf(options.directory);
    this.#executable = join(options.pluginDir, options.directory, executableOf(options.directory));
  }

  /** Runs `init` and builds the plugin from its capabilities (upstream NewFlexVolumePlugin). */
  static async create(options: Omit<FlexVolumePluginOptions, "capabilities">): Promise<FlexVolumePlugin> {
    const probe = new FlexVolumePlugin({ ...options, capabilities: { attach: true } });
    const status = await probe.call("init", []);
    return new FlexVolumePlugin({ ...options, capabilities: status.capabilities });
  }

  canSupport(spec: VolumeSpec): boolean {
    return flexSource(spec)?.driver === this.name;
  }

  canAttach(): boolean {
    return this.#o.capabilities.attach;
  }

  /**
   * The PV's or inline volume's name. Upstream calls the driver's `getvolumename` here but then uses
   * this name whatever the driver answered, failing only if the call fails; our lookups are synchronous
   * (informer handlers make them), so the call moves to the start of attach, where its failure is
   * reported the same way and nothing blocks.
   */
  getVolumeName(spec: VolumeSpec): string {
    return specName(spec);
  }

  newAttacher(): Attacher {
    return {
      attach: async (spec, nodeName, signal) => {
        const options = JSON.stringify(driverOptions(spec));
        try {
          await this.call("getvolumename", [options], signal);
        } catch (err) {
          if (!(err instanceof NotSupportedError)) throw err;
        }
        try {
          return (await this.call("attach", [options, nodeName], signal)).device ?? "";
        } catch (err) {
          if (err instanceof NotSupportedError) return ""; // upstream attacherDefaults
          throw err;
        }
      },
      volumesAreAttached: async (specs, nodeName) => {
        const result = new Map<VolumeSpec, boolean>(specs.map((s) => [s, true]));
        for (const spec of specs) {
          try {
            const status = await this.call("isattached", [JSON.stringify(driverOptions(spec)), nodeName]);
            result.set(spec, status.attached === true);
          } catch (err) {
            // Not supported: nothing can be verified, so everything counts as attached (upstream).
            if (err instanceof NotSupportedError) return new Map(specs.map((s) => [s, true]));
            throw err;
          }
        }
        return result;
      },
    };
  }

  newDetacher(): Detacher {
    return {
      detach: async (volumeName, nodeName, signal) => {
        try {
          await this.call("detach", [volumeName, nodeName], signal);
        } catch (err) {
          if (!(err instanceof NotSupportedError)) throw err;
          this.#o.log.info(
            { driver: this.name, volumeName },
            "FlexVolume driver does not support detach; using the default",
          );
        }
      },
    };
  }

  /** One driver call; a command once answered "Not supported" is not run again (upstream). */
  async call(command: DriverCommand, args: readonly string[], signal?: AbortSignal): Promise<DriverStatus> {
    if (this.#unsupported.has(command)) throw new NotSupportedError();
    if (this.#o.shadow) {
      this.#o.log.info({ driver: this.name, command, args }, "shadow mode: FlexVolume driver call not run");
      if (SHADOW_REPLIES[command] === "Not supported") throw new NotSupportedError();
      return { status: "Success", capabilities: this.#o.capabilities };
    }
    const run = (fence?: AbortSignal) =>
      runDriverCall({
        executable: this.#executable,
        driver: this.name,
        command,
        args,
        timeoutMs: this.#o.callTimeoutMs,
        signal: fence && signal ? AbortSignal.any([signal, fence]) : (fence ?? signal),
      });
    try {
      const gate = this.#o.gate;
      return await (gate && ACTING_COMMANDS.has(command) ? gate.runSideEffect(run) : run());
    } catch (err) {
      if (err instanceof NotSupportedError) this.#unsupported.add(command);
      throw err;
    }
  }
}
