import { Wakeup } from "../runtime/clock.js";
import type { LogSink } from "../runtime/logger.js";
import {
  isAttachable,
  isDeletable,
  isProvisionable,
  isRecyclable,
  type AttachableVolumePlugin,
  type DeletableVolumePlugin,
  type ProvisionableVolumePlugin,
  type RecyclableVolumePlugin,
  type VolumePlugin,
  type VolumeSpec,
} from "./plugin.js";

/** A change in the dynamically discovered plugins (upstream volume.ProbeEvent). */
export type ProbeEvent =
  { op: "add" | "update"; plugin: VolumePlugin } | { op: "remove"; pluginName: string };

/**
 * Discovers plugins at run time (FlexVolume drivers appearing in a directory). probe() reports each
 * change once; a prober that fails for some plugins returns the events of the others and logs the rest.
 */
export interface DynamicPluginProber {
  init(): Promise<void>;
  probe(): Promise<ProbeEvent[]>;
  /**
   * Calls `listener` whenever a probe may find something (a watch event, a retry falling due); a
   * prober without it is probed on every refresh.
   */
  onProbeNeeded?(listener: () => void): void;
}

/** Thrown when no plugin supports a spec; callers that treat "none" as normal test for it. */
export class NoPluginMatchedError extends Error {
  override readonly name = "NoPluginMatchedError";
}

// IsQualifiedName: optional DNS-subdomain prefix and "/", then a name of at most 63 characters.
const PREFIX = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const NAME = /^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$/;

function checkQualifiedName(name: string): void {
  const slash = name.indexOf("/");
  const prefix = slash < 0 ? undefined : name.slice(0, slash);
  const local = slash < 0 ? name : name.slice(slash + 1);
  const valid =
    (prefix === undefined || (prefix.length <= 253 && PREFIX.test(prefix))) &&
    local.length <= 63 &&
    NAME.test(local);
  if (!valid) throw new Error(`volume plugin has invalid name: "${name}"`);
}

/**
 * Holds the registered plugins and those probers discover, and resolves specs and names to a plugin
 * (upstream VolumePluginMgr). Lookups are synchronous so informer handlers can use them; probed
 * plugins change only in refreshProbedPlugins(), which the controllers call before each pass.
 */
export class VolumePluginManager {
  readonly #plugins = new Map<string, VolumePlugin>();
  readonly #probed = new Map<string, VolumePlugin>();
  readonly #probers: DynamicPluginProber[] = [];
  // Refreshes run one after another so a later probe's events are never applied before an earlier one's.
  #refreshing: Promise<void> = Promise.resolve();
  /** A prober said a probe may find something since the last refresh began. */
  #probeNeeded = false;
  /** Some prober cannot say when (no onProbeNeeded): every refresh is needed. */
  #polled = false;
  /** Ends whenProbeNeeded's wait. */
  readonly #wakeup = new Wakeup();

  constructor(private readonly logger: LogSink) {}

  /** Adds plugins; throws, adding none, when a name is invalid or already registered. */
  register(plugins: readonly VolumePlugin[]): void {
    const names = new Set(this.#plugins.keys());
    for (const { name } of plugins) {
      checkQualifiedName(name);
      if (names.has(name)) throw new Error(`volume plugin "${name}" was registered more than once`);
      names.add(name);
    }
    for (const plugin of plugins) {
      this.#plugins.set(plugin.name, plugin);
      this.logger.info({ pluginName: plugin.name }, "Loaded volume plugin");
    }
  }

  /** Initialises the prober and polls it from then on; rejects (prober not added) when init fails. */
  async addProber(prober: DynamicPluginProber): Promise<void> {
    await prober.init();
    this.#probers.push(prober);
    if (prober.onProbeNeeded) {
      prober.onProbeNeeded(() => {
        this.#probeNeeded = true;
        this.#wakeup.wake();
      });
    } else this.#polled = true;
    await this.refreshProbedPlugins();
  }

  /**
   * Resolves once a refresh may find something: a prober said so since the last refresh began (at
   * once for a prober that cannot tell). Rejects when `signal` aborts.
   */
  whenProbeNeeded(signal: AbortSignal): Promise<void> {
    if (signal.aborted) return Promise.reject(signal.reason as Error);
    if (this.#polled || this.#probeNeeded) return Promise.resolve();
    return this.#wakeup.until(signal);
  }

  /**
   * Applies what the probers report since the last call and resolves whether a plugin came or went
   * (callers then look again at volumes they skipped). Never rejects: probe errors are logged.
   */
  refreshProbedPlugins(): Promise<boolean> {
    let changed = false;
    this.#refreshing = this.#refreshing.then(async () => {
      this.#probeNeeded = false;
      for (const prober of this.#probers) {
        let events: ProbeEvent[];
        try {
          events = await prober.probe();
        } catch (err) {
          this.logger.error({ err }, "Error dynamically probing plugins");
          continue;
        }
        for (const event of events) changed = this.#apply(event) || changed;
      }
    });
    return this.#refreshing.then(() => changed);
  }

