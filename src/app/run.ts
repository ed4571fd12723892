import { hostname } from "node:os";
import { randomUUID } from "node:crypto";
import type { V1LeaseSpec } from "@kubernetes/client-node";
import pkg from "../../package.json" with { type: "json" };
import { collectDefaultMetrics, Gauge, Registry } from "prom-client";
import { noLoopsWarning, type ControllerName } from "./controller-names.js";
import { newControllers, type Controller } from "./controllers.js";
import { ExitError } from "./exit-error.js";
import { competingWriteInspector, CompetingWriteWarning } from "./kcm-writes-warning.js";
import type { RunConfig } from "./options.js";
import { checkServerVersion } from "./version-check.js";
import { errorMessage } from "../runtime/api-errors.js";
import { DelegatingAuthenticator } from "../runtime/auth/authentication.js";
import { DelegatingAuthorizer } from "../runtime/auth/authorization.js";
import { ApiClients, delegatedKubeConfig, loadKubeConfig } from "../runtime/client.js";
import { EventRecorder } from "../runtime/events/recorder.js";
import { InformerFactory, resources } from "../runtime/informer/index.js";
import { realClock } from "../runtime/clock.js";
import { LeaderElector } from "../runtime/leader-election.js";
import { createLogger, type Logger } from "../runtime/logger.js";
import { serve, type ServingOptions } from "../runtime/server.js";
import { servingCert } from "../runtime/serving-cert.js";
import { WorkqueueMetrics } from "../runtime/workqueue/index.js";
import { WriteGate } from "../runtime/write-gate.js";
import { ShadowMode } from "../shadow/shadow-mode.js";
import type { TestSeams } from "../persistentvolume/crash-seam.js";

/**
 * `kvc run`: serving, leader election, then the enabled controllers on shared informers. Losing the
 * lease ends it at once with an ExitError (code 1; the CLI exits without waiting for the controllers,
 * as kube-controller-manager does): a replica that may have stale state must not go on writing; its
 * pod restarts and rejoins as a candidate. Until then, and whenever its last renewal is older than the
 * renew deadline, a WriteGate under the API client refuses or holds every write, whichever
 * controller, recorder or attacher makes it, and every side effect outside the API (FlexVolume
 * attach and detach, hostPath directories) waits on the same gate. SIGINT/SIGTERM stop it gracefully: it resolves.
 * With --warm-standby (the default) the informers run from the start on every replica, so a standby
 * that wins the lease decides at once instead of first listing the cluster (issue 30).
 */
