import { existsSync, readFileSync } from "node:fs";
import { loadYaml, type V1Pod } from "@kubernetes/client-node";
import type { Options } from "yargs";
import { enabledControllers, type ControllerName } from "./controller-names.js";
import type { LoggingFormat } from "./runtime/logger.js";
import { formatDuration, parseDuration } from "./util/duration.js";
import { DEFAULT_FLEX_VOLUME_PLUGIN_DIR } from "./volume/flexvolume/prober.js";

/**
 * `kvc run` flags, named and defaulted as kube-controller-manager's so that a KCM command line for
 * these loops works unchanged. The groups order `--help`; docs/flags.md is generated from this table.
 */
export const RUN_FLAGS = {
  kubeconfig: {
    type: "string",
    group: "Generic:",
    describe: "Path to a kubeconfig file. Neither this nor --master: the in-cluster service account.",
  },
  master: {
    type: "string",
    group: "Generic:",
    describe: "The address of the Kubernetes API server (overrides any value in kubeconfig).",
  },
  controllers: {
    type: "string",
    group: "Generic:",
    default: "*",
    describe:
      "Controllers to enable, comma separated: '*' for all, 'foo' to enable, '-foo' to disable. " +
      "Names: persistentvolume-binder-controller (persistentvolume-binder), " +
      "persistentvolume-attach-detach-controller (attachdetach), " +
      "persistentvolumeclaim-protection-controller (pvc-protection), " +
      "persistentvolume-protection-controller (pv-protection).",
  },
  "kube-api-qps": {
    type: "number",
    group: "Generic:",
    default: 20,
    describe:
      "Queries per second to the API server (client-side token bucket); 0 means 5, negative: no limit.",
  },
  "kube-api-burst": {
    type: "number",
    group: "Generic:",
    default: 30,
    describe: "Burst of queries to the API server above --kube-api-qps.",
  },
  "leader-elect": {
    type: "boolean",
    group: "Leader election:",
    default: true,
    describe: "Elect a leader on a Lease before running the controllers (run 2+ replicas for availability).",
  },
  "leader-elect-lease-duration": {
    type: "string",
    group: "Leader election:",
    default: "15s",
    describe: "How long a non-leader waits after the last observed renewal before taking over.",
  },
  "leader-elect-renew-deadline": {
    type: "string",
    group: "Leader election:",
    default: "10s",
    describe: "How long the leader retries renewing before it gives up leadership (and exits).",
  },
  "leader-elect-retry-period": {
    type: "string",
    group: "Leader election:",
    default: "2s",
    describe: "How long clients wait between attempts to acquire or renew.",
  },
  "leader-elect-resource-lock": {
    type: "string",
    group: "Leader election:",
    default: "leases",
    choices: ["leases"],
    describe: "The lock object type; only coordination.k8s.io Leases.",
  },
  "leader-elect-resource-name": {
    type: "string",
    group: "Leader election:",
    default: "kube-volume-controller",
    describe: "The name of the Lease (never kube-controller-manager: KCM holds that one).",
  },
  "leader-elect-resource-namespace": {
    type: "string",
    group: "Leader election:",
    default: "kube-system",
    describe: "The namespace of the Lease.",
  },
  "pvclaimbinder-sync-period": {
    type: "string",
    group: "Persistent volume binder:",
    default: "15s",
    describe: "The period for syncing persistent volumes and persistent volume claims.",
  },
  "enable-dynamic-provisioning": {
    type: "boolean",
    group: "Persistent volume binder:",
    default: true,
    describe: "Enable dynamic provisioning for environments that support it.",
  },
  "enable-hostpath-provisioner": {
    type: "boolean",
    group: "Persistent volume binder:",
    default: false,
    describe: "Enable HostPath PV provisioning (single-node testing only; not for multi-node clusters).",
  },
  "pv-recycler-minimum-timeout-hostpath": {
    type: "number",
    group: "Persistent volume binder:",
    default: 60,
    describe: "The minimum ActiveDeadlineSeconds of a hostPath recycler pod (development and testing only).",
  },
  "pv-recycler-timeout-increment-hostpath": {
    type: "number",
    group: "Persistent volume binder:",
    default: 30,
    describe: "Seconds of ActiveDeadlineSeconds per Gi of a hostPath volume for its recycler pod.",
  },
  "pv-recycler-pod-template-filepath-hostpath": {
    type: "string",
    group: "Persistent volume binder:",
    default: "",
    describe: "A YAML Pod used as the hostPath recycler pod template (the volume named 'vol' is replaced).",
  },
  "pv-recycler-minimum-timeout-nfs": {
    type: "number",
    group: "Persistent volume binder:",
    default: 300,
    describe: "The minimum ActiveDeadlineSeconds of an NFS recycler pod.",
  },
  "pv-recycler-increment-timeout-nfs": {
    type: "number",
    group: "Persistent volume binder:",
    default: 30,
    describe: "Seconds of ActiveDeadlineSeconds per Gi of an NFS volume for its recycler pod.",
  },
  "pv-recycler-pod-template-filepath-nfs": {
    type: "string",
    group: "Persistent volume binder:",
    default: "",
    describe: "A YAML Pod used as the NFS recycler pod template (the volume named 'vol' is replaced).",
  },
  "attach-detach-reconcile-sync-period": {
    type: "string",
    group: "Attach/detach:",
    default: "1m0s",
    describe: "The reconciler's period for verifying that attached volumes are still attached.",
  },
  "disable-attach-detach-reconcile-sync": {
    type: "boolean",
    group: "Attach/detach:",
    default: false,
    describe: "Disable the periodic verification of attached volumes.",
  },
  "disable-force-detach-on-timeout": {
    type: "boolean",
    group: "Attach/detach:",
    default: false,
    describe:
      "Never force-detach a volume still mounted on an unhealthy node after the 6-minute maximum wait; only the node.kubernetes.io/out-of-service taint then forces a detach.",
  },
  "flex-volume-plugin-dir": {
    type: "string",
    group: "Attach/detach:",
    default: DEFAULT_FLEX_VOLUME_PLUGIN_DIR,
    describe: "Directory searched for FlexVolume drivers (<vendor~driver>/<driver>), watched at run time.",
  },
  "bind-address": {
    type: "string",
    group: "Serving:",
    default: "0.0.0.0",
    describe: "Address for /metrics, /healthz, /livez and /readyz (plain HTTP).",
  },
  "secure-port": {
    type: "number",
    group: "Serving:",
    default: 10257,
    describe:
      "Port for /metrics and the health endpoints (plain HTTP for now, despite KCM's name); 0 disables.",
  },
  v: {
    type: "number",
    group: "Logging:",
    default: 0,
    describe: "Log verbosity as klog's -v: 0-2 info, 3-4 debug, 5+ trace.",
  },
  "logging-format": {
    type: "string",
    group: "Logging:",
    default: "json",
    choices: ["json", "text"],
    describe: "json: one Kubernetes-style JSON object per line; text: human-readable (pino-pretty).",
  },
} as const satisfies Record<string, Options>;

