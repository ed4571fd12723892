/*
 * The table-test framework for the PersistentVolume binder, after upstream's framework_test.go and
 * testing/testing.go: given volumes, claims, classes, pods and nodes → one call (or a run of syncs
 * until nothing changes) → expected volumes, claims and events.
 *
 * Differences from upstream's framework, on purpose:
 * - Events are checked exactly: every emitted event must be expected, in order (each expected string
 *   is a prefix of "<type> <reason> <message>"). An empty list means no events at all.
 * - The fake API behaves like the apiserver where upstream's reactor is simpler: a PV's create resets
 *   its status to Pending, update ignores status and updateStatus ignores everything but status, a
 *   resourceVersion is global, and a delete of an object with finalizers only marks it deleted (the
 *   update removing its last finalizer then deletes it).
 * - Multisync feeds changed objects through the controller's updateClaim/updateVolume (the cache's
 *   resourceVersion check included) instead of overwriting the cache, and moves a test clock instead
 *   of sleeping to let operation backoffs pass.
 */
import assert from "node:assert/strict";
import {
  ApiException,
  type V1Node,
  type V1PersistentVolume,
  type V1PersistentVolumeClaim,
  type V1Pod,
  type V1StorageClass,
} from "@kubernetes/client-node";
import { pino } from "pino";
import { isConflict } from "../../src/runtime/api-errors.js";
import type { Clock } from "../../src/runtime/clock.js";
import { silentLogger } from "../../src/runtime/logger.js";
import {
  ANN_BETA_STORAGE_PROVISIONER,
  ANN_DYNAMICALLY_PROVISIONED,
  ANN_STORAGE_PROVISIONER,
} from "../../src/persistentvolume/annotations.js";
import { OperationScheduler } from "../../src/persistentvolume/operations.js";
import type { BinderApi } from "../../src/persistentvolume/binder-api.js";
import type { Lister } from "../../src/persistentvolume/binder-context.js";
import { PersistentVolumeController } from "../../src/persistentvolume/pv-controller.js";
import type { CsiMigration } from "../../src/volume/csimigration/plugin-manager.js";
import { POD_PVC_INDEX, podPVCKeys } from "../../src/volume/common/common.js";
import { VolumePluginManager } from "../../src/volume/plugin-manager.js";
import type {
  DeletableVolumePlugin,
  Deleter,
  ProvisionableVolumePlugin,
  ProvisionOptions,
  Provisioner,
  RecyclableVolumePlugin,
} from "../../src/volume/plugin.js";

export const NAMESPACE = "default";
export const MOCK_PLUGIN = "kubernetes.io/mock-volume";
/** Marks initial objects that only the API has, not the controller's cache (upstream annSkipLocalStore). */
export const ANN_SKIP_LOCAL_STORE = "pv-testing-skip-local-store";

// ---- objects (upstream newVolume / newClaim and their with* helpers) ----

/**
 * newVolume: RWO+ROX, a GCE PD source, Filesystem, resourceVersion "1"; a claimRef when claimName is
 * set. Annotations get "yes", provisioned-by gets the mock plugin's name.
 */
export function newVolume(
  name: string,
  capacity: string,
  claimUid: string,
  claimName: string,
  phase: string,
  reclaimPolicy: string,
  storageClassName: string,
  ...annotations: string[]
): V1PersistentVolume {
  const volume: V1PersistentVolume = {
    metadata: { name, resourceVersion: "1" },
    spec: {
      capacity: { storage: capacity },
      gcePersistentDisk: { pdName: "" },
      accessModes: ["ReadWriteOnce", "ReadOnlyMany"],
      persistentVolumeReclaimPolicy: reclaimPolicy,
      storageClassName,
      volumeMode: "Filesystem",
    },
    status: phase ? { phase } : {},
  };
  if (claimName) {
    volume.spec!.claimRef = {
      kind: "PersistentVolumeClaim",
      apiVersion: "v1",
      namespace: NAMESPACE,
      name: claimName,
      ...(claimUid ? { uid: claimUid } : {}),
    };
  }
  if (annotations.length) {
    volume.metadata!.annotations = Object.fromEntries(
      annotations.map((a) => [a, a === ANN_DYNAMICALLY_PROVISIONED ? MOCK_PLUGIN : "yes"]),
    );
  }
  return volume;
}