export async function run(
  config: RunConfig,
  {
    logDestination,
    seams,
  }: {
    logDestination?: NodeJS.WritableStream | undefined;
    /** Tests only (test/support/kvc-seams.ts); the CLI never passes them. */
    seams?: TestSeams | undefined;
  } = {},
): Promise<void> {
  const log = createLogger({
    verbosity: config.verbosity,
    format: config.loggingFormat,
    destination: logDestination,
  });
  if (config.ignoredFlags.length > 0) {
    log.warn({ flags: config.ignoredFlags }, "ignoring kube-controller-manager flags kvc does not implement");
  }
  for (const warning of config.featureGates.warnings) log.warn(warning);
  if (config.featureGates.withoutEffect.length > 0) {
    log.warn(
      { featureGates: config.featureGates.withoutEffect },
      "feature gates set that none of kvc's volume loops reads",
    );
  }
  const kubeConfig = loadKubeConfig(config.kubeconfig, config.master);
  const registry = new Registry();
  // The event-loop lag histogram samples every 100 ms, not prom-client's 10: its timer waking a hundred
  // times a second was a fifth of an idle controller's CPU (issue 30 goal 2); any stall of a loop
  // period (100 ms) or more is still seen.
  collectDefaultMetrics({ register: registry, eventLoopMonitoringPrecision: 100 });
  // As client-go: the identity is the hostname plus a unique suffix, so two replicas never share it.
  // It ends the User-Agent too, so the apiserver's audit log tells the replicas' requests apart.
  const identity = `${hostname()}_${randomUUID()}`;
  const userAgent = `kube-volume-controller/v${pkg.version} (${process.platform}/${process.arch}) ${identity}`;
  // Shadow mode (src/shadow): no Lease, and every write recorded instead of sent.
  const le = config.shadow ? undefined : config.leaderElection;
  const shadow =
    config.shadow &&
    new ShadowMode({
      ...config.shadow,
      clock: realClock,
      registry,
      logger: log,
      controllers: config.controllers,
    });
  const writeGate = le && new WriteGate(realClock, le.renewDeadlineMs);
  const clientOptions = {
    qps: config.qps,
    burst: config.burst,
    registry,
    requestTimeoutMs: config.requestTimeoutMs,
    ...(writeGate && { writeGate }),
    ...(shadow && { recordWrite: shadow.recordWrite }), // shadow mode
  };
  // The informers' and the process's own requests; each loop has its own (newControllers), as in KCM,
  // and its own connection pool: all of them on one HTTP/2 connection bound 1,000 pairs 30% slower.
  const clients = new ApiClients(kubeConfig, { ...clientOptions, userAgent });
  const clientsFor = (client: string) =>
    new ApiClients(kubeConfig, { ...clientOptions, userAgent: `${userAgent}/${client}` });
  // KCM's volume loops left on beside kvc's: warned of, except in shadow mode, where they are meant to run.
  const competing =
    !shadow &&
    new CompetingWriteWarning({
      logger: log.child({ logger: "competing-writers" }),
      events: new EventRecorder({
        component: "kube-volume-controller",
        core: clients.core,
        clock: realClock,
        logger: log,
      }),
      registry,
      clock: realClock,
      // The Event is a write: a standby (warm, its informers running) only counts and logs.
      mayWrite: () => !writeGate || writeGate.refusal() === undefined,
    });
  const informers = new InformerFactory({
    kubeConfig,
    apis: clients,
    beforeWatch: (signal) => clients.limiter.wait(signal),
    logger: log.child({ logger: "informers" }),
    ...(competing && {
      inspect: competingWriteInspector({ startedAtMs: Date.now(), report: competing.report }),
    }),
  });
  shadow?.observe(informers); // shadow mode
  const shutdown = new Shutdown(log);
  // Lease loss and a leader's failed controllers end run() at once, whatever else is in flight.
  const fatal = Promise.withResolvers<never>();
  fatal.promise.catch(() => {}); // raced below; after a graceful stop nothing rejects it any more
  // Beside start-up: its verdict is logged once /version answers; a refusal ends run() as fatal does.
  const versionCheck = new AbortController();
  checkServerVersion({
    request: clients.requestJson,
    log: log.child({ logger: "version-check" }),
    clock: realClock,
    signal: versionCheck.signal,
  }).catch((err: unknown) => {
    if (err instanceof ExitError) fatal.reject(err);
  });
  const manager = new ControllerManager(
    config,
    { clientsFor, informers, log, registry, writeGate, seams },
    (err) => {
      log.error({ err }, "controllers failed");
      fatal.reject(new ExitError(`controllers failed: ${errorMessage(err)}`, 1, { cause: err }));
    },
  );
  const leading =
    le &&
    writeGate &&
    newElector({
      le,
      identity,
      // KCM's leader-election client: its own, with the renew deadline as request timeout, and ungated.
      clients: new ApiClients(kubeConfig, {
        qps: config.qps,
        burst: config.burst,
        registry,
        userAgent: `${userAgent}/leader-election`,
        requestTimeoutMs: le.renewDeadlineMs,
      }),
      registry,
      log: log.child({ logger: "leader-election" }),
      writeGate,
      shutdown: shutdown.elector,
      startControllers: (signal) => {
        shutdown.controllersDone = manager.start(AbortSignal.any([signal, shutdown.controllers]));
      },
      onLost: () => {
        fatal.reject(new ExitError("leaderelection lost", 1));
      },
    });
  // Warm standby: the informers run until shutdown, whoever leads; the controllers wait for a term.
  const warmStandby = le?.warmStandby === true;
  if (warmStandby) shutdown.controllersDone = manager.startInformers(shutdown.controllers);
  let server: Awaited<ReturnType<typeof serveSecurely>> | undefined;
  try {
    if (config.securePort > 0) {
      server = await serveSecurely(config, {
        log: log.child({ logger: "secure-serving" }),
        registry,
        leading,
        manager,
        warmStandby,
        ...(shadow && { routes: { "/shadow": () => shadow.summary() } }), // shadow mode
      });
    }
    const running = leading
      ? leading.elector.run(shutdown.elector)
      : (shutdown.controllersDone = manager.start(shutdown.controllers));
    await Promise.race([running, fatal.promise]);
  } finally {
    versionCheck.abort();
    shadow?.stop(); // shadow mode
    await server?.close();
    shutdown.close();
  }
}

