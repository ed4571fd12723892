/**
 * Leader election on a coordination.k8s.io/v1 Lease with client-go's semantics
 * (k8s.io/client-go/tools/leaderelection): acquire by retrying every retryPeriod with jitter, then
 * renew every retryPeriod; a leader that cannot renew within renewDeadline has lost the lease. A
 * candidate judges a lease expired only by its OWN clock: leaseDurationSeconds after the moment it last
 * saw the record change, never from the remote renewTime, so clock skew between replicas is harmless.
 * Writes are optimistic (resourceVersion): a 409 means another replica won.
 *
 * Unlike client-go, a candidate does not only poll: it tries again the moment the record it last saw
 * expires, and, given the Lease's changes as they happen (watchLease), the moment the lease is released
 * or deleted. After a graceful handover or a crash the new term then starts without waiting up to a
 * jittered retryPeriod (issue 30 goal 1). Each attempt still reads the Lease and writes it optimistically,
 * so a late or missed watch event only delays a takeover, never allows an early one.
 *
 * Losing the lease must end the process with a non-zero status, as kube-controller-manager does: the
 * controllers started in onStartedLeading cannot be trusted to have stopped every in-flight write, and
 * a restart is the only clean way back to candidate. That is the caller's onStoppedLeading's job (it
 * also runs after a graceful stop, when exiting 0 is right); the elector never exits the process. So
 * that it can do so at once, a lost lease is never released (only a stopped run's is), and a renewal
 * that finds another holder gives up at once instead of retrying until renewDeadline.
 */
import { V1MicroTime, type CoordinationV1Api, type V1Lease, type V1LeaseSpec } from "@kubernetes/client-node";
import { pino, type Logger } from "pino";
import { abortableRequest } from "./client.js";
import { errorMessage, isAlreadyExists, isConflict, isNotFound } from "./api-errors.js";
import { deadline, realClock, sleep, Wakeup, type Clock } from "./clock.js";

export const LEADER_ELECTION_DEFAULTS = {
  leaseName: "kube-volume-controller",
  leaseNamespace: "kube-system",
  leaseDurationMs: 15_000,
  renewDeadlineMs: 10_000,
  retryPeriodMs: 2_000,
  /** What kube-controller-manager gives its leader-election healthz check beyond the lease. */
  healthzToleranceMs: 20_000,
} as const;

/** client-go's JitterFactor: acquire attempts are retryPeriod × (1 + rand × 1.2) apart. */
export const JITTER_FACTOR = 1.2;

/** The Lease calls the elector makes; a CoordinationV1Api from kc.makeApiClient satisfies it. */
export type LeaseClient = Pick<
  CoordinationV1Api,
  "readNamespacedLease" | "createNamespacedLease" | "replaceNamespacedLease"
>;

export interface LeaderElectionConfig {
  lock: { name?: string; namespace?: string; identity: string };
  coordination: LeaseClient;
  leaseDurationMs?: number;
  renewDeadlineMs?: number;
  retryPeriodMs?: number;
  /**
   * Write an empty holder with leaseDurationSeconds 1 when run is stopped (never when the lease is
   * lost), so a standby takes over at once. Only safe if everything guarded by the lease has stopped
   * before run's signal is aborted.
   */
  releaseOnCancel?: boolean;
  clock?: Clock;
  /** Source of acquire jitter, [0, 1). */
  random?: () => number;
  logger?: Logger;
  /**
   * Subscribes to the Lease's changes as they happen (an informer on it): `onChange` gets its spec, or
   * undefined once it is deleted; the returned function unsubscribes. Without it a candidate learns of
   * changes only by its attempts.
   */
  watchLease?: (onChange: (spec: V1LeaseSpec | undefined) => void) => () => void;
  /** We hold the lease; `signal` aborts when we stop holding it (lost, or run stopped). */
  onStartedLeading: (signal: AbortSignal) => void;
  /** run is ending, whether or not we ever led. */
  onStoppedLeading: () => void;
  /**
   * A write naming us as holder (acquire or renewal), sent at `sentAt` on the clock, succeeded: the
   * lease is ours until at least sentAt + renewDeadline (see WriteGate).
   */
  onRenewed?: (sentAt: number) => void;
  /**
   * Reading or writing the Lease failed for a reason other than losing a race (403 from RBAC, 404 of
   * the namespace, network), with that reason; undefined when it works again. Called on changes only.
   */
  onLeaseError?: (err: Error | undefined) => void;
  /** A different holder was observed (including the first one, and ourselves). */
  onNewLeader?: (identity: string) => void;
  /** For leader_election_master_status{name}: false when run starts, true on acquiring, false when leading ends. */
  onLeaderStatus?: (leading: boolean) => void;
}