/** newExternalProvisionedVolume: as newVolume with a CSI source; provisioned-by gets the driver's name. */
export function newExternalVolume(
  name: string,
  capacity: string,
  claimUid: string,
  claimName: string,
  phase: string,
  reclaimPolicy: string,
  storageClassName: string,
  driver: string,
  ...annotations: string[]
): V1PersistentVolume {
  const volume = newVolume(name, capacity, claimUid, claimName, phase, reclaimPolicy, storageClassName);
  delete volume.spec!.gcePersistentDisk;
  volume.spec!.csi = {
    driver,
    volumeHandle: "527b55dc-c7db-4574-9226-2e33318b06a3",
    readOnly: false,
    fsType: "ext4",
    volumeAttributes: { "Test-Key": "Test-Value" },
  };
  if (annotations.length) {
    volume.metadata!.annotations = Object.fromEntries(
      annotations.map((a) => [a, a === ANN_DYNAMICALLY_PROVISIONED ? driver : "yes"]),
    );
  }
  return volume;
}

/**
 * newClaim: namespace "default", RWO+ROX, Filesystem, resourceVersion "1". A Bound claim's status
 * has the requested access modes and capacity. storage-provisioner annotations get the mock plugin's
 * name, others "yes".
 */
export function newClaim(
  name: string,
  uid: string,
  capacity: string,
  volumeName: string,
  phase: string,
  storageClassName: string | undefined,
  ...annotations: string[]
): V1PersistentVolumeClaim {
  const claim: V1PersistentVolumeClaim = {
    metadata: { name, namespace: NAMESPACE, uid, resourceVersion: "1" },
    spec: {
      accessModes: ["ReadWriteOnce", "ReadOnlyMany"],
      resources: { requests: { storage: capacity } },
      ...(volumeName ? { volumeName } : {}),
      ...(storageClassName !== undefined ? { storageClassName } : {}),
      volumeMode: "Filesystem",
    },
    status: phase ? { phase } : {},
  };
  if (annotations.length) {
    const provisioner = (a: string) => a === ANN_STORAGE_PROVISIONER || a === ANN_BETA_STORAGE_PROVISIONER;
    claim.metadata!.annotations = Object.fromEntries(
      annotations.map((a) => [a, provisioner(a) ? MOCK_PLUGIN : "yes"]),
    );
  }
  if (phase === "Bound") {
    claim.status!.accessModes = [...claim.spec!.accessModes!];
    claim.status!.capacity = { storage: capacity };
  }
  return claim;
}

/** Applies `change` to `obj` and returns it, for composing objects inline. */
export function modify<T>(obj: T, change: (obj: T) => void): T {
  change(obj);
  return obj;
}

export function withAnnotation<T extends V1PersistentVolume | V1PersistentVolumeClaim>(
  obj: T,
  key: string,
  value: string,
): T {
  obj.metadata ??= {};
  (obj.metadata.annotations ??= {})[key] = value;
  return obj;
}

export const withLabels = (volume: V1PersistentVolume, labels: Record<string, string>) =>
  modify(volume, (v) => (v.metadata!.labels = { ...labels }));
export const withSelector = (claim: V1PersistentVolumeClaim, labels: Record<string, string>) =>
  modify(claim, (c) => (c.spec!.selector = { matchLabels: { ...labels } }));
export const withVolumeMode = <T extends V1PersistentVolume | V1PersistentVolumeClaim>(
  obj: T,
  mode: string,
) => modify(obj, (o) => (o.spec!.volumeMode = mode));
export const withAccessModes = <T extends V1PersistentVolume | V1PersistentVolumeClaim>(
  obj: T,
  modes: string[],
) => modify(obj, (o) => (o.spec!.accessModes = modes));
export const withExpectedCapacity = (claim: V1PersistentVolumeClaim, capacity: string) =>
  modify(claim, (c) => (c.status!.capacity = { storage: capacity }));
export const withMessage = (volume: V1PersistentVolume, message: string) =>
  modify(volume, (v) => (v.status!.message = message));
