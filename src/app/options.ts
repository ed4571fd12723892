import { existsSync, readFileSync } from "node:fs";
import { loadYaml, type V1Pod } from "@kubernetes/client-node";
import type { SecureVersion } from "node:tls";
import type { Options } from "yargs";
import { enabledControllers, type ControllerName } from "./controller-names.js";
import { alwaysAllowPaths } from "../runtime/auth/authorization.js";
import type { LoggingFormat } from "../runtime/logger.js";
import { parseFeatureGates, type FeatureGates } from "./feature-gates.js";
import { duration, float, int, list } from "./flag-types.js";
import { formatDuration } from "../util/duration.js";
import { DEFAULT_FLEX_VOLUME_PLUGIN_DIR } from "../volume/flexvolume/prober.js";

/** --tls-min-version's values (Go's crypto/tls names, as KCM takes them) in Node's terms. */
const TLS_VERSIONS = {
  VersionTLS10: "TLSv1",
  VersionTLS11: "TLSv1.1",
  VersionTLS12: "TLSv1.2",
  VersionTLS13: "TLSv1.3",
} as const satisfies Record<string, SecureVersion>;

/**
 * `kvc run` flags, named, typed and defaulted as kube-controller-manager's; values are parsed where
 * they are declared (`coerce`). KCM's other flags are accepted and ignored (kcm-command-line.ts). The
 * groups order `--help`; docs/flags.md is generated from this table.
 */