export class LeaderElector {
  readonly #name: string;
  readonly #namespace: string;
  readonly #identity: string;
  readonly #api: LeaseClient;
  readonly #leaseDurationMs: number;
  readonly #renewDeadlineMs: number;
  readonly #retryPeriodMs: number;
  readonly #releaseOnCancel: boolean;
  readonly #clock: Clock;
  readonly #random: () => number;
  readonly #log: Logger;
  readonly #config: LeaderElectionConfig;

  /** The last Lease read or written: its resourceVersion makes our next write optimistic. */
  #lease: V1Lease | undefined;
  #observed: V1LeaseSpec = {};
  #observedKey = recordKey({});
  /** Local clock time at which #observed was last seen to change (or written by us). */
  #observedTime = 0;
  /** How many times #observed changed: a candidate's wait ends early on a change seen while it waits. */
  #observedChanges = 0;
  /** Ends a candidate's wait between attempts. */
  readonly #wakeup: Wakeup;
  #reportedLeader = "";
  #leading = false;
  /** The last failure to access the Lease that was not a lost race, as logged. */
  #leaseError: string | undefined;

  constructor(config: LeaderElectionConfig) {
    const d = LEADER_ELECTION_DEFAULTS;
    const leaseDurationMs = config.leaseDurationMs ?? d.leaseDurationMs;
    const renewDeadlineMs = config.renewDeadlineMs ?? d.renewDeadlineMs;
    const retryPeriodMs = config.retryPeriodMs ?? d.retryPeriodMs;
    // client-go's NewLeaderElector checks, in its order.
    if (leaseDurationMs <= renewDeadlineMs) {
      throw new Error("leaseDuration must be greater than renewDeadline");
    }
    if (renewDeadlineMs <= JITTER_FACTOR * retryPeriodMs) {
      throw new Error("renewDeadline must be greater than retryPeriod*JitterFactor");
    }
    if (leaseDurationMs < 1) throw new Error("leaseDuration must be greater than zero");
    if (renewDeadlineMs < 1) throw new Error("renewDeadline must be greater than zero");
    if (retryPeriodMs < 1) throw new Error("retryPeriod must be greater than zero");
    if (!config.lock.identity) throw new Error("Lock identity is empty");
    // Not in client-go: the Lease holds whole seconds (and the apiserver rejects 0), so a fractional
    // duration would let candidates take over before this leader's renewDeadline runs out.
    if (leaseDurationMs % 1000 !== 0) throw new Error("leaseDuration must be a whole number of seconds");

    this.#name = config.lock.name ?? d.leaseName;
    this.#namespace = config.lock.namespace ?? d.leaseNamespace;
    this.#identity = config.lock.identity;
    this.#api = config.coordination;
    this.#leaseDurationMs = leaseDurationMs;
    this.#renewDeadlineMs = renewDeadlineMs;
    this.#retryPeriodMs = retryPeriodMs;
    this.#releaseOnCancel = config.releaseOnCancel ?? false;
    this.#clock = config.clock ?? realClock;
    this.#random = config.random ?? Math.random;
    this.#wakeup = new Wakeup(this.#clock);
    this.#log = (config.logger ?? pino({ level: "silent" })).child({ lease: this.#describe() });
    this.#config = config;
  }

  /** True while run holds the lease: acquired, not yet lost or stopped, and no other holder seen. */
  isLeader(): boolean {
    return this.#leading && this.#holdsObservedRecord();
  }

  /** The holder in the last record observed ("" before any, or after a release). */
  getLeader(): string {
    return this.#observed.holderIdentity ?? "";
  }