/**
 * SIGINT/SIGTERM: the controllers stop and finish their writes first; only then does the elector stop,
 * releasing the lease so a standby takes over at once. A Ctrl-C under `npm start` arrives twice (from
 * the terminal and forwarded by npm): a repeated signal must neither cut the graceful shutdown short
 * nor fall through to a default exit.
 */
class Shutdown {
  readonly #controllers = new AbortController();
  readonly #elector = new AbortController();
  /** What the elector waits for before it stops. */
  controllersDone: Promise<void> = Promise.resolve();
  readonly #onSignal = (signal: NodeJS.Signals) => {
    if (this.#controllers.signal.aborted) {
      this.log.info({ signal }, "already shutting down");
      return;
    }
    this.log.info({ signal }, "shutting down");
    this.#controllers.abort(new Error(`received ${signal}`));
    void this.controllersDone.finally(() => {
      this.#elector.abort(new Error(`received ${signal}`));
    });
  };

  constructor(private readonly log: Logger) {
    for (const signal of SIGNALS) process.on(signal, this.#onSignal);
  }

  get controllers(): AbortSignal {
    return this.#controllers.signal;
  }

  get elector(): AbortSignal {
    return this.#elector.signal;
  }

  close(): void {
    for (const signal of SIGNALS) process.off(signal, this.#onSignal);
  }
}

const SIGNALS = ["SIGINT", "SIGTERM"] as const;

/**
 * The enabled controllers, built before anything starts (their constructors register informers and
 * handlers), then run on the shared informers once their caches have synced. The informers start
 * with the controllers (as KCM's, when it wins the lease), or before, at process start (warm
 * standby): then the handlers only fill caches, the desired state of world and the queues until the
 * term begins (none of them writes), and each controller's start-up work (the binder's cache
 * initialization, the attach/detach controller's states of world from the informers) reads the
 * caches as they are at that moment.
 */
class ControllerManager {
  readonly #controllers: Map<ControllerName, Controller>;
  readonly #log: Logger;
  #synced = false;
  /** The informers' run, once started; resolves when they have stopped. */
  #informers: Promise<void> | undefined;

  constructor(
    private readonly config: RunConfig,
    private readonly deps: {
      clientsFor: (client: string) => ApiClients;
      informers: InformerFactory;
      log: Logger;
      registry: Registry;
      writeGate: WriteGate | undefined;
      seams: TestSeams | undefined;
    },
    private readonly onFailed: (err: unknown) => void,
  ) {
    this.#log = deps.log;
    const { controllers, unavailable } = newControllers(config.controllers, {
      config,
      clientsFor: deps.clientsFor,
      informers: deps.informers,
      logger: deps.log,
      registry: deps.registry,
      workqueueMetrics: new WorkqueueMetrics(deps.registry),
      writeGate: deps.writeGate,
      seams: deps.seams,
    });
    for (const name of unavailable) {
      this.#log.warn({ controller: name }, "controller is not part of this build yet; not started");
    }
    const idle = noLoopsWarning(config.controllers);
    if (idle) this.#log.warn({}, idle);
    this.#controllers = controllers;
  }

  /** Informers synced (readyz). */
  get synced(): boolean {
    return this.#synced;
  }

  /**
   * Runs the informers, without the controllers, until `signal` aborts (warm standby); resolves
   * when they have stopped. A failure is reported to onFailed, as start()'s.
   */
  startInformers(signal: AbortSignal): Promise<void> {
    return this.#reportFailure(this.#runInformers(signal), signal);
  }

  /**
   * Runs the controllers until `signal` aborts, and the informers if they are not running yet. A
   * failure before that is reported to onFailed (the process must not go on half-working); the
   * returned promise then resolves.
   */
  start(signal: AbortSignal): Promise<void> {
    return this.#reportFailure(this.#run(signal), signal);
  }

  #reportFailure(running: Promise<void>, signal: AbortSignal): Promise<void> {
    return running.catch((err: unknown) => {
      if (!signal.aborted) this.onFailed(err);
    });
  }

  async #runInformers(signal: AbortSignal): Promise<void> {
    const { informers } = this.deps;
    const done = (this.#informers = informers.start(signal));
    await informers.waitForCacheSync(signal);
    this.#synced = true;
    this.#log.info({}, "informers synced");
    await done;
  }

  async #run(signal: AbortSignal): Promise<void> {
    const informers = this.#informers ?? this.#runInformers(signal);
    await this.deps.informers.waitForCacheSync(signal);
    await Promise.all([
      informers,
      ...[...this.#controllers].map(([name, c]) => {
        this.#log.info({ controller: name }, "starting controller");
        return c.run(signal);
      }),
    ]);
  }
}

