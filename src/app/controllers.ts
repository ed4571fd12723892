import type { Registry } from "prom-client";
import { CONTROLLERS, type ControllerName } from "./controller-names.js";
import type { RunConfig } from "./options.js";
import type { TestSeams } from "../persistentvolume/crash-seam.js";
import { PersistentVolumeMetrics } from "../persistentvolume/metrics.js";
import { PersistentVolumeControllerRunner } from "../persistentvolume/pv-controller-base.js";
import { realClock } from "../runtime/clock.js";
import { EventRecorder } from "../runtime/events/recorder.js";
import { AttachDetachController } from "../attachdetach/attach-detach-controller.js";
import { errorMessage } from "../runtime/api-errors.js";
import {
  attachablePlugins,
  provisionableRecyclablePlugins,
  type DefaultPluginsOptions,
} from "../volume/default-plugins.js";
import { FlexVolumeProber } from "../volume/flexvolume/prober.js";
import { VolumePluginManager } from "../volume/plugin-manager.js";
import { PVCProtectionController } from "../protection/pvc-protection-controller.js";
import { PVProtectionController } from "../protection/pv-protection-controller.js";
import { ShadowRecyclerPods } from "../shadow/recycler-pods.js";
import type { ApiClients } from "../runtime/client.js";
import type { InformerFactory } from "../runtime/informer/index.js";
import type { Logger } from "../runtime/logger.js";
import type { WorkqueueMetrics } from "../runtime/workqueue/index.js";
import type { SideEffectGate } from "../runtime/write-gate.js";

export interface ControllerContext {
  config: RunConfig;
  /** The controller's own (see newControllers). */
  clients: ApiClients;
  informers: InformerFactory;
  /** The controller's own: a child of the process's logger with its name as `controller`. */
  logger: Logger;
  /** Where controllers register their own metrics (served on /metrics). */
  registry: Registry;
  workqueueMetrics: WorkqueueMetrics;
  /** A leader's write gate: the plugins' side effects outside the API pass it (none without one). */
  writeGate?: SideEffectGate | undefined;
  /** Set by tests only, through run()'s options. */
  seams?: TestSeams | undefined;
}

export interface Controller {
  /** Works until `signal` aborts; resolves when the workers have stopped. */
  run(signal: AbortSignal): Promise<void>;
}

/**
 * How each controller is built. Constructors register their informers, indexers and handlers, so
 * they must all run before the informer factory starts.
 */
const CONSTRUCTORS: Partial<Record<ControllerName, (ctx: ControllerContext) => Controller>> = {
  "persistentvolume-binder-controller": (ctx) => {
    const plugins = new VolumePluginManager(ctx.logger);
    // Shadow mode: the recycler follows upstream's pod, its own being never created.
    const pods = ctx.config.shadow
      ? new ShadowRecyclerPods(ctx.clients.core, ctx.informers.pods())
      : undefined;
    plugins.register(provisionableRecyclablePlugins({ ...pluginOptions(ctx), ...(pods && { pods }) }));
    const events = eventRecorder(ctx, "persistentvolume-controller");
    const binder = new PersistentVolumeControllerRunner({
      ...common(ctx),
      plugins,
      events,
      workqueueMetrics: ctx.workqueueMetrics,
      metrics: new PersistentVolumeMetrics(ctx.registry),
      resyncPeriodMs: ctx.config.pvClaimBinderSyncPeriodMs,
      concurrentSyncs: ctx.config.concurrentPvClaimBinderSyncs,
      enableDynamicProvisioning: ctx.config.enableDynamicProvisioning,
      shadow: ctx.config.shadow !== undefined, // shadow mode
      ...(ctx.seams?.pauseAfterBindWrite !== undefined && {
        pauseAfterBindWrite: ctx.seams.pauseAfterBindWrite,
      }),
    });
    return {
      run: async (signal) => {
        try {
          await binder.run(signal);
        } finally {
          await events.close();
        }
      },
    };
  },
  "persistentvolume-attach-detach-controller": (ctx) => {
    const plugins = new VolumePluginManager(ctx.logger);
    plugins.register(
      attachablePlugins({
        ...pluginOptions(ctx),
        csi: {
          volumeAttachments: ctx.clients.storage,
          volumeAttachmentLister: ctx.informers.volumeAttachments().store,
          csiDrivers: ctx.informers.csiDrivers().store,
          shadow: ctx.config.shadow !== undefined, // shadow mode
        },
      }),
    );
    const events = eventRecorder(ctx, "attachdetach-controller");
    const prober = new FlexVolumeProber({
      pluginDir: ctx.config.flexVolumePluginDir,
      log: ctx.logger,
      shadow: ctx.config.shadow !== undefined, // shadow mode
      gate: ctx.writeGate,
    });
    const controller = new AttachDetachController({
      clients: ctx.clients,
      informers: ctx.informers,
      plugins,
      events,
      logger: ctx.logger,
      registry: ctx.registry,
      workqueueMetrics: ctx.workqueueMetrics,
      reconcilerSyncPeriodMs: ctx.config.attachDetachReconcileSyncPeriodMs,
      disableReconciliationSync: ctx.config.disableAttachDetachReconcileSync,
      disableForceDetachOnTimeout: ctx.config.disableForceDetachOnTimeout,
    });
    return {
      run: async (signal) => {
        try {
          // Before the controller starts: its start-up must resolve FlexVolume specs, or it could
          // detach their volumes as unwanted (upstream probes when the plugin manager starts, too).
          await plugins.addProber(prober);
        } catch (err) {
          ctx.logger.error(
            { dir: ctx.config.flexVolumePluginDir, err: errorMessage(err) },
            "FlexVolume drivers are not available: cannot use the plugin directory",
          );
        }
        try {
          await controller.run(signal);
        } finally {
          prober.close();
          await events.close();
        }
      },
    };
  },
  "persistentvolumeclaim-protection-controller": (ctx) =>
    new PVCProtectionController({
      ...common(ctx),
      metrics: ctx.workqueueMetrics,
      unusedCondition: ctx.config.featureGates.enabled("PersistentVolumeClaimUnusedSinceTime"),
      shadow: ctx.config.shadow !== undefined, // shadow mode
    }),
  "persistentvolume-protection-controller": (ctx) =>
    new PVProtectionController({
      ...common(ctx),
      metrics: ctx.workqueueMetrics,
      shadow: ctx.config.shadow !== undefined, // shadow mode
    }),
};