  /**
   * client-go's HealthzAdaptor check: an error if the last observed record names us but we have not
   * renewed it for longer than leaseDuration + toleranceMs (we should have stepped down and exited,
   * but something — a blocked event loop, a wedged callback — stopped us).
   */
  check(toleranceMs: number = LEADER_ELECTION_DEFAULTS.healthzToleranceMs): Error | undefined {
    if (!this.#holdsObservedRecord()) return undefined;
    if (this.#clock.now() - this.#observedTime > this.#leaseDurationMs + toleranceMs) {
      return new Error(`failed election to renew leadership on lease ${this.#describe()}`);
    }
    return undefined;
  }

  /**
   * Campaigns until `signal` aborts or leadership is lost; resolves after onStoppedLeading. Run it
   * once per elector.
   */
  async run(signal: AbortSignal): Promise<void> {
    this.#config.onLeaderStatus?.(false);
    try {
      if (!(await this.#acquire(signal))) return;
      const lost = new AbortController();
      this.#leading = true;
      try {
        this.#config.onStartedLeading(AbortSignal.any([signal, lost.signal]));
        await this.#renew(signal);
      } finally {
        this.#leading = false;
        lost.abort(new Error(`stopped leading lease ${this.#describe()}`));
        this.#config.onLeaderStatus?.(false);
      }
      // A lost lease is not released: the process must stop acting at once, and the record may no
      // longer be ours (client-go releases whenever it still names us, after the same renew failure).
      if (this.#releaseOnCancel && signal.aborted) await this.#release();
    } finally {
      this.#config.onStoppedLeading();
    }
  }

  async #acquire(signal: AbortSignal): Promise<boolean> {
    this.#log.info("attempting to acquire leader lease");
    const unwatch = this.#config.watchLease?.((spec) => {
      this.#watched(spec);
    });
    try {
      for (;;) {
        if (signal.aborted) return false;
        const acquired = await this.#tryAcquireOrRenew(signal);
        this.#maybeReportTransition();
        if (acquired) {
          this.#log.info("successfully acquired lease");
          this.#config.onLeaderStatus?.(true);
          return true;
        }
        try {
          await this.#untilRetry(signal);
        } catch {
          return false;
        }
      }
    } finally {
      unwatch?.();
    }
  }

  /**
   * Waits for the next acquire attempt: client-go's wait.JitterUntil, sliding (the jittered wait
   * starts after the attempt ends), cut short when the lease becomes free to take — the record seen
   * expires, or a record seen while waiting has no holder. Only a change or an expiry after the
   * failed attempt cuts it short, so an attempt that fails on a free lease (another candidate won, or
   * the apiserver failed) is retried after the jittered wait, not in a loop.
   */
  async #untilRetry(signal: AbortSignal): Promise<void> {
    const ended = this.#clock.now();
    const retryAt = ended + this.#retryPeriodMs * (1 + this.#random() * JITTER_FACTOR);
    const changes = this.#observedChanges;
    for (;;) {
      const free = this.#observed.holderIdentity ? this.#expiry() : this.#observedTime;
      const early = this.#observedChanges !== changes || free > ended;
      const at = early ? Math.min(retryAt, free) : retryAt;
      const now = this.#clock.now();
      if (at <= now) return;
      await this.#wakeup.until(signal, at - now);
    }
  }

  /**
   * A record from the Lease's watch: a candidate observes it as if an attempt had read it. Never a
   * leader: a late event would replace the record it wrote with an older one.
   */
  #watched(spec: V1LeaseSpec | undefined): void {
    const record = spec ?? {};
    if (this.#leading || recordKey(record) === this.#observedKey) return;
    this.#observe(record);
    this.#maybeReportTransition();
    this.#wakeup.wake();
  }

  /** Renews every retryPeriod until a renewal fails to succeed within renewDeadline, or `signal`. */
  async #renew(signal: AbortSignal): Promise<void> {
    for (;;) {
      const renewed = await this.#renewWithinDeadline(signal);
      this.#maybeReportTransition();
      if (!renewed) {
        if (signal.aborted) return;
        // Which of the two it was tells an operator where to look: another replica (this one was
        // paused or cut off past the lease), or the apiserver (no renewal within the deadline).
        if (this.#holdsObservedRecord()) {
          this.#log.warn(
            { renewDeadlineMs: this.#renewDeadlineMs },
            "failed to renew lease: leadership lost",
          );
        } else {
          this.#log.warn({ holder: this.getLeader() }, "lease is held by another replica: leadership lost");
        }
        return;
      }
      try {
        await sleep(this.#clock, this.#retryPeriodMs, signal);
      } catch {
        return;
      }
    }
  }