export const withFinalizers = (volume: V1PersistentVolume, finalizers: string[]) =>
  modify(volume, (v) => (v.metadata!.finalizers = [...finalizers]));
export const withDeletionTimestamp = (volume: V1PersistentVolume) =>
  modify(volume, (v) => (v.metadata!.deletionTimestamp = new Date("2020-02-18T10:30:30Z")));
export const withVAC = <T extends V1PersistentVolume | V1PersistentVolumeClaim>(obj: T, vac: string) =>
  modify(obj, (o) => (o.spec!.volumeAttributesClassName = vac));
export const withExpectedVAC = (claim: V1PersistentVolumeClaim, vac: string) =>
  modify(claim, (c) => (c.status!.currentVolumeAttributesClassName = vac));
export const withDataSource = (claim: V1PersistentVolumeClaim) =>
  modify(
    claim,
    (c) =>
      (c.spec!.dataSource = {
        name: "test-snap",
        kind: "VolumeSnapshot",
        apiGroup: "snapshot.storage.k8s.io",
      }),
  );

export function storageClass(
  name: string,
  provisioner: string,
  bindingMode: string | undefined,
  extra: Partial<V1StorageClass> = {},
): V1StorageClass {
  return {
    metadata: { name },
    provisioner,
    ...(bindingMode ? { volumeBindingMode: bindingMode } : {}),
    ...extra,
  };
}

export function pod(name: string, claimName: string, phase: string, nodeName?: string): V1Pod {
  return {
    metadata: { name, namespace: NAMESPACE },
    spec: {
      containers: [],
      volumes: [{ name: "vol1", persistentVolumeClaim: { claimName } }],
      ...(nodeName ? { nodeName } : {}),
    },
    status: { phase },
  };
}

// ---- the fake API (upstream testing.VolumeReactor) ----

type Verb = "get" | "create" | "update" | "delete";
type Resource = "persistentvolumes" | "persistentvolumeclaims";

/** An error the fake returns once, for the first call matching verb and resource (updateStatus is "update"). */
export interface ReactorError {
  verb: Verb;
  resource: Resource;
  error: Error;
}

export type Changed =
  { kind: "volume"; obj: V1PersistentVolume } | { kind: "claim"; obj: V1PersistentVolumeClaim };

function apiError(code: number, reason: string, message: string): ApiException<string> {
  return new ApiException(code, message, JSON.stringify({ kind: "Status", code, reason, message }), {});
}

export const alreadyExists = (name: string) =>
  apiError(409, "AlreadyExists", `persistentvolumes "${name}" already exists`);

export class FakeBinderApi implements BinderApi {
  readonly volumes = new Map<string, V1PersistentVolume>();
  readonly claims = new Map<string, V1PersistentVolumeClaim>();
  /** Every saved version, in order: the watch events multisync replays. */
  readonly changes: Changed[] = [];
  /** Writes (and deletes) since the last syncAll. */
  changedSinceSync = 0;
  /** Called after every write with the object's kind and key, as a watch would. */
  onChange: ((kind: "volume" | "claim", key: string) => void) | undefined;
  readonly #errors: ReactorError[];
  #resourceVersion = 100;

  constructor(errors: readonly ReactorError[] = []) {
    this.#errors = [...errors];
  }

  addVolume(volume: V1PersistentVolume): void {
    this.volumes.set(volume.metadata!.name!, structuredClone(volume));
  }

  addClaim(claim: V1PersistentVolumeClaim): void {
    this.claims.set(claimKeyOf(claim), structuredClone(claim));
  }

