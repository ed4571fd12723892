import { hostname } from "node:os";
import { randomUUID } from "node:crypto";
import pkg from "../package.json" with { type: "json" };
import { collectDefaultMetrics, Gauge, Registry } from "prom-client";
import { newControllers } from "./controllers.js";
import type { RunConfig } from "./options.js";
import { DelegatingAuthenticator } from "./runtime/auth/authentication.js";
import { DelegatingAuthorizer } from "./runtime/auth/authorization.js";
import { ApiClients, delegatedKubeConfig, loadKubeConfig } from "./runtime/client.js";
import { InformerFactory } from "./runtime/informer/index.js";
import { realClock } from "./runtime/clock.js";
import { LeaderElector } from "./runtime/leader-election.js";
import { createLogger, type Logger } from "./runtime/logger.js";
import { serve } from "./runtime/server.js";
import { servingCert } from "./runtime/serving-cert.js";
import { WorkqueueMetrics } from "./runtime/workqueue/index.js";
import { WriteGate } from "./runtime/write-gate.js";
import { ShadowMode } from "./shadow/shadow-mode.js";

/**
 * `kvc run`: serving, leader election, then the enabled controllers on shared informers. Losing the
 * lease exits the process with code 1 at once (as kube-controller-manager does): a replica that may
 * have stale state must not go on writing; its pod restarts and rejoins as a candidate. Until then,
 * and whenever its last renewal is older than the renew deadline, a WriteGate under the API client
 * refuses or holds every write, whichever controller, recorder or attacher makes it.
 */
export async function run(
  config: RunConfig,
  { logDestination }: { logDestination?: NodeJS.WritableStream | undefined } = {},
): Promise<void> {
  const log = createLogger({
    verbosity: config.verbosity,
    format: config.loggingFormat,
    destination: logDestination,
  });
  if (config.ignoredFlags.length > 0) {
    log.warn({ flags: config.ignoredFlags }, "ignoring kube-controller-manager flags kvc does not implement");
  }
  const kubeConfig = loadKubeConfig(config.kubeconfig, config.master);
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
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
  // As client-go: the identity is the hostname plus a unique suffix, so two replicas never share it.
  // It ends the User-Agent too, so the apiserver's audit log tells the replicas' requests apart.
  const identity = `${hostname()}_${randomUUID()}`;
  const userAgent = `kube-volume-controller/v${pkg.version} (${process.platform}/${process.arch}) ${identity}`;
  const writeGate = le && new WriteGate(realClock, le.renewDeadlineMs);
  const clients = new ApiClients(kubeConfig, {
    qps: config.qps,
    burst: config.burst,
    registry,
    userAgent,
    requestTimeoutMs: config.requestTimeoutMs,
    ...(writeGate && { writeGate }),
    ...(shadow && { recordWrite: shadow.recordWrite }), // shadow mode
  });
  const informers = new InformerFactory({
    kubeConfig,
    apis: clients,
    beforeWatch: () => clients.limiter.wait(),
    logger: log,
  });
  shadow?.observe(informers); // shadow mode

  // Shutdown order matters: controllers stop and finish their writes first; only then does the
  // elector stop, releasing the lease so a standby takes over at once.
  const stopControllers = new AbortController();
  const stopElector = new AbortController();
  let controllersDone: Promise<void> = Promise.resolve();
  // A Ctrl-C under `npm start` arrives twice (from the terminal and forwarded by npm): a repeated
  // signal must neither cut the graceful shutdown short nor fall through to a default exit.
  const onSignal = (signal: NodeJS.Signals) => {
    if (stopControllers.signal.aborted) {
      log.info({ signal }, "already shutting down");
      return;
    }
    log.info({ signal }, "shutting down");
    stopControllers.abort(new Error(`received ${signal}`));
    void controllersDone.finally(() => {
      stopElector.abort(new Error(`received ${signal}`));
    });
  };
  const signals = ["SIGINT", "SIGTERM"] as const;
  for (const signal of signals) process.on(signal, onSignal);

  let synced = false;
  let leaseError: Error | undefined;
  const elector =
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
      log,
      writeGate,
      shutdown: stopElector.signal,
      onLeaseError: (err) => (leaseError = err),
      startControllers: (signal) => {
        controllersDone = runControllers(AbortSignal.any([signal, stopControllers.signal])).catch(
          (err: unknown) => {
            if (signal.aborted || stopControllers.signal.aborted) return;
            log.error({ err }, "controllers failed");
            process.exit(1);
          },
        );
      },
    });
  const server =
    config.securePort > 0
      ? await serve({
          bindAddress: config.bindAddress,
          port: config.securePort,
          ...(await secureServing(config, log)),
          logger: log,
          registry,
          ...(shadow && { routes: { "/shadow": () => shadow.summary() } }), // shadow mode
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
                      if (leaseError) throw leaseError;
                    },
                  },
                ]
              : []),
            {
              name: "informer-sync",
              // A standby is ready (to take over); only a leader waits for its informers, or a rolling
              // update of a 2-replica Deployment would wait forever on the standby.
              check: () => {
                if (elector && !elector.isLeader()) return;
                if (!synced) throw new Error("informers not synced");
              },
            },
          ],
        })
      : undefined;
  if (server)
    log.info(
      { address: `${config.bindAddress}:${server.port}` },
      "serving /metrics, /healthz, /livez, /readyz over HTTPS",
    );

  const { controllers, unavailable } = newControllers(config.controllers, {
    config,
    clients,
    informers,
    logger: log,
    registry,
    workqueueMetrics: new WorkqueueMetrics(registry),
  });
  for (const name of unavailable) {
    log.warn({ controller: name }, "controller is not part of this build yet; not started");
  }

  async function runControllers(signal: AbortSignal): Promise<void> {
    const done = informers.start(signal);
    await informers.waitForCacheSync(signal);
    synced = true;
    await Promise.all([
      done,
      ...[...controllers].map(([name, c]) => {
        log.info({ controller: name }, "starting controller");
        return c.run(signal);
      }),
    ]);
  }

  try {
    if (elector) await elector.run(stopElector.signal);
    else {
      controllersDone = runControllers(stopControllers.signal).catch((err: unknown) => {
        if (!stopControllers.signal.aborted) throw err;
      });
      await controllersDone;
    }
  } finally {
    shadow?.stop(); // shadow mode
    await server?.close();
    for (const signal of signals) process.off(signal, onSignal);
  }
}

