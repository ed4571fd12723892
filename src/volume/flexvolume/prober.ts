import { watch, type FSWatcher } from "node:fs";
import { access, constants, mkdir, readdir } from "node:fs/promises";
import { join } from "node:path";
import { errorMessage } from "../../runtime/api-errors.js";
import { realClock, type Clock } from "../../runtime/clock.js";
import { ExponentialBackoff } from "../../util/exponential-backoff.js";
import type { LogSink } from "../../runtime/logger.js";
import type { SideEffectGate } from "../../runtime/write-gate.js";
import type { DynamicPluginProber, ProbeEvent } from "../plugin-manager.js";
import { DEFAULT_CALL_TIMEOUT_MS, driverNameOf, executableOf, FlexVolumePlugin } from "./plugin.js";

/** kube-controller-manager's default --flex-volume-plugin-dir. */
export const DEFAULT_FLEX_VOLUME_PLUGIN_DIR = "/usr/libexec/kubernetes/kubelet-plugins/volume/exec/";

export interface FlexVolumeProberOptions {
  pluginDir: string;
  log: LogSink;
  callTimeoutMs?: number;
  /** Shadow mode (src/shadow): the plugin directory is never created, drivers are never run. */
  shadow?: boolean;
  /** A leader's write gate, which the drivers' attach and detach pass (FlexVolumePluginOptions.gate). */
  gate?: SideEffectGate | undefined;
  /** Times the retries of failed inits (default the real clock). */
  clock?: Clock;
  /** node:fs watch; a test seam for a directory that cannot be watched. */
  watch?: typeof watch;
}

/**
 * Finds FlexVolume drivers in the plugin directory (upstream flexVolumeProber): every
 * `<vendor~driver>/<driver>` executable is a plugin once its `init` succeeds; dot-directories are
 * ignored. The first probe scans everything; after that filesystem events (the directory and each
 * driver's directory are watched) mark drivers to look at again, so drivers are added, replaced and
 * removed while the controller runs. A deleted plugin directory is recreated and rescanned.
 *
 * A driver whose init fails keeps its registered plugin, if any, and is tried again (upstream keeps it
 * in its events map and retries on every probe). Unlike upstream, the retries back off per driver
 * (500 ms doubling to 2m2s): probes run every 100 ms, and a broken driver would otherwise be executed
 * ten times a second; upstream also never retries a driver that failed the first full scan.
 *
 * When the plugin directory cannot be watched, init() rejects and the caller runs without FlexVolume
 * (upstream swaps in its dummy prober); a directory deleted later whose watch cannot be set up again
 * is retried with the same backoff, not rescanned on every probe.
 */
export class FlexVolumeProber implements DynamicPluginProber {
  readonly #o: FlexVolumeProberOptions;
  readonly #callTimeoutMs: number;
  #probeAll = true;
  /** Driver directories changed since the last probe. */
  readonly #dirty = new Set<string>();
  /** Driver directories whose plugin is registered. */
  readonly #known = new Set<string>();
  readonly #watchers = new Map<string, FSWatcher>();
  /** Driver directories whose init failed, with when to try again. */
  readonly #failed = new Map<string, ExponentialBackoff>();
  /** The plugin directory's watch reported something (its own deletion among others) since the last probe. */
  #rootChanged = false;
  /** Set while the plugin directory, deleted, could not be watched again. */
  #rewatch: ExponentialBackoff | undefined;
  readonly #clock: Clock;
  #closed = false;
  #onProbeNeeded: (() => void) | undefined;
  /** Cancel the retry timers (failed inits, the plugin directory's watch). */
  readonly #retries = new Set<() => void>();

  constructor(options: FlexVolumeProberOptions) {
    this.#o = options;
    this.#callTimeoutMs = options.callTimeoutMs ?? DEFAULT_CALL_TIMEOUT_MS;
    this.#clock = options.clock ?? realClock;
  }