  getVolume(name: string): Promise<V1PersistentVolume> {
    return this.#call("get", "persistentvolumes", () => {
      const volume = this.volumes.get(name);
      if (!volume) throw notFound("persistentvolumes", name);
      return structuredClone(volume);
    });
  }

  createVolume(volume: V1PersistentVolume): Promise<V1PersistentVolume> {
    return this.#call("create", "persistentvolumes", () => {
      const name = volume.metadata?.name ?? "";
      if (this.volumes.has(name)) throw alreadyExists(name);
      const created = structuredClone(volume);
      // The apiserver's PV strategy and defaulting.
      created.status = { phase: "Pending" };
      created.spec!.volumeMode ??= "Filesystem";
      created.metadata!.resourceVersion = this.#nextVersion();
      this.volumes.set(name, created);
      this.#changed({ kind: "volume", obj: created });
      return structuredClone(created);
    });
  }

  updateVolume(volume: V1PersistentVolume): Promise<V1PersistentVolume> {
    return this.#call("update", "persistentvolumes", () =>
      this.#update("volume", this.volumes, volume.metadata!.name!, volume, false),
    );
  }

  updateVolumeStatus(volume: V1PersistentVolume): Promise<V1PersistentVolume> {
    return this.#call("update", "persistentvolumes", () =>
      this.#update("volume", this.volumes, volume.metadata!.name!, volume, true),
    );
  }

  deleteVolume(name: string): Promise<void> {
    return this.#call("delete", "persistentvolumes", () => {
      const volume = this.volumes.get(name);
      if (!volume) throw notFound("persistentvolumes", name);
      if (volume.metadata?.finalizers?.length) {
        if (!volume.metadata.deletionTimestamp) {
          const marked = structuredClone(volume);
          marked.metadata!.deletionTimestamp = new Date("2020-02-18T10:30:30Z");
          marked.metadata!.resourceVersion = this.#nextVersion();
          this.volumes.set(name, marked);
          this.#changed({ kind: "volume", obj: marked });
        }
        return;
      }
      this.volumes.delete(name);
      this.changedSinceSync++;
      this.onChange?.("volume", name);
    });
  }

  getClaim(namespace: string, name: string): Promise<V1PersistentVolumeClaim> {
    return this.#call("get", "persistentvolumeclaims", () => {
      const claim = this.claims.get(`${namespace}/${name}`);
      if (!claim) throw notFound("persistentvolumeclaims", name);
      return structuredClone(claim);
    });
  }

  updateClaim(claim: V1PersistentVolumeClaim): Promise<V1PersistentVolumeClaim> {
    return this.#call("update", "persistentvolumeclaims", () =>
      this.#update("claim", this.claims, claimKeyOf(claim), claim, false),
    );
  }

  updateClaimStatus(claim: V1PersistentVolumeClaim): Promise<V1PersistentVolumeClaim> {
    return this.#call("update", "persistentvolumeclaims", () =>
      this.#update("claim", this.claims, claimKeyOf(claim), claim, true),
    );
  }

  /** The next saved version not yet replayed (upstream PopChange). */
  popChange(): Changed | undefined {
    return this.changes.shift();
  }

  /** Queues every object for a sync, as a periodic resync (upstream SyncAll). */
  syncAll(): void {
    for (const obj of this.claims.values()) this.changes.push({ kind: "claim", obj: structuredClone(obj) });
    for (const obj of this.volumes.values()) this.changes.push({ kind: "volume", obj: structuredClone(obj) });
    this.changedSinceSync = 0;
  }

  #update<T extends V1PersistentVolume | V1PersistentVolumeClaim>(
    kind: "volume" | "claim",
    store: Map<string, T>,
    key: string,
    obj: T,
    status: boolean,
  ): T {
    const stored = store.get(key);
    if (!stored) throw notFound(kind === "volume" ? "persistentvolumes" : "persistentvolumeclaims", key);
    const version = obj.metadata?.resourceVersion;
    if (version && version !== stored.metadata?.resourceVersion) {
      throw apiError(
        409,
        "Conflict",
        `Operation cannot be fulfilled on ${key}: the object has been modified`,
      );
    }
    const next = structuredClone(stored);
    if (status) {
      next.status = structuredClone(obj.status ?? {});
    } else {
      // The apiserver owns these.
      const meta = structuredClone(obj.metadata ?? {});
      const old = stored.metadata ?? {};
      delete meta.uid;
      delete meta.creationTimestamp;
      delete meta.deletionTimestamp;
      delete meta.resourceVersion;
      if (old.uid !== undefined) meta.uid = old.uid;
      if (old.creationTimestamp !== undefined) meta.creationTimestamp = old.creationTimestamp;
      if (old.deletionTimestamp !== undefined) meta.deletionTimestamp = old.deletionTimestamp;
      if (old.resourceVersion !== undefined) meta.resourceVersion = old.resourceVersion;
      next.metadata = meta;
      if (obj.spec) next.spec = structuredClone(obj.spec);
      else delete next.spec;
    }
    if (sameJson(next, stored)) return structuredClone(stored);
    if (next.metadata?.deletionTimestamp && !next.metadata.finalizers?.length) {
      store.delete(key);
      this.changedSinceSync++;
      this.onChange?.(kind, key);
      return next;
    }
    next.metadata!.resourceVersion = this.#nextVersion();
    store.set(key, next);
    this.#changed({ kind, obj: next });
    return structuredClone(next);
  }

  #changed(change: Changed): void {
    this.changes.push({ kind: change.kind, obj: structuredClone(change.obj) });
    this.changedSinceSync++;
    this.onChange?.(
      change.kind,
      change.kind === "volume" ? change.obj.metadata!.name! : claimKeyOf(change.obj),
    );
  }

  #nextVersion(): string {
    return String(++this.#resourceVersion);
  }

  async #call<T>(verb: Verb, resource: Resource, run: () => T): Promise<T> {
    await Promise.resolve();
    const i = this.#errors.findIndex((e) => e.verb === verb && e.resource === resource);
    if (i >= 0) {
      const [injected] = this.#errors.splice(i, 1);
      throw injected!.error;
    }
    return run();
  }
}