/** The built-in plugins' settings from the flags (the CSI plugin is the attach/detach controller's own). */
function pluginOptions(ctx: ControllerContext): DefaultPluginsOptions {
  return {
    enableHostPathProvisioner: ctx.config.enableHostPathProvisioner,
    shadow: ctx.config.shadow !== undefined, // shadow mode
    gate: ctx.writeGate,
    pods: ctx.clients.core,
    recyclerMinimumTimeoutHostPath: ctx.config.recyclerHostPath.minimumTimeoutSeconds,
    recyclerTimeoutIncrementHostPath: ctx.config.recyclerHostPath.timeoutIncrementSeconds,
    ...(ctx.config.recyclerHostPath.podTemplate && {
      recyclerPodTemplateHostPath: ctx.config.recyclerHostPath.podTemplate,
    }),
    recyclerMinimumTimeoutNFS: ctx.config.recyclerNFS.minimumTimeoutSeconds,
    recyclerIncrementTimeoutNFS: ctx.config.recyclerNFS.timeoutIncrementSeconds,
    ...(ctx.config.recyclerNFS.podTemplate && { recyclerPodTemplateNFS: ctx.config.recyclerNFS.podTemplate }),
  };
}

function eventRecorder(ctx: ControllerContext, component: string): EventRecorder {
  return new EventRecorder({ component, core: ctx.clients.core, clock: realClock, logger: ctx.logger });
}

function common({ clients, informers, logger }: ControllerContext) {
  return { clients, informers, logger };
}

/**
 * Builds the enabled controllers; `unavailable` names those this build does not have yet. Each gets
 * the API clients `clientsFor` makes for its KCM client name: KCM gives every controller its own
 * client, so `--kube-api-qps` and `--kube-api-burst` bound each loop separately, and one loop's burst
 * of writes (the node status updater's at the start of a term) never delays another's.
 */
export function newControllers(
  enabled: ReadonlySet<ControllerName>,
  ctx: Omit<ControllerContext, "clients"> & { clientsFor: (client: string) => ApiClients },
): { controllers: Map<ControllerName, Controller>; unavailable: ControllerName[] } {
  const controllers = new Map<ControllerName, Controller>();
  const unavailable: ControllerName[] = [];
  const { clientsFor, ...shared } = ctx;
  for (const { name, client } of CONTROLLERS) {
    if (!enabled.has(name)) continue;
    const construct = CONSTRUCTORS[name];
    if (!construct) {
      unavailable.push(name);
      continue;
    }
    const logger = ctx.logger.child({ controller: name });
    controllers.set(name, construct({ ...shared, clients: clientsFor(client), logger }));
  }
  return { controllers, unavailable };
}