  /** Whether the event changed the probed plugins. */
  #apply(event: ProbeEvent): boolean {
    if (event.op === "remove") {
      this.logger.info({ pluginName: event.pluginName }, "Unloaded volume plugin");
      return this.#probed.delete(event.pluginName);
    }
    try {
      checkQualifiedName(event.plugin.name);
    } catch (err) {
      this.logger.error({ err }, "Error initializing dynamically probed plugin");
      return false;
    }
    this.#probed.set(event.plugin.name, event.plugin);
    this.logger.info({ pluginName: event.plugin.name }, "Loaded volume plugin");
    return true;
  }

  /** The one plugin that supports the spec; throws when none or several do. */
  findPluginBySpec(spec: VolumeSpec): VolumePlugin {
    const matches = this.#supporting(spec);
    const [match] = matches;
    if (!match) throw new NoPluginMatchedError("no volume plugin matched");
    if (matches.length > 1) {
      throw new Error(`multiple volume plugins matched: ${matches.map((p) => p.name).join(",")}`);
    }
    return match;
  }

  /** Throws when no plugin, or both a registered and a probed one, has this name. */
  findPluginByName(name: string): VolumePlugin {
    const registered = this.#plugins.get(name);
    const probed = this.#probed.get(name);
    if (registered && probed) throw new Error(`multiple volume plugins matched: ${name} and ${name}`);
    const match = registered ?? probed;
    if (!match) throw new NoPluginMatchedError(`no volume plugin matched name: ${name}`);
    return match;
  }

  /** By StorageClass.provisioner. The binder treats a throw for a non-"kubernetes.io/" name as external. */
  findProvisionablePluginByName(name: string): ProvisionableVolumePlugin {
    const plugin = this.findPluginByName(name);
    if (!isProvisionable(plugin)) throw new Error("no provisionable volume plugin matched");
    return plugin;
  }

  /** By the PV's provisioned-by annotation, to delete with the plugin that provisioned it. */
  findDeletablePluginByName(name: string): DeletableVolumePlugin {
    const plugin = this.findPluginByName(name);
    if (!isDeletable(plugin)) throw new Error("no deletable volume plugin matched");
    return plugin;
  }

  findDeletablePluginBySpec(spec: VolumeSpec): DeletableVolumePlugin {
    const plugin = this.findPluginBySpec(spec);
    if (!isDeletable(plugin)) throw new Error("no deletable volume plugin matched");
    return plugin;
  }

  findRecyclablePluginBySpec(spec: VolumeSpec): RecyclableVolumePlugin {
    const plugin = this.findPluginBySpec(spec);
    if (!isRecyclable(plugin)) throw new Error("no recyclable volume plugin matched");
    return plugin;
  }

  /**
   * Undefined when the volume needs no attaching (plugin not attachable, or canAttach false); throws
   * like findPluginBySpec when no single plugin supports the spec.
   */
  findAttachablePluginBySpec(spec: VolumeSpec): AttachableVolumePlugin | undefined {
    const plugin = this.findPluginBySpec(spec);
    return isAttachable(plugin) && plugin.canAttach(spec) ? plugin : undefined;
  }

  /**
   * findAttachablePluginBySpec without its errors: undefined also when no plugin or several support
   * the spec. For the passes over every pod volume in the cluster, where most volumes (configMaps,
   * secrets, projected tokens) have no plugin and an Error per volume was about 15% of a new leader's
   * start-up at scale (issue 30 goal 1).
   */
  attachablePluginFor(spec: VolumeSpec): AttachableVolumePlugin | undefined {
    const matches = this.#supporting(spec);
    const [plugin] = matches;
    return matches.length === 1 && plugin && isAttachable(plugin) && plugin.canAttach(spec)
      ? plugin
      : undefined;
  }

  #supporting(spec: VolumeSpec): VolumePlugin[] {
    return [...this.#plugins.values(), ...this.#probed.values()].filter((p) => p.canSupport(spec));
  }

  /** For a detach known only by unique volume name; undefined when the plugin is not attachable. */
  findAttachablePluginByName(name: string): AttachableVolumePlugin | undefined {
    const plugin = this.findPluginByName(name);
    return isAttachable(plugin) ? plugin : undefined;
  }
}