function notFound(resource: string, name: string): ApiException<string> {
  return apiError(404, "NotFound", `${resource} "${name}" not found`);
}

export function claimKeyOf(claim: V1PersistentVolumeClaim): string {
  return `${claim.metadata?.namespace ?? ""}/${claim.metadata?.name ?? ""}`;
}

function sameJson(a: unknown, b: unknown): boolean {
  return JSON.stringify(a) === JSON.stringify(b);
}

// ---- the mock plugin (upstream mockVolumePlugin) ----

/** One expected Provision(): the class parameters it must get, and its error (undefined: success). */
export interface ProvisionCall {
  expectedParameters: Record<string, string>;
  ret?: Error;
}

export interface PluginCalls {
  recycle?: (Error | undefined)[];
  delete?: (Error | undefined)[];
  provision?: ProvisionCall[];
}

/** Provisions, deletes and recycles every volume, returning the scripted errors in turn. */
export class MockVolumePlugin
  implements ProvisionableVolumePlugin, DeletableVolumePlugin, RecyclableVolumePlugin
{
  readonly name = MOCK_PLUGIN;
  readonly supportsMountOptions = false;
  provisionCallCounter = 0;
  deleteCallCounter = 0;
  recycleCallCounter = 0;
  #options: ProvisionOptions | undefined;

  constructor(readonly calls: PluginCalls) {}

  canSupport(): boolean {
    return true;
  }

  newProvisioner(options: ProvisionOptions): Provisioner {
    if (!this.calls.provision?.length) throw new Error("Mock plugin error: no provisionCalls configured");
    this.#options = options;
    return { provision: () => this.#provision() };
  }

  #provision(): Promise<V1PersistentVolume> {
    const calls = this.calls.provision ?? [];
    const call = calls[this.provisionCallCounter];
    if (!call)
      return Promise.reject(
        new Error(`Mock plugin error: unexpected provisioner call ${this.provisionCallCounter}`),
      );
    const options = this.#options!;
    if (JSON.stringify(call.expectedParameters) !== JSON.stringify(options.parameters)) {
      return Promise.reject(new Error("Mock plugin error: invalid provisioner call"));
    }
    this.provisionCallCounter++;
    if (call.ret) return Promise.reject(call.ret);
    const pvc = options.pvc;
    return Promise.resolve({
      metadata: { name: options.pvName },
      spec: {
        capacity: { storage: pvc.spec!.resources!.requests!.storage! },
        accessModes: [...(pvc.spec?.accessModes ?? [])],
        persistentVolumeReclaimPolicy: options.reclaimPolicy,
        gcePersistentDisk: { pdName: "" },
        ...(pvc.spec?.volumeMode ? { volumeMode: pvc.spec.volumeMode } : {}),
      },
      status: { phase: "Available" },
    });
  }

  newDeleter(): Deleter {
    if (!this.calls.delete?.length) throw new Error("Mock plugin error: no deleteCalls configured");
    return {
      delete: () => {
        const calls = this.calls.delete ?? [];
        if (calls.length <= this.deleteCallCounter) {
          return Promise.reject(
            new Error(`Mock plugin error: unexpected deleter call ${this.deleteCallCounter}`),
          );
        }
        const ret = calls[this.deleteCallCounter++];
        return ret ? Promise.reject(ret) : Promise.resolve();
      },
    };
  }

  recycle(): Promise<void> {
    const calls = this.calls.recycle ?? [];
    if (calls.length === 0) return Promise.reject(new Error("Mock plugin error: no recycleCalls configured"));
    if (calls.length <= this.recycleCallCounter) {
      return Promise.reject(
        new Error(`Mock plugin error: unexpected recycle call ${this.recycleCallCounter}`),
      );
    }
    const ret = calls[this.recycleCallCounter++];
    return ret ? Promise.reject(ret) : Promise.resolve();
  }
}