  /** wait.PollUntilContextTimeout(retryPeriod, renewDeadline, immediate): the deadline aborts requests too. */
  async #renewWithinDeadline(signal: AbortSignal): Promise<boolean> {
    const renewal = this.#deadline(this.#renewDeadlineMs, signal);
    try {
      for (;;) {
        if (renewal.signal.aborted) return false;
        const started = this.#clock.now();
        if (await this.#tryAcquireOrRenew(renewal.signal)) return true;
        // Another replica holds it (we were paused, or partitioned, past the lease): it cannot become
        // ours again before its lease runs out, so stop leading now rather than at renewDeadline.
        if (!this.#holdsObservedRecord()) return false;
        try {
          await sleep(this.#clock, started + this.#retryPeriodMs - this.#clock.now(), renewal.signal);
        } catch {
          return false;
        }
      }
    } finally {
      renewal.cancel();
    }
  }

  async #tryAcquireOrRenew(signal: AbortSignal): Promise<boolean> {
    const now = this.#clock.now();
    // Lease times are informational (expiry is judged locally), in wall-clock time. They must be
    // V1MicroTime: client-node sends a plain Date with millisecond precision, and the apiserver rejects
    // that with 400 (cannot parse ".317Z" as ".000000").
    const stamp = new V1MicroTime(Date.now());
    const record = (acquireTime: V1MicroTime | undefined, leaseTransitions: number): V1LeaseSpec => ({
      holderIdentity: this.#identity,
      leaseDurationSeconds: this.#leaseDurationMs / 1000,
      ...(acquireTime && { acquireTime }),
      renewTime: stamp,
      leaseTransitions,
    });

    // 1. Fast path: the leader writes over the Lease it last saw, assuming nobody else touched it.
    if (this.#lease && this.#holdsObservedRecord() && this.#leaseValid(now)) {
      const renewal = record(this.#observed.acquireTime, this.#observed.leaseTransitions ?? 0);
      try {
        await this.#update(this.#lease, renewal, signal);
        this.#observe(renewal);
        this.#renewed(now);
        return true;
      } catch (err) {
        this.#log.debug({ err }, "failed to update lease optimistically, falling back to slow path");
      }
    }

    // 2. Get the Lease, or create it holding it ourselves.
    let lease: V1Lease;
    try {
      lease = await this.#api.readNamespacedLease(
        { name: this.#name, namespace: this.#namespace },
        abortableRequest(signal),
      );
    } catch (err) {
      if (!isNotFound(err)) return this.#failed("error retrieving lease lock", err, signal);
      const created = record(stamp, 0);
      try {
        this.#lease = await this.#api.createNamespacedLease(
          {
            namespace: this.#namespace,
            body: { metadata: { name: this.#name, namespace: this.#namespace }, spec: created },
          },
          abortableRequest(signal),
        );
      } catch (createErr) {
        return this.#failed("error initially creating lease lock", createErr, signal);
      }
      this.#observe(created);
      this.#renewed(now);
      return true;
    }
    this.#lease = lease;
    this.#accessible();

    // 3. A changed record restarts the local expiry clock: a record held by another replica expires
    // leaseDurationSeconds after the local moment we first saw it as it is, whatever its renewTime says.
    const old = lease.spec ?? {};
    if (recordKey(old) !== this.#observedKey) this.#observe(old);
    if (old.holderIdentity && this.#leaseValid(now) && !this.#holdsObservedRecord()) {
      this.#log.debug({ holder: old.holderIdentity }, "lease is held and has not yet expired");
      return false;
    }

    // 4. Renew what we hold, or take it over (a new term: count the transition).
    const next = this.#holdsObservedRecord()
      ? record(old.acquireTime, old.leaseTransitions ?? 0)
      : record(stamp, (old.leaseTransitions ?? 0) + 1);
    try {
      await this.#update(lease, next, signal);
    } catch (err) {
      return this.#failed("failed to update lease", err, signal);
    }
    this.#observe(next);
    this.#renewed(now);
    return true;
  }

  /**
   * Hands the lease back: empty holder, leaseDurationSeconds 1. Bounded by renewDeadline on its own
   * clock, since run's signal is already aborted. Retries on conflict (an aborted renewal may still
   * have landed and bumped the resourceVersion).
   */
  async #release(): Promise<void> {
    const deadline = this.#deadline(this.#renewDeadlineMs);
    try {
      for (;;) {
        let lease: V1Lease;
        try {
          lease = await this.#api.readNamespacedLease(
            { name: this.#name, namespace: this.#namespace },
            abortableRequest(deadline.signal),
          );
        } catch (err) {
          this.#log.error({ err }, "failed to release lease");
          return;
        }
        // Unlike client-go, check the record just read too: after a failed renewal another replica
        // may already hold it, and blanking its record would hand the lease to a third.
        if (!this.#holdsObservedRecord() || lease.spec?.holderIdentity !== this.#identity) return;
        const stamp = new V1MicroTime(Date.now());
        const released: V1LeaseSpec = {
          holderIdentity: "",
          leaseDurationSeconds: 1,
          acquireTime: stamp,
          renewTime: stamp,
          leaseTransitions: lease.spec.leaseTransitions ?? 0,
        };
        try {
          await this.#update(lease, released, deadline.signal);
          this.#observe(released);
          this.#log.info("released lease");
          return;
        } catch (err) {
          if (isConflict(err)) continue;
          this.#log.error({ err }, "failed to release lease");
          return;
        }
      }
    } finally {
      deadline.cancel();
    }
  }

  async #update(base: V1Lease, spec: V1LeaseSpec, signal: AbortSignal): Promise<void> {
    this.#lease = await this.#api.replaceNamespacedLease(
      {
        name: this.#name,
        namespace: this.#namespace,
        body: { apiVersion: "coordination.k8s.io/v1", kind: "Lease", metadata: base.metadata ?? {}, spec },
      },
      abortableRequest(signal),
    );
  }

  #observe(spec: V1LeaseSpec): void {
    this.#observed = spec;
    this.#observedKey = recordKey(spec);
    this.#observedTime = this.#clock.now();
    this.#observedChanges++;
  }

  /** client-go's IsLeader: the last record we saw or wrote names us. */
  #holdsObservedRecord(): boolean {
    return this.#observed.holderIdentity === this.#identity;
  }

