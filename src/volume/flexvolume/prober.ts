import { watch, type FSWatcher } from "node:fs";
import { access, constants, mkdir, readdir } from "node:fs/promises";
import { join } from "node:path";
import { errorMessage } from "../../runtime/api-errors.js";
import type { LogSink } from "../../runtime/logger.js";
import type { DynamicPluginProber, ProbeEvent } from "../plugin-manager.js";
import { DEFAULT_CALL_TIMEOUT_MS, driverNameOf, executableOf, FlexVolumePlugin } from "./plugin.js";

/** kube-controller-manager's default --flex-volume-plugin-dir. */
export const DEFAULT_FLEX_VOLUME_PLUGIN_DIR = "/usr/libexec/kubernetes/kubelet-plugins/volume/exec/";

export interface FlexVolumeProberOptions {
  pluginDir: string;
  log: LogSink;
  callTimeoutMs?: number;
}

/**
 * Finds FlexVolume drivers in the plugin directory (upstream flexVolumeProber): every
 * `<vendor~driver>/<driver>` executable is a plugin once its `init` succeeds; dot-directories are
 * ignored. The first probe scans everything; after that filesystem events (the directory and each
 * driver's directory are watched) mark drivers to look at again, so drivers are added, replaced and
 * removed while the controller runs. A deleted plugin directory is recreated and rescanned.
 *
 * Unlike upstream, a driver whose init fails is tried again on its next filesystem change, not on
 * every probe: probes run every 100 ms, and a hanging init would otherwise be re-run without end.
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
  #closed = false;

  constructor(options: FlexVolumeProberOptions) {
    this.#o = options;
    this.#callTimeoutMs = options.callTimeoutMs ?? DEFAULT_CALL_TIMEOUT_MS;
  }

  async init(): Promise<void> {
    await mkdir(this.#o.pluginDir, { recursive: true });
    this.#watchRoot();
  }

  async probe(): Promise<ProbeEvent[]> {
    if (this.#closed) return [];
    const present = await access(this.#o.pluginDir).then(
      () => true,
      () => false,
    );
    if (!present || !this.#watchers.has("")) {
      // The plugin directory was deleted: recreate it, watch it again and rescan.
      this.#unwatch("");
      await mkdir(this.#o.pluginDir, { recursive: true });
      this.#watchRoot();
      this.#probeAll = true;
    }
    let directories: string[];
    if (this.#probeAll) {
      this.#probeAll = false;
      this.#dirty.clear();
      const entries = await readdir(this.#o.pluginDir, { withFileTypes: true });
      directories = entries.filter((e) => e.isDirectory() && !e.name.startsWith(".")).map((e) => e.name);
      for (const gone of [...this.#known].filter((d) => !directories.includes(d))) directories.push(gone);
    } else {
      directories = [...this.#dirty];
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
      this.#unwatch(directory);
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
      });
      const op = this.#known.has(directory) ? "update" : "add";
      this.#known.add(directory);
      return { op, plugin };
    } catch (err) {
      this.#o.log.error(
        { driver: driverNameOf(directory), err: errorMessage(err) },
        "error creating Flexvolume plugin from directory, skipping",
      );
      // A driver that no longer initialises is not kept with its old capabilities.
      if (!this.#known.delete(directory)) return undefined;
      return { op: "remove", pluginName: driverNameOf(directory) };
    }
  }

  #watchRoot(): void {
    this.#watch("", this.#o.pluginDir, (name) => {
      if (name && !name.startsWith(".")) this.#dirty.add(name);
    });
  }

  #watchDriver(directory: string): void {
    if (this.#watchers.has(directory)) return;
    this.#watch(directory, join(this.#o.pluginDir, directory), (name) => {
      if (!name?.startsWith(".")) this.#dirty.add(directory);
    });
  }

  #unwatch(directory: string): void {
    this.#watchers.get(directory)?.close();
    this.#watchers.delete(directory);
  }

  /** Watches `path` under `key` ("" for the plugin directory); a watch that errors (path deleted) ends. */
  #watch(key: string, path: string, onChange: (name: string | null) => void): void {
    try {
      const watcher = watch(path, { persistent: false }, (_event, name) => {
        onChange(name);
      });
      watcher.on("error", () => {
        this.#unwatch(key);
        if (key !== "") this.#dirty.add(key);
      });
      this.#watchers.set(key, watcher);
    } catch (err) {
      this.#o.log.error({ path, err: errorMessage(err) }, "cannot watch the FlexVolume plugin directory");
      if (key !== "") this.#dirty.add(key);
    }
  }
}