export const RUN_FLAGS = {
  kubeconfig: {
    type: "string",
    coerce: existingFile,
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
    coerce: list(enabledControllers),
    group: "Generic:",
    default: "*",
    describe:
      "Controllers to enable, comma separated: '*' for all, 'foo' to enable, '-foo' to disable. " +
      "Names: persistentvolume-binder-controller (persistentvolume-binder), " +
      "persistentvolume-attach-detach-controller (attachdetach), " +
      "persistentvolumeclaim-protection-controller (pvc-protection), " +
      "persistentvolume-protection-controller (pv-protection). KCM's other controller names are accepted and left to KCM.",
  },
  "kube-api-qps": {
    coerce: float(),
    group: "Generic:",
    default: 20,
    describe:
      "Queries per second to the API server (client-side token bucket); 0 means 5, negative: no limit. As in KCM, each loop, and the shared informers, has its own client and bucket.",
  },
  "kube-api-burst": {
    coerce: int(1),
    group: "Generic:",
    default: 30,
    describe: "Burst of queries to the API server above --kube-api-qps.",
  },
  "kube-api-request-timeout": {
    type: "string",
    coerce: duration,
    group: "Generic:",
    default: "1m0s",
    describe:
      "Not in KCM (whose client has no timeout): every API request but a watch is abandoned and retried " +
      "after this long, the kube-apiserver's own --request-timeout default; 0 for none. Lease " +
      "requests use --leader-elect-renew-deadline, as KCM's.",
  },
  "feature-gates": {
    type: "string",
    coerce: list(parseFeatureGates, "colonSeparatedMultimapStringString"),
    group: "Generic:",
    default: "",
    describe:
      "Comma-separated [kube:]key=value pairs for feature gates, as KCM's (refused as KCM refuses them: unknown, " +
      "locked, not a bool). The volume loops read PersistentVolumeClaimUnusedSinceTime (BETA - default=true); " +
      "the others change nothing here and are named in a warning.",
  },
  // Shadow mode (issue 15, src/shadow/).
  shadow: {
    type: "boolean",
    group: "Shadow mode:",
    default: false,
    describe:
      "Not in KCM: run beside KCM writing nothing. Every API write is recorded instead of sent and " +
      "compared with what KCM did (kvc_shadow_decisions_total, GET /shadow, `kvc shadow report`); no " +
      "Lease is taken, --leader-elect is ignored. Needs only get/list/watch (manifests/shadow/).",
  },
  "shadow-grace-period": {
    type: "string",
    coerce: duration,
    group: "Shadow mode:",
    default: "1m0s",
    describe:
      "Not in KCM: how long a decision of kvc or of KCM waits for the other's before it counts as " +
      "kvc-only or upstream-only.",
  },
  "leader-elect": {
    type: "boolean",
    group: "Leader election:",
    default: true,
    describe: "Elect a leader on a Lease before running the controllers (run 2+ replicas for availability).",
  },
  "leader-elect-lease-duration": {
    type: "string",
    coerce: duration,
    group: "Leader election:",
    default: "15s",
    describe: "How long a non-leader waits after the last observed renewal before taking over.",
  },
  "leader-elect-renew-deadline": {
    type: "string",
    coerce: duration,
    group: "Leader election:",
    default: "10s",
    describe: "How long the leader retries renewing before it gives up leadership (and exits).",
  },
  "leader-elect-retry-period": {
    type: "string",
    coerce: duration,
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
    describe: "The name of the Lease; kube-controller-manager (KCM's own) is refused.",
  },
  "leader-elect-resource-namespace": {
    type: "string",
    group: "Leader election:",
    default: "kube-system",
    describe: "The namespace of the Lease.",
  },
  "warm-standby": {
    type: "boolean",
    group: "Leader election:",
    default: true,
    describe:
      "Not in KCM (whose informers start when it wins the lease): a replica's informers list and watch " +
      "from its start, so a standby takes over with synced caches; its controllers still start only " +
      "with its term, and it writes nothing before. False: as KCM. See docs/operations.md.",
  },
  "pvclaimbinder-sync-period": {
    type: "string",
    coerce: duration,
    group: "Persistent volume binder:",
    default: "15s",
    describe: "The period for syncing persistent volumes and persistent volume claims.",
  },
  "concurrent-pvclaimbinder-syncs": {
    coerce: int(1),
    group: "Persistent volume binder:",
    default: 8,
    describe:
      "Not in KCM (whose binder has one claim worker and one volume worker): how many claims, and how " +
      "many volumes, the binder syncs at once (1: as KCM; shadow mode always 1). Concurrent claim syncs " +
      "never choose one volume for two claims: the choice and its reservation are one step " +
      "(docs/pv-binder.md).",
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
    coerce: int(0),
    group: "Persistent volume binder:",
    default: 60,
    describe: "The minimum ActiveDeadlineSeconds of a hostPath recycler pod (development and testing only).",
  },
  "pv-recycler-timeout-increment-hostpath": {
    coerce: int(0),
    group: "Persistent volume binder:",
    default: 30,
    describe: "Seconds of ActiveDeadlineSeconds per Gi of a hostPath volume for its recycler pod.",
  },
  "pv-recycler-pod-template-filepath-hostpath": {
    type: "string",
    coerce: recyclerPodTemplate,
    group: "Persistent volume binder:",
    default: "",
    describe: "A YAML Pod used as the hostPath recycler pod template (the volume named 'vol' is replaced).",
  },
  "pv-recycler-minimum-timeout-nfs": {
    coerce: int(0),
    group: "Persistent volume binder:",
    default: 300,
    describe: "The minimum ActiveDeadlineSeconds of an NFS recycler pod.",
  },
  "pv-recycler-increment-timeout-nfs": {
    coerce: int(0),
    group: "Persistent volume binder:",
    default: 30,
    describe: "Seconds of ActiveDeadlineSeconds per Gi of an NFS volume for its recycler pod.",
  },
  "pv-recycler-pod-template-filepath-nfs": {
    type: "string",
    coerce: recyclerPodTemplate,
    group: "Persistent volume binder:",
    default: "",
    describe: "A YAML Pod used as the NFS recycler pod template (the volume named 'vol' is replaced).",
  },
  "attach-detach-reconcile-sync-period": {
    type: "string",
    coerce: duration,
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
    group: "Secure serving:",
    default: "0.0.0.0",
    describe:
      "The IP address on which to listen for the --secure-port port. If blank or an unspecified address (0.0.0.0 or ::), all interfaces.",
  },
  "secure-port": {
    coerce: int(0),
    group: "Secure serving:",
    default: 10257,
    describe:
      "The port on which to serve HTTPS with authentication and authorization (/metrics, /healthz, /livez, /readyz). If 0, don't serve HTTPS at all.",
  },
  "cert-dir": {
    type: "string",
    group: "Secure serving:",
    default: "",
    describe:
      "The directory where the TLS certs are located (kube-volume-controller.crt/.key; a self-signed pair is written there when missing). " +
      "If --tls-cert-file and --tls-private-key-file are provided, this flag will be ignored. Empty: a self-signed certificate in memory.",
  },
  "tls-cert-file": {
    type: "string",
    group: "Secure serving:",
    default: "",
    describe:
      "File containing the default x509 Certificate for HTTPS (CA cert, if any, concatenated after server cert).",
  },
  "tls-private-key-file": {
    type: "string",
    group: "Secure serving:",
    default: "",
    describe: "File containing the default x509 private key matching --tls-cert-file.",
  },
  "tls-min-version": {
    type: "string",
    coerce: tlsVersion,
    group: "Secure serving:",
    default: "",
    describe: `Minimum TLS version supported. Possible values: ${Object.keys(TLS_VERSIONS).join(", ")}. Empty: VersionTLS12.`,
  },
  "authentication-kubeconfig": {
    type: "string",
    coerce: existingFile,
    group: "Authentication:",
    default: "",
    describe:
      "kubeconfig file pointing at the 'core' kubernetes server with enough rights to create tokenreviews.authentication.k8s.io. " +
      "This is optional. If empty, the in-cluster service account; outside a cluster all token requests are considered to be anonymous.",
  },
  "authentication-token-webhook-cache-ttl": {
    type: "string",
    coerce: duration,
    group: "Authentication:",
    default: "10s",
    describe: "The duration to cache responses from the webhook token authenticator.",
  },
  "authorization-kubeconfig": {
    type: "string",
    coerce: existingFile,
    group: "Authorization:",
    default: "",
    describe:
      "kubeconfig file pointing at the 'core' kubernetes server with enough rights to create subjectaccessreviews.authorization.k8s.io. " +
      "This is optional. If empty, the in-cluster service account; outside a cluster all requests not skipped by authorization are forbidden.",
  },
  "authorization-always-allow-paths": {
    type: "string",
    coerce: list((paths) => {
      alwaysAllowPaths(paths); // checked as the path authorizer will use them
      return paths;
    }),
    group: "Authorization:",
    default: "/healthz,/readyz,/livez",
    describe:
      "A list of HTTP paths to skip during authorization, i.e. these are authorized without contacting the 'core' kubernetes server.",
  },
  "authorization-webhook-cache-authorized-ttl": {
    type: "string",
    coerce: duration,
    group: "Authorization:",
    default: "10s",
    describe: "The duration to cache 'authorized' responses from the webhook authorizer.",
  },
  "authorization-webhook-cache-unauthorized-ttl": {
    type: "string",
    coerce: duration,
    group: "Authorization:",
    default: "10s",
    describe: "The duration to cache 'unauthorized' responses from the webhook authorizer.",
  },
  v: {
    coerce: int(0),
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

/** The Lease kube-controller-manager elects its leader on (kube-system/kube-controller-manager). */
const KCM_LEASE = "kube-controller-manager";

/** The validated `kvc run` configuration; durations in milliseconds. */
export interface RunConfig {
  /** KCM flags on the command line that kvc does not implement (logged once as ignored). */
  ignoredFlags: string[];
  kubeconfig: string | undefined;
  master: string | undefined;
  controllers: Set<ControllerName>;
  qps: number;
  burst: number;
  /** 0: none. */
  requestTimeoutMs: number;
  leaderElection:
    | {
        leaseDurationMs: number;
        renewDeadlineMs: number;
        retryPeriodMs: number;
        name: string;
        namespace: string;
        /** --warm-standby: the informers run from the start, not from the term's. */
        warmStandby: boolean;
      }
    | undefined;
  pvClaimBinderSyncPeriodMs: number;
  /** --concurrent-pvclaimbinder-syncs. */
  concurrentPvClaimBinderSyncs: number;
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
  certDir: string;
  tlsCertFile: string;
  tlsPrivateKeyFile: string;
  tlsMinVersion: SecureVersion | undefined;
  authentication: { kubeconfig: string | undefined; cacheTtlMs: number };
  authorization: {
    kubeconfig: string | undefined;
    alwaysAllowPaths: string[];
    allowCacheTtlMs: number;
    denyCacheTtlMs: number;
  };
  featureGates: FeatureGates;
  verbosity: number;
  loggingFormat: LoggingFormat;
  /** `--shadow`: writes recorded and compared, never sent (src/shadow/). */
  shadow: { graceMs: number } | undefined;
}

export type RunArgs = { [K in keyof typeof RUN_FLAGS]?: unknown };

/**
 * Turns flags parsed and coerced by their declarations (`withFlagNames(RUN_FLAGS)`) into a RunConfig,
 * or throws one clear sentence naming the bad flag (the checks across flags).
 */
export function toRunConfig(argv: RunArgs, ignoredFlags: string[] = []): RunConfig {
  const number = (flag: keyof RunArgs): number => argv[flag] as number;
  const string = (flag: keyof RunArgs): string => (typeof argv[flag] === "string" ? argv[flag] : "");
  const optionalString = (flag: keyof RunArgs): string | undefined =>
    typeof argv[flag] === "string" && argv[flag] !== "" ? argv[flag] : undefined;
  const podTemplate = (flag: keyof RunArgs) => argv[flag] as V1Pod | undefined;
  const leaderElection = () => {
    const leaseDurationMs = number("leader-elect-lease-duration");
    const renewDeadlineMs = number("leader-elect-renew-deadline");
    const retryPeriodMs = number("leader-elect-retry-period");
    if (!(leaseDurationMs > renewDeadlineMs && renewDeadlineMs > 1.2 * retryPeriodMs)) {
      throw new Error(
        "--leader-elect-lease-duration must exceed --leader-elect-renew-deadline, which must exceed " +
          `1.2 × --leader-elect-retry-period (got ${formatDuration(leaseDurationMs)}, ` +
          `${formatDuration(renewDeadlineMs)}, ${formatDuration(retryPeriodMs)})`,
      );
    }
    const name = String(argv["leader-elect-resource-name"]);
    // In kube-system it is KCM's Lease: kvc would lead in KCM's place or never; in another namespace
    // it still reads as KCM's to every operator (docs/operations.md). Never, as the flag's help says.
    if (name === KCM_LEASE) {
      throw new Error(
        `--leader-elect-resource-name: "${KCM_LEASE}" is kube-controller-manager's own Lease; ` +
          `kvc needs its own (default "kube-volume-controller")`,
      );
    }
    return {
      leaseDurationMs,
      renewDeadlineMs,
      retryPeriodMs,
      name,
      namespace: String(argv["leader-elect-resource-namespace"]),
      warmStandby: argv["warm-standby"] === true,
    };
  };
  return {
    ignoredFlags,
    kubeconfig: optionalString("kubeconfig"),
    master: optionalString("master"),
    controllers: argv.controllers as Set<ControllerName>,
    qps: number("kube-api-qps"),
    burst: number("kube-api-burst"),
    requestTimeoutMs: number("kube-api-request-timeout"),
    leaderElection: argv["leader-elect"] === true ? leaderElection() : undefined,
    shadow: argv.shadow === true ? { graceMs: number("shadow-grace-period") } : undefined,
    pvClaimBinderSyncPeriodMs: number("pvclaimbinder-sync-period"),
    concurrentPvClaimBinderSyncs: number("concurrent-pvclaimbinder-syncs"),
    enableDynamicProvisioning: argv["enable-dynamic-provisioning"] === true,
    enableHostPathProvisioner: argv["enable-hostpath-provisioner"] === true,
    recyclerHostPath: {
      minimumTimeoutSeconds: number("pv-recycler-minimum-timeout-hostpath"),
      timeoutIncrementSeconds: number("pv-recycler-timeout-increment-hostpath"),
      podTemplate: podTemplate("pv-recycler-pod-template-filepath-hostpath"),
    },
    recyclerNFS: {
      minimumTimeoutSeconds: number("pv-recycler-minimum-timeout-nfs"),
      timeoutIncrementSeconds: number("pv-recycler-increment-timeout-nfs"),
      podTemplate: podTemplate("pv-recycler-pod-template-filepath-nfs"),
    },
    attachDetachReconcileSyncPeriodMs: number("attach-detach-reconcile-sync-period"),
    disableAttachDetachReconcileSync: argv["disable-attach-detach-reconcile-sync"] === true,
    disableForceDetachOnTimeout: argv["disable-force-detach-on-timeout"] === true,
    flexVolumePluginDir: String(argv["flex-volume-plugin-dir"]),
    bindAddress: String(argv["bind-address"]),
    securePort: number("secure-port"),
    certDir: string("cert-dir"),
    tlsCertFile: string("tls-cert-file"),
    tlsPrivateKeyFile: string("tls-private-key-file"),
    tlsMinVersion: argv["tls-min-version"] as SecureVersion | undefined,
    authentication: {
      kubeconfig: optionalString("authentication-kubeconfig"),
      cacheTtlMs: number("authentication-token-webhook-cache-ttl"),
    },
    authorization: {
      kubeconfig: optionalString("authorization-kubeconfig"),
      alwaysAllowPaths: argv["authorization-always-allow-paths"] as string[],
      allowCacheTtlMs: number("authorization-webhook-cache-authorized-ttl"),
      denyCacheTtlMs: number("authorization-webhook-cache-unauthorized-ttl"),
    },
    featureGates: argv["feature-gates"] as FeatureGates,
    verbosity: number("v"),
    loggingFormat: argv["logging-format"] === "text" ? "text" : "json",
  };
}

/** A file flag: empty (not set), or a path that exists. */
function existingFile(v: unknown): string {
  const path = String(v);
  if (path !== "" && !existsSync(path)) throw new Error(`${path}: no such file`);
  return path;
}

/** --tls-min-version: Go's crypto/tls name of a version, as Node's; empty: Node's default. */
function tlsVersion(v: unknown): SecureVersion | undefined {
  const value = String(v);
  if (value === "") return undefined;
  if (!Object.hasOwn(TLS_VERSIONS, value)) {
    throw new Error(`unknown tls version "${value}"; want one of ${Object.keys(TLS_VERSIONS).join(", ")}`);
  }
  return TLS_VERSIONS[value as keyof typeof TLS_VERSIONS];
}

/** A recycler pod template flag's file, read as KCM does (a Pod in YAML with a volume named "vol"). */
function recyclerPodTemplate(v: unknown): V1Pod | undefined {
  const path = String(v);
  if (path === "") return undefined;
  let pod: V1Pod;
  try {
    pod = loadYaml<V1Pod>(readFileSync(path, "utf8"));
  } catch (err) {
    throw new Error(`${path}: ${(err as Error).message}`, { cause: err });
  }
  if (pod.kind !== "Pod" || !pod.spec?.volumes?.some((vol) => vol.name === "vol")) {
    throw new Error(`${path}: want a Pod with a volume named "vol"`);
  }
  return pod;
}