/** Where `kvc dev`'s defaults differ from `kvc run`'s: a single-node playground on loopback. */
const DEV_DEFAULTS: Record<string, Partial<Options>> = {
  "bind-address": { default: "127.0.0.1" },
  "enable-hostpath-provisioner": { default: true },
  "flex-volume-plugin-dir": {
    default: "",
    describe: `${RUN_FLAGS["flex-volume-plugin-dir"].describe} Default: a directory inside the embedded control plane's.`,
  },
};

/** `kvc dev` takes the controller flags (the cluster and leader election are its own) and --demo. */
export const DEV_FLAGS = {
  ...(Object.fromEntries(
    Object.entries(RUN_FLAGS)
      .filter(
        ([name, flag]) => flag.group !== "Leader election:" && name !== "kubeconfig" && name !== "master",
      )
      .map(([name, flag]) => [name, { ...flag, ...DEV_DEFAULTS[name] }]),
  ) as Record<string, Options>),
  demo: {
    type: "boolean",
    default: true,
    describe:
      "Apply the demo workload (static and provisioned claims, pods needing CSI attachment, a stand-in external-attacher) and show it settle; --no-demo for an empty cluster.",
  },
} satisfies Record<string, Options>;

/** The validated `kvc run` configuration; durations in milliseconds. */
export interface RunConfig {
  kubeconfig: string | undefined;
  master: string | undefined;
  controllers: Set<ControllerName>;
  qps: number;
  burst: number;
  leaderElection:
    | {
        leaseDurationMs: number;
        renewDeadlineMs: number;
        retryPeriodMs: number;
        name: string;
        namespace: string;
      }
    | undefined;
  pvClaimBinderSyncPeriodMs: number;
  enableDynamicProvisioning: boolean;
  enableHostPathProvisioner: boolean;
  recyclerHostPath: {
    minimumTimeoutSeconds: number;
    timeoutIncrementSeconds: number;
    podTemplate: V1Pod | undefined;
  };
  recyclerNFS: {
    minimumTimeoutSeconds: number;
    timeoutIncrementSeconds: number;
    podTemplate: V1Pod | undefined;
  };
  attachDetachReconcileSyncPeriodMs: number;
  disableAttachDetachReconcileSync: boolean;
  disableForceDetachOnTimeout: boolean;
  flexVolumePluginDir: string;
  bindAddress: string;
  securePort: number;
  verbosity: number;
  loggingFormat: LoggingFormat;
}

type RunArgs = { [K in keyof typeof RUN_FLAGS]?: unknown };