  /** Rejects when the plugin directory cannot be created or watched. */
  async init(): Promise<void> {
    if (!this.#o.shadow) await mkdir(this.#o.pluginDir, { recursive: true });
    const err = this.#watchRoot();
    if (err !== undefined) throw new Error(`error adding watch on Flexvolume directory: ${err}`);
  }

  onProbeNeeded(listener: () => void): void {
    this.#onProbeNeeded = listener;
  }

  async probe(): Promise<ProbeEvent[]> {
    if (this.#closed) return [];
    // Looked for only after an event, as upstream's fsnotify handler does (issue 30 goal 2: probes run
    // every 100 ms, and a stat each time was most of an idle controller's cost).
    const look = this.#rootChanged || !this.#watchers.has("");
    this.#rootChanged = false;
    const present =
      !look ||
      (await access(this.#o.pluginDir).then(
        () => true,
        () => false,
      ));
    if ((!present || !this.#watchers.has("")) && (this.#rewatch?.safeToRetry(this.#clock.now()) ?? true)) {
      // The plugin directory was deleted: recreate it, watch it again and rescan.
      this.#unwatch("");
      if (!this.#o.shadow) await mkdir(this.#o.pluginDir, { recursive: true });
      const err = this.#watchRoot();
      if (err === undefined) {
        this.#rewatch = undefined;
        this.#probeAll = true;
      } else {
        (this.#rewatch ??= new ExponentialBackoff()).update(this.#clock.now());
        this.#retryAfter(this.#rewatch.durationMs);
        this.#o.log.error(
          { path: this.#o.pluginDir, err, retryAfterMs: this.#rewatch.durationMs },
          "cannot watch the FlexVolume plugin directory",
        );
      }
    }
    let directories: string[];
    if (this.#probeAll) {
      this.#probeAll = false;
      this.#dirty.clear();
      this.#failed.clear();
      const entries = await readdir(this.#o.pluginDir, { withFileTypes: true });
      directories = entries.filter((e) => e.isDirectory() && !e.name.startsWith(".")).map((e) => e.name);
      for (const gone of [...this.#known].filter((d) => !directories.includes(d))) directories.push(gone);
    } else {
      const now = this.#clock.now();
      const retries = [...this.#failed].filter(([, b]) => b.safeToRetry(now)).map(([d]) => d);
      directories = [...new Set([...this.#dirty, ...retries])];
      this.#dirty.clear();
    }
    const events: ProbeEvent[] = [];
    for (const directory of directories) {
      const event = await this.#probeDriver(directory);
      if (event) events.push(event);
    }
    return events;
  }

  /** Stops watching. */
  close(): void {
    this.#closed = true;
    for (const cancel of this.#retries) cancel();
    this.#retries.clear();
    for (const w of this.#watchers.values()) w.close();
    this.#watchers.clear();
  }

  async #probeDriver(directory: string): Promise<ProbeEvent | undefined> {
    const dir = join(this.#o.pluginDir, directory);
    const executable = join(dir, executableOf(directory));
    const installed = await access(executable, constants.X_OK).then(
      () => true,
      () => false,
    );
    if (!installed) {
      // A driver directory whose executable is still to come is watched, so that its arrival is seen
      // (upstream watches every directory created under the plugin directory).
      const present = await access(dir).then(
        () => true,
        () => false,
      );
      if (present) this.#watchDriver(directory);
      else this.#unwatch(directory);
      this.#failed.delete(directory);
      if (!this.#known.delete(directory)) return undefined;
      return { op: "remove", pluginName: driverNameOf(directory) };
    }
    this.#watchDriver(directory);
    try {
      const plugin = await FlexVolumePlugin.create({
        pluginDir: this.#o.pluginDir,
        directory,
        callTimeoutMs: this.#callTimeoutMs,
        log: this.#o.log,
        ...(this.#o.shadow && { shadow: true }),
        gate: this.#o.gate,
      });
      const op = this.#known.has(directory) ? "update" : "add";
      this.#known.add(directory);
      this.#failed.delete(directory);
      return { op, plugin };
    } catch (err) {
      // Transient or not, the registered plugin (if any) stays until an init succeeds or the
      // executable goes, as upstream: unloading it would strand its attached volumes.
      const backoff = this.#failed.get(directory) ?? new ExponentialBackoff();
      backoff.update(this.#clock.now());
      this.#failed.set(directory, backoff);
      this.#retryAfter(backoff.durationMs);
      this.#o.log.error(
        { driver: driverNameOf(directory), err, retryAfterMs: backoff.durationMs },
        "error creating Flexvolume plugin from directory, skipping",
      );
      return undefined;
    }
  }

  /** Tells the plugin manager that a probe may find something. */
  #probeNeeded(): void {
    this.#onProbeNeeded?.();
  }

  /** A probe is needed once a backoff of `ms` has passed (safeToRetry: strictly after). */
  #retryAfter(ms: number): void {
    const cancel = this.#clock.setTimer(() => {
      this.#retries.delete(cancel);
      this.#probeNeeded();
    }, ms + 1);
    this.#retries.add(cancel);
  }

  /** Undefined when watching; else why not. */
  #watchRoot(): string | undefined {
    return this.#watch("", this.#o.pluginDir, (name) => {
      this.#rootChanged = true;
      if (name && !name.startsWith(".")) this.#dirty.add(name);
      this.#probeNeeded();
    });
  }

  /** A driver directory that cannot be watched is still probed on the plugin directory's events. */
  #watchDriver(directory: string): void {
    if (this.#watchers.has(directory)) return;
    const err = this.#watch(directory, join(this.#o.pluginDir, directory), (name) => {
      if (name?.startsWith(".")) return;
      this.#dirty.add(directory);
      this.#probeNeeded();
    });
    if (err !== undefined) {
      this.#o.log.error(
        { driver: driverNameOf(directory), err },
        "cannot watch the FlexVolume driver directory",
      );
    }
  }

  #unwatch(directory: string): void {
    this.#watchers.get(directory)?.close();
    this.#watchers.delete(directory);
  }

  /**
   * Watches `path` under `key` ("" for the plugin directory); a watch that errors (path deleted) ends
   * and marks the driver for a look. Returns why the watch could not be set up, if it could not.
   */
  #watch(key: string, path: string, onChange: (name: string | null) => void): string | undefined {
    try {
      const watcher = (this.#o.watch ?? watch)(path, { persistent: false }, (_event, name) => {
        onChange(name);
      });
      watcher.on("error", () => {
        this.#unwatch(key);
        if (key !== "") this.#dirty.add(key);
        this.#probeNeeded();
      });
      this.#watchers.set(key, watcher);
      return undefined;
    } catch (err) {
      return errorMessage(err);
    }
  }
}