/** --secure-port: /metrics and the health checks, leader election's among them when it is on. */
async function serveSecurely(
  config: RunConfig,
  o: {
    log: Logger;
    registry: Registry;
    leading: ReturnType<typeof newElector> | undefined;
    manager: ControllerManager;
    warmStandby: boolean;
    routes?: ServingOptions["routes"];
  },
) {
  const { log, leading, manager } = o;
  const elector = leading?.elector;
  const server = await serve({
    bindAddress: config.bindAddress,
    port: config.securePort,
    ...(await secureServing(config, log, o.registry)),
    logger: log,
    registry: o.registry,
    ...(o.routes && { routes: o.routes }),
    healthz: [
      { name: "ping", check: () => {} },
      ...(elector
        ? [
            {
              name: "leaderElection",
              check: () => {
                const err = elector.check();
                if (err) throw err;
              },
            },
          ]
        : []),
    ],
    readyz: [
      ...(elector
        ? [
            {
              name: "leader-election-lease",
              // A replica that cannot read or write its Lease (RBAC, namespace) never leads: say why.
              showReason: true,
              check: () => {
                const err = leading.leaseError();
                if (err) throw err;
              },
            },
          ]
        : []),
      {
        name: "informer-sync",
        // Ready to take over once synced. A cold standby (--warm-standby=false) is ready at once: its
        // informers start with its term, and a rolling update of a 2-replica Deployment would wait
        // forever on it.
        check: () => {
          if (elector && !elector.isLeader() && !o.warmStandby) return;
          if (!manager.synced) throw new Error("informers not synced");
        },
      },
    ],
  });
  log.info(
    { address: `${config.bindAddress}:${server.port}` },
    "serving /metrics, /healthz, /livez, /readyz over HTTPS",
  );
  return server;
}

/**
 * The certificate and the delegated authenticator and authorizer of --secure-port, as KCM builds
 * them from its SecureServing, Authentication and Authorization options. Their clients allow 200
 * queries per second (burst 400) as upstream's, apart from the controllers' limit, and are not fenced:
 * reviews are not writes to the cluster. Their requests count in the rest_client metrics, as in KCM.
 */