/** Turns parsed flags into a RunConfig, or throws one clear sentence naming the bad flag. */
export function toRunConfig(argv: RunArgs): RunConfig {
  const duration = (flag: keyof RunArgs): number => {
    try {
      return parseDuration(String(argv[flag]));
    } catch (err) {
      throw new Error(`--${flag}: ${(err as Error).message}`, { cause: err });
    }
  };
  const number = (flag: keyof RunArgs, min: number): number => {
    const n = argv[flag];
    if (typeof n !== "number" || !Number.isFinite(n) || n < min) {
      throw new Error(`--${flag}: want a number >= ${min}, got ${String(n)}`);
    }
    return n;
  };
  const optionalString = (flag: keyof RunArgs): string | undefined =>
    typeof argv[flag] === "string" && argv[flag] !== "" ? argv[flag] : undefined;

  const kubeconfig = optionalString("kubeconfig");
  if (kubeconfig !== undefined && !existsSync(kubeconfig)) {
    throw new Error(`--kubeconfig: ${kubeconfig}: no such file`);
  }
  let controllers: Set<ControllerName>;
  try {
    controllers = enabledControllers(String(argv.controllers).split(","));
  } catch (err) {
    throw new Error(`--controllers: ${(err as Error).message}`, { cause: err });
  }
  const leaderElection = () => {
    const leaseDurationMs = duration("leader-elect-lease-duration");
    const renewDeadlineMs = duration("leader-elect-renew-deadline");
    const retryPeriodMs = duration("leader-elect-retry-period");
    if (!(leaseDurationMs > renewDeadlineMs && renewDeadlineMs > 1.2 * retryPeriodMs)) {
      throw new Error(
        "--leader-elect-lease-duration must exceed --leader-elect-renew-deadline, which must exceed " +
          `1.2 × --leader-elect-retry-period (got ${formatDuration(leaseDurationMs)}, ` +
          `${formatDuration(renewDeadlineMs)}, ${formatDuration(retryPeriodMs)})`,
      );
    }
    return {
      leaseDurationMs,
      renewDeadlineMs,
      retryPeriodMs,
      name: String(argv["leader-elect-resource-name"]),
      namespace: String(argv["leader-elect-resource-namespace"]),
    };
  };
  return {
    kubeconfig,
    master: optionalString("master"),
    controllers,
    qps: number("kube-api-qps", -Infinity),
    burst: number("kube-api-burst", 1),
    leaderElection: argv["leader-elect"] === true ? leaderElection() : undefined,
    pvClaimBinderSyncPeriodMs: duration("pvclaimbinder-sync-period"),
    enableDynamicProvisioning: argv["enable-dynamic-provisioning"] === true,
    enableHostPathProvisioner: argv["enable-hostpath-provisioner"] === true,
    recyclerHostPath: {
      minimumTimeoutSeconds: number("pv-recycler-minimum-timeout-hostpath", 0),
      timeoutIncrementSeconds: number("pv-recycler-timeout-increment-hostpath", 0),
      podTemplate: recyclerTemplate("pv-recycler-pod-template-filepath-hostpath", optionalString),
    },
    recyclerNFS: {
      minimumTimeoutSeconds: number("pv-recycler-minimum-timeout-nfs", 0),
      timeoutIncrementSeconds: number("pv-recycler-increment-timeout-nfs", 0),
      podTemplate: recyclerTemplate("pv-recycler-pod-template-filepath-nfs", optionalString),
    },
    attachDetachReconcileSyncPeriodMs: duration("attach-detach-reconcile-sync-period"),
    disableAttachDetachReconcileSync: argv["disable-attach-detach-reconcile-sync"] === true,
    disableForceDetachOnTimeout: argv["disable-force-detach-on-timeout"] === true,
    flexVolumePluginDir: String(argv["flex-volume-plugin-dir"]),
    bindAddress: String(argv["bind-address"]),
    securePort: number("secure-port", 0),
    verbosity: number("v", 0),
    loggingFormat: argv["logging-format"] === "text" ? "text" : "json",
  };
}

/** Reads a recycler pod template flag's file as KCM does (a Pod in YAML with a volume named "vol"). */
function recyclerTemplate(
  name: "pv-recycler-pod-template-filepath-hostpath" | "pv-recycler-pod-template-filepath-nfs",
  optionalString: (flag: keyof RunArgs) => string | undefined,
): V1Pod | undefined {
  const path = optionalString(name);
  if (path === undefined) return undefined;
  const flag = `--${name}`;
  let pod: V1Pod;
  try {
    pod = loadYaml<V1Pod>(readFileSync(path, "utf8"));
  } catch (err) {
    throw new Error(`${flag}: ${path}: ${(err as Error).message}`, { cause: err });
  }
  if (pod.kind !== "Pod" || !pod.spec?.volumes?.some((v) => v.name === "vol")) {
    throw new Error(`${flag}: ${path}: want a Pod with a volume named "vol"`);
  }
  return pod;
}