// ---- the controller under test ----

/** Time moves only by advance(); timers fire on the next turn of the event loop whatever their delay. */
export class TestClock implements Clock {
  #now = 0;

  now(): number {
    return this.#now;
  }

  setTimer(fn: () => void): () => void {
    const t = setImmediate(fn);
    return () => {
      clearImmediate(t);
    };
  }

  advance(ms: number): void {
    this.#now += ms;
  }
}

/** An OperationScheduler that calls a hook each time an operation is about to be scheduled (upstream preOperationHook). */
class HookedScheduler extends OperationScheduler {
  constructor(
    clock: Clock,
    readonly hook: (name: string) => void,
  ) {
    super(clock, silentLogger);
  }

  override schedule(name: string, operation: () => Promise<void>): void {
    this.hook(name);
    super.schedule(name, operation);
  }
}

function lister<T extends { metadata?: { name?: string; namespace?: string } }>(
  items: () => Iterable<T>,
): Lister<T> {
  const key = (o: T) =>
    o.metadata?.namespace ? `${o.metadata.namespace}/${o.metadata.name ?? ""}` : (o.metadata?.name ?? "");
  return {
    get: (k) => [...items()].find((o) => key(o) === k),
    list: () => [...items()],
  };
}

export interface BinderTest {
  name: string;
  initialVolumes: V1PersistentVolume[];
  expectedVolumes: V1PersistentVolume[];
  initialClaims: V1PersistentVolumeClaim[];
  expectedClaims: V1PersistentVolumeClaim[];
  /** Prefixes of "<type> <reason> <message>", all of them, in order. */
  expectedEvents: string[];
  errors?: ReactorError[];
  /** Registers the mock plugin with these scripted results (upstream wrapTestWith*Calls). */
  plugin?: PluginCalls;
  migration?: CsiMigration;
  /** Called whenever an operation is about to be scheduled (upstream wrapTestWithInjectedOperation). */
  beforeOperation?: (h: Harness, operationName: string) => void;
  test: TestCall;
}

export type TestCall = "syncClaim" | "syncClaimError" | "syncVolume" | ((h: Harness) => Promise<void>);

export interface Environment {
  classes?: V1StorageClass[];
  pods?: V1Pod[];
  nodes?: V1Node[];
  enableDynamicProvisioning?: boolean;
  /** Shadow mode (src/shadow). */
  shadow?: boolean;
}

/** A controller over a fake API, with what the test reads back. */
export class Harness {
  readonly api: FakeBinderApi;
  readonly clock = new TestClock();
  readonly events: string[] = [];
  readonly enqueuedClaims: string[] = [];
  /** The claim versions the controller enqueued as decided on (PersistentVolumeControllerDeps). */
  readonly claimsDecidedOn: V1PersistentVolumeClaim[] = [];
  readonly enqueuedVolumes: string[] = [];
  readonly nodes: V1Node[];
  readonly ctrl: PersistentVolumeController;
  /**
   * What the claim informer shows: the API's claims (true, event-driven tests), nothing (false, sync
   * tests), or exactly these (a claim informer behind the API).
   */
  informerHasClaims: boolean | V1PersistentVolumeClaim[] = false;