async function secureServing(config: RunConfig, log: Logger, registry: Registry) {
  const cert = await servingCert({
    bindAddress: config.bindAddress,
    certDir: config.certDir,
    certFile: config.tlsCertFile,
    keyFile: config.tlsPrivateKeyFile,
  });
  log.info({ certificate: cert.source }, "serving certificate");
  const delegated = (file: string | undefined, what: string, whenMissing: string) => {
    const kc = delegatedKubeConfig(file, (message) => {
      log.warn({ err: message }, `delegated ${what}`);
    });
    if (!kc) {
      log.warn(`No ${what}-kubeconfig provided, so ${whenMissing}`);
      return undefined;
    }
    // Upstream's Delegating{Authentication,Authorization}Options.ClientTimeout: 10 s.
    return new ApiClients(kc, { qps: 200, burst: 400, requestTimeoutMs: 10_000, registry });
  };
  const authn = delegated(
    config.authentication.kubeconfig,
    "authentication",
    "all requests are considered to be anonymous",
  );
  const authz = delegated(
    config.authorization.kubeconfig,
    "authorization",
    "SubjectAccessReview of authorization tokens won't work",
  );
  return {
    cert,
    minVersion: config.tlsMinVersion,
    authenticator: new DelegatingAuthenticator(authn?.authentication, {
      cacheTtlMs: config.authentication.cacheTtlMs,
    }),
    authorizer: new DelegatingAuthorizer(authz?.authorization, config.authorization),
  };
}

/**
 * Leader election on a Lease, as KCM's: leading starts the controllers; losing the lease (not
 * releasing it at shutdown) calls onLost. `leaseError` is why the Lease cannot be read or written, if
 * it cannot (readyz says it).
 */
function newElector(o: {
  le: NonNullable<RunConfig["leaderElection"]>;
  identity: string;
  clients: ApiClients;
  registry: Registry;
  log: Logger;
  writeGate: WriteGate;
  shutdown: AbortSignal;
  startControllers: (signal: AbortSignal) => void;
  onLost: () => void;
}): { elector: LeaderElector; leaseError: () => Error | undefined } {
  const { le, identity, log } = o;
  const status = new Gauge({
    name: "leader_election_master_status",
    help: "Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, 1 indicates master.",
    labelNames: ["name"] as const,
    registers: [o.registry],
  });
  status.set({ name: le.name }, 0);
  const lease = { name: le.name, namespace: le.namespace };
  let leaseError: Error | undefined;
  const elector = new LeaderElector({
    lock: { ...lease, identity },
    coordination: o.clients.coordination,
    leaseDurationMs: le.leaseDurationMs,
    renewDeadlineMs: le.renewDeadlineMs,
    retryPeriodMs: le.retryPeriodMs,
    releaseOnCancel: true,
    logger: log,
    watchLease: (onChange) => watchLease(o.clients, log, lease, onChange),
    onStartedLeading: (signal) => {
      log.info({ identity, lease }, "started leading");
      o.writeGate.lead(signal);
      o.startControllers(signal);
    },
    onRenewed: (sentAt) => {
      o.writeGate.renewed(sentAt);
    },
    onLeaseError: (err) => (leaseError = err),
    onStoppedLeading: () => {
      if (o.shutdown.aborted) {
        log.info({ identity, lease }, "stopped leading");
        return;
      }
      log.error({ identity, lease }, "leaderelection lost");
      o.onLost();
    },
    onNewLeader: (holder) => {
      if (holder !== identity) log.info({ holder, lease }, "new leader elected");
    },
    onLeaderStatus: (leading) => {
      status.set({ name: le.name }, leading ? 1 : 0);
    },
  });
  return { elector, leaseError: () => leaseError };
}

/**
 * An informer on the one Lease (field selector on its name, which RBAC's resourceNames can allow), on
 * the election's own client, running until the returned function is called. Its watch shows a
 * candidate the lease's release the moment it happens.
 */
function watchLease(
  clients: ApiClients,
  log: Logger,
  lease: { name: string; namespace: string },
  onChange: (spec: V1LeaseSpec | undefined) => void,
): () => void {
  const informer = new InformerFactory({
    kubeConfig: clients.kubeConfig,
    apis: clients,
    logger: log,
  }).informerFor(resources.leases, {
    namespace: lease.namespace,
    fieldSelector: `metadata.name=${lease.name}`,
  });
  const registration = informer.addEventHandler({
    onAdd: (l) => {
      onChange(l.spec);
    },
    onUpdate: (_, l) => {
      onChange(l.spec);
    },
    onDelete: () => {
      onChange(undefined);
    },
  });
  const stop = new AbortController();
  void informer.run(stop.signal);
  return () => {
    registration.remove(); // at once: nothing is delivered after
    stop.abort();
  };
}