/**
 * The certificate and the delegated authenticator and authorizer of --secure-port, as KCM builds
 * them from its SecureServing, Authentication and Authorization options. Their clients allow 200
 * queries per second (burst 400) as upstream's, apart from the controllers' limit, and are not fenced:
 * reviews are not writes to the cluster.
 */
async function secureServing(config: RunConfig, log: Logger) {
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
    return new ApiClients(kc, { qps: 200, burst: 400, requestTimeoutMs: 10_000 });
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

function newElector(o: {
  le: NonNullable<RunConfig["leaderElection"]>;
  identity: string;
  clients: ApiClients;
  registry: Registry;
  log: Logger;
  writeGate: WriteGate;
  shutdown: AbortSignal;
  onLeaseError: (err: Error | undefined) => void;
  startControllers: (signal: AbortSignal) => void;
}): LeaderElector {
  const { le, identity, log } = o;
  const status = new Gauge({
    name: "leader_election_master_status",
    help: "Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, 1 indicates master.",
    labelNames: ["name"] as const,
    registers: [o.registry],
  });
  status.set({ name: le.name }, 0);
  const lease = { name: le.name, namespace: le.namespace };
  return new LeaderElector({
    lock: { ...lease, identity },
    coordination: o.clients.coordination,
    leaseDurationMs: le.leaseDurationMs,
    renewDeadlineMs: le.renewDeadlineMs,
    retryPeriodMs: le.retryPeriodMs,
    releaseOnCancel: true,
    logger: log,
    onStartedLeading: (signal) => {
      log.info({ identity, lease }, "started leading");
      o.writeGate.lead(signal);
      o.startControllers(signal);
    },
    onRenewed: (sentAt) => {
      o.writeGate.renewed(sentAt);
    },
    onLeaseError: o.onLeaseError,
    onStoppedLeading: () => {
      if (o.shutdown.aborted) {
        log.info({ identity, lease }, "stopped leading");
        return;
      }
      log.error({ identity, lease }, "leaderelection lost");
      process.exit(1);
    },
    onNewLeader: (holder) => {
      if (holder !== identity) log.info({ holder, lease }, "new leader elected");
    },
    onLeaderStatus: (leading) => {
      status.set({ name: le.name }, leading ? 1 : 0);
    },
  });
}