  constructor(
    readonly test: BinderTest,
    env: Environment,
  ) {
    this.api = new FakeBinderApi(test.errors);
    this.nodes = [...(env.nodes ?? [])];
    const plugins = new VolumePluginManager(pino({ level: "silent" }));
    if (test.plugin) plugins.register([new MockVolumePlugin(test.plugin)]);
    const pods = env.pods ?? [];
    const beforeOperation = test.beforeOperation;
    this.ctrl = new PersistentVolumeController({
      api: this.api,
      classes: lister(() => env.classes ?? []),
      claims: lister(() => {
        const shown = this.informerHasClaims;
        return Array.isArray(shown) ? shown : shown ? this.api.claims.values() : [];
      }),
      volumes: lister(() => this.api.volumes.values()),
      nodes: lister(() => this.nodes),
      pods: {
        byIndex: (index, value) => {
          assert.equal(index, POD_PVC_INDEX);
          return pods.filter((p) => podPVCKeys(p).includes(value));
        },
      },
      events: {
        event: (_subject, type, reason, message) => {
          this.events.push(`${type} ${reason} ${message}`);
        },
      },
      plugins,
      clock: this.clock,
      log: silentLogger,
      enqueueClaim: (key, decidedOn) => {
        this.enqueuedClaims.push(key);
        if (decidedOn) this.claimsDecidedOn.push(decidedOn);
      },
      enqueueVolume: (name) => this.enqueuedVolumes.push(name),
      options: {
        enableDynamicProvisioning: env.enableDynamicProvisioning ?? true,
        provisionRetryIntervalMs: 10_000,
        ...(env.shadow && { shadow: true }),
      },
      ...(test.migration ? { migration: test.migration } : {}),
      ...(beforeOperation
        ? {
            operations: new HookedScheduler(this.clock, (name) => {
              beforeOperation(this, name);
            }),
          }
        : {}),
    });
    const skip = (o: V1PersistentVolume | V1PersistentVolumeClaim) =>
      Object.hasOwn(o.metadata?.annotations ?? {}, ANN_SKIP_LOCAL_STORE);
    this.ctrl.initializeCaches(
      test.initialVolumes.filter((v) => !skip(v)),
      test.initialClaims.filter((c) => !skip(c)),
    );
    for (const volume of test.initialVolumes) this.api.addVolume(volume);
    for (const claim of test.initialClaims) this.api.addClaim(claim);
  }

  /** Runs the test's call; resolves once the operations it started have finished. */
  async run(): Promise<void> {
    const call = this.test.test;
    const first = <T>(list: T[], what: string): T => {
      const item = list[0];
      assert.ok(item, `the test needs an initial ${what}`);
      return structuredClone(item);
    };
    if (call === "syncClaim") await this.ctrl.syncClaim(first(this.test.initialClaims, "claim"));
    else if (call === "syncVolume") await this.ctrl.syncVolume(first(this.test.initialVolumes, "volume"));
    else if (call === "syncClaimError") {
      await assert.rejects(
        this.ctrl.syncClaim(first(this.test.initialClaims, "claim")),
        "syncClaim succeeded when failure was expected",
      );
    } else await call(this);
    await this.ctrl.waitForOperations();
  }

  /** Compares the API's objects and the events with the expectations. */
  check(): void {
    assert.deepStrictEqual(
      normalizeAll(this.api.volumes.values()),
      normalizeAll(this.test.expectedVolumes),
      "volumes differ from the expected ones",
    );
    assert.deepStrictEqual(
      normalizeAll(this.api.claims.values()),
      normalizeAll(this.test.expectedClaims),
      "claims differ from the expected ones",
    );
    checkEvents(this.events, this.test.expectedEvents);
  }
}

/** Plain JSON, without resourceVersions, keyed by namespace/name: what the comparison looks at. */
function normalizeAll(objs: Iterable<V1PersistentVolume | V1PersistentVolumeClaim>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const obj of objs) {
    const copy = JSON.parse(JSON.stringify(obj)) as V1PersistentVolume;
    delete copy.metadata?.resourceVersion;
    delete copy.spec?.claimRef?.resourceVersion;
    out[`${copy.metadata?.namespace ?? ""}/${copy.metadata?.name ?? ""}`] = copy;
  }
  return out;
}