  #leaseValid(now: number): boolean {
    return this.#expiry() > now;
  }

  /** When the observed record expires on our clock. */
  #expiry(): number {
    return this.#observedTime + (this.#observed.leaseDurationSeconds ?? 0) * 1000;
  }

  #maybeReportTransition(): void {
    const holder = this.getLeader();
    if (holder === this.#reportedLeader) return;
    this.#reportedLeader = holder;
    this.#config.onNewLeader?.(holder);
  }

  /** A write naming us, sent at `sentAt`, succeeded. */
  #renewed(sentAt: number): void {
    this.#accessible();
    this.#config.onRenewed?.(sentAt);
  }

  /** The Lease could be read or written: any access error is over. */
  #accessible(): void {
    if (this.#leaseError === undefined) return;
    this.#leaseError = undefined;
    this.#log.info("lease is accessible again");
    this.#config.onLeaseError?.(undefined);
  }

  /**
   * Logs a failed attempt: quietly when it is an expected outcome (another replica won the race, or
   * we aborted it ourselves), as an error once per distinct cause otherwise (a standby without RBAC
   * for its Lease retries every retryPeriod forever), and reports the cause; always false.
   */
  #failed(msg: string, err: unknown, signal: AbortSignal): false {
    const expected = signal.aborted || isConflict(err) || isAlreadyExists(err);
    const cause = `${msg}: ${errorMessage(err)}`;
    if (expected || cause === this.#leaseError) {
      this.#log.debug({ err }, msg);
      return false;
    }
    this.#log.error({ err }, msg);
    this.#leaseError = cause;
    this.#config.onLeaseError?.(new Error(`lease ${this.#describe()}: ${cause}`));
    return false;
  }

  /** An AbortSignal that fires after `ms` on our clock, or with `parent`. */
  #deadline(ms: number, parent?: AbortSignal): { signal: AbortSignal; cancel: () => void } {
    const reason = () => new Error(`deadline of ${ms} ms exceeded on lease ${this.#describe()}`);
    return deadline(this.#clock, ms, reason, parent);
  }

  #describe(): string {
    return `${this.#namespace}/${this.#name}`;
  }
}

/**
 * What "the record changed" compares, like client-go's raw-record bytes. client-node types MicroTime
 * fields as V1MicroTime but hands back the apiserver's string on reads, so accept both.
 */
function recordKey(spec: V1LeaseSpec): string {
  return JSON.stringify([
    spec.holderIdentity ?? "",
    spec.leaseDurationSeconds ?? 0,
    microTime(spec.acquireTime),
    microTime(spec.renewTime),
    spec.leaseTransitions ?? 0,
    spec.strategy ?? "",
    spec.preferredHolder ?? "",
  ]);
}

function microTime(t: unknown): string {
  if (typeof t === "string") return t;
  return t instanceof Date ? t.toISOString() : "";
}