export function checkEvents(got: readonly string[], expected: readonly string[]): void {
  const ok = got.length === expected.length && expected.every((prefix, i) => got[i]?.startsWith(prefix));
  assert.ok(
    ok,
    `events differ:\n  expected (prefixes): ${JSON.stringify(expected)}\n  got: ${JSON.stringify(got, null, 2)}`,
  );
}

/** One call, then the comparison (upstream runSyncTests). */
export async function runSyncTest(test: BinderTest, env: Environment = {}): Promise<Harness> {
  const h = new Harness(test, env);
  await h.run();
  h.check();
  return h;
}

/**
 * The call, then every saved version replayed through the controller as a watch event would be, and
 * a resync of everything whenever that settles, until a resync changes nothing (upstream
 * runMultisyncTests). The clock moves 600 ms a round so failed operations may retry.
 */
export async function runMultisyncTest(test: BinderTest, env: Environment = {}): Promise<Harness> {
  const h = new Harness(test, env);
  await h.run();
  let firstSync = true;
  for (let round = 1; ; round++) {
    assert.ok(round <= 100, "too many iterations");
    await h.ctrl.waitForOperations();
    const change = h.api.popChange();
    if (!change) {
      if (!firstSync && h.api.changedSinceSync === 0) break;
      firstSync = false;
      h.api.syncAll();
    }
    h.clock.advance(600);
    if (!change) continue;
    try {
      if (change.kind === "claim") await h.ctrl.updateClaim(change.obj);
      else await h.ctrl.updateVolume(change.obj);
    } catch (err) {
      // Version conflicts are expected: the next round retries from fresher objects.
      if (!isConflict(err)) throw err;
    }
  }
  h.check();
  return h;
}

/**
 * The controller driven as its informers and queues would (upstream TestControllerSync, set 5): the
 * API's objects are the informers' content, each write is a watch event that enqueues the object's
 * key, and a key is processed as upstream's syncClaimByKey/syncVolumeByKey do (updateX with the
 * informer's object, or deleteX with the cached one when the informer no longer has it). `act`
 * changes the API (and may drainQueues) between the initial processing and a final resync.
 */
export async function runEventDrivenTest(
  test: BinderTest,
  act: (h: Harness) => Promise<void> | void,
  env: Environment = {},
): Promise<Harness> {
  const h = new Harness({ ...test, initialVolumes: [], initialClaims: [] }, env);
  h.informerHasClaims = true;
  for (const volume of test.initialVolumes) h.api.addVolume(volume);
  for (const claim of test.initialClaims) h.api.addClaim(claim);
  h.ctrl.initializeCaches([...h.api.volumes.values()], [...h.api.claims.values()]);
  h.api.onChange = (kind, key) => (kind === "claim" ? h.enqueuedClaims : h.enqueuedVolumes).push(key);
  h.ctrl.resync();
  await drainQueues(h);
  await act(h);
  await drainQueues(h);
  h.ctrl.resync();
  await drainQueues(h);
  h.check();
  return h;
}

/** Processes enqueued keys, and what their syncs enqueue, until both queues are empty. */
export async function drainQueues(h: Harness): Promise<void> {
  for (let round = 1; ; round++) {
    assert.ok(round <= 1000, "too many iterations");
    await h.ctrl.waitForOperations();
    const claimKey = h.enqueuedClaims.shift();
    const volumeName = claimKey === undefined ? h.enqueuedVolumes.shift() : undefined;
    if (claimKey === undefined && volumeName === undefined) return;
    h.clock.advance(600);
    try {
      if (claimKey !== undefined) {
        const claim = h.api.claims.get(claimKey);
        const cached = h.ctrl.cachedClaim(claimKey);
        if (claim) await h.ctrl.updateClaim(structuredClone(claim));
        else if (cached) h.ctrl.deleteClaim(cached);
      } else if (volumeName !== undefined) {
        const volume = h.api.volumes.get(volumeName);
        const cached = h.ctrl.cachedVolume(volumeName);
        if (volume) await h.ctrl.updateVolume(structuredClone(volume));
        else if (cached) h.ctrl.deleteVolume(cached);
      }
    } catch {
      // A failed sync is retried by the queue; here, by the final resync.
    }
  }
}
