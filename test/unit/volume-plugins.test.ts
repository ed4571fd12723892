import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { mkdir, mkdtemp, readdir, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import {
  ApiException,
  type CoreV1Event,
  type V1PersistentVolume,
  type V1PersistentVolumeClaim,
  type V1Pod,
} from "@kubernetes/client-node";
import { pino } from "pino";
import { FakeClock } from "../../src/runtime/clock.js";
import { FencedError, WriteGate } from "../../src/runtime/write-gate.js";
import { defaultPlugins } from "../../src/volume/default-plugins.js";
import { ExampleNfsPlugin } from "../../src/volume/example/example-plugin.js";
import { HOST_PATH_PLUGIN_NAME, HostPathPlugin } from "../../src/volume/hostpath/plugin.js";
import {
  isAttachable,
  isDeletable,
  isProvisionable,
  isRecyclable,
  specFromPersistentVolume,
  specFromVolume,
  specName,
  splitUniqueVolumeName,
  uniqueVolumeName,
  type AttachableVolumePlugin,
  type ProvisionOptions,
  type VolumePlugin,
  type VolumeSpec,
} from "../../src/volume/plugin.js";
import {
  NoPluginMatchedError,
  VolumePluginManager,
  type DynamicPluginProber,
  type ProbeEvent,
} from "../../src/volume/plugin-manager.js";
import {
  newRecyclerPodTemplate,
  recycleVolumeByWatchingPodUntilCompletion,
  recyclerTimeoutSeconds,
  type RecyclerPodApi,
} from "../../src/volume/recycler.js";

const silent = pino({ level: "silent" });

/** A plugin supporting PVs whose nfs.server is `server`. */
function nfsPlugin(name: string, server = "nas", extra: object = {}): VolumePlugin {
  return {
    name,
    canSupport: (spec) => spec.persistentVolume?.spec?.nfs?.server === server,
    ...extra,
  };
}

function nfsSpec(server = "nas"): VolumeSpec {
  return specFromPersistentVolume({ metadata: { name: "pv-nfs" }, spec: { nfs: { server, path: "/x" } } });
}

function attachable(name: string, canAttach: boolean): AttachableVolumePlugin {
  const none = () => {
    throw new Error("unused");
  };
  return {
    name,
    canSupport: (spec) => spec.volume?.csi?.driver === name,
    getVolumeName: () => "vol",
    canAttach: () => canAttach,
    newAttacher: none,
    newDetacher: none,
  };
}

function pvc(overrides: Partial<NonNullable<V1PersistentVolumeClaim["spec"]>> = {}): V1PersistentVolumeClaim {
  return {
    metadata: { name: "claim", namespace: "default", uid: "uid-1" },
    spec: { accessModes: ["ReadWriteMany"], resources: { requests: { storage: "3Gi" } }, ...overrides },
  };
}

function provisionOptions(claim = pvc()): ProvisionOptions {
  return { pvName: "pvc-uid-1", pvc: claim, reclaimPolicy: "Retain", mountOptions: [], parameters: {} };
}

class ScriptedProber implements DynamicPluginProber {
  inits = 0;
  pending: ProbeEvent[][] = [];
  fail: Error | undefined;
  init(): Promise<void> {
    this.inits++;
    return Promise.resolve();
  }
  probe(): Promise<ProbeEvent[]> {
    if (this.fail) return Promise.reject(this.fail);
    return Promise.resolve(this.pending.shift() ?? []);
  }
}

/** A ScriptedProber that says when a probe may find something. */
class TellingProber extends ScriptedProber {
  needed: (() => void) | undefined;
  onProbeNeeded(listener: () => void): void {
    this.needed = listener;
  }
}

describe("VolumeSpec helpers", () => {
  test("names, unique volume names and type guards", () => {
    assert.equal(specName(nfsSpec()), "pv-nfs");
    assert.equal(specName(specFromVolume({ name: "data", emptyDir: {} })), "data");
    assert.equal(uniqueVolumeName("kubernetes.io/csi", "drv^vol-1"), "kubernetes.io/csi/drv^vol-1");
    assert.deepEqual(splitUniqueVolumeName("kubernetes.io/csi/drv^a/b"), {
      pluginName: "kubernetes.io/csi",
      volumeName: "drv^a/b",
    });
    assert.throws(() => splitUniqueVolumeName("kubernetes.io/csi"), /cannot split volume unique name/);
    const hostPath = new HostPathPlugin({ provisioningEnabled: false, pods: new FakePods() });
    assert.ok(isProvisionable(hostPath) && isDeletable(hostPath) && isRecyclable(hostPath));
    assert.equal(isAttachable(hostPath), false);
    assert.ok(isAttachable(attachable("a.io/x", true)));
    assert.equal(isProvisionable(nfsPlugin("a.io/nfs")), false);
  });
});

describe("VolumePluginManager", () => {
  test("whenProbeNeeded waits for a prober to say a probe may find something; at once for one that cannot", async () => {
    const m = new VolumePluginManager(silent);
    const telling = new TellingProber();
    await m.addProber(telling);
    const abort = new AbortController();
    let woken = false;
    const waiting = m.whenProbeNeeded(abort.signal).then(() => (woken = true));
    await new Promise(setImmediate);
    assert.equal(woken, false, "nothing to probe");
    telling.needed?.();
    await waiting;
    telling.needed?.();
    await m.whenProbeNeeded(abort.signal); // said before the wait
    await m.refreshProbedPlugins();
    const aborted = m.whenProbeNeeded(abort.signal);
    abort.abort(new Error("stopped"));
    await assert.rejects(aborted, /stopped/);
    await assert.rejects(m.whenProbeNeeded(abort.signal), /stopped/, "already aborted: no wait");
    await m.addProber(new ScriptedProber());
    await m.whenProbeNeeded(new AbortController().signal); // polled from now on
  });

  test("register refuses duplicate and invalid names and then adds none of the batch", () => {
    const m = new VolumePluginManager(silent);
    m.register([nfsPlugin("a.io/one")]);
    const register =
      (...names: string[]) =>
      () => {
        m.register(names.map((n) => nfsPlugin(n)));
      };
    assert.throws(
      register("a.io/two", "a.io/one"),
      /volume plugin "a.io\/one" was registered more than once/,
    );
    assert.throws(register("x.io/dup", "x.io/dup"), /more than once/);
    assert.throws(register("a.io/three", "Bad Name/x"), /volume plugin has invalid name: "Bad Name\/x"/);
    assert.throws(() => m.findPluginByName("a.io/two"), NoPluginMatchedError);
    assert.throws(() => m.findPluginByName("a.io/three"), NoPluginMatchedError);
    assert.equal(m.findPluginByName("a.io/one").name, "a.io/one");
  });

  test("findPluginBySpec needs exactly one plugin to support the spec", () => {
    const m = new VolumePluginManager(silent);
    assert.throws(() => m.findPluginBySpec(nfsSpec()), {
      name: "NoPluginMatchedError",
      message: "no volume plugin matched",
    });
    m.register([nfsPlugin("a.io/nfs"), nfsPlugin("b.io/other", "other")]);
    assert.equal(m.findPluginBySpec(nfsSpec()).name, "a.io/nfs");
    m.register([nfsPlugin("c.io/nfs")]);
    assert.throws(() => m.findPluginBySpec(nfsSpec()), {
      message: "multiple volume plugins matched: a.io/nfs,c.io/nfs",
    });
  });

  test("capability lookups by name and spec", () => {
    const m = new VolumePluginManager(silent);
    const example = new ExampleNfsPlugin("nas", {
      createExport: () => Promise.resolve(""),
      deleteExport: () => Promise.resolve(),
    });
    m.register([example, nfsPlugin("b.io/plain", "plain")]);
    assert.equal(m.findProvisionablePluginByName("example.com/nfs"), example);
    assert.equal(m.findDeletablePluginByName("example.com/nfs"), example);
    assert.equal(m.findDeletablePluginBySpec(nfsSpec()), example);
    assert.throws(() => m.findProvisionablePluginByName("kubernetes.io/gce-pd"), {
      message: "no volume plugin matched name: kubernetes.io/gce-pd",
    });
    assert.throws(
      () => m.findProvisionablePluginByName("b.io/plain"),
      /no provisionable volume plugin matched/,
    );
    assert.throws(() => m.findDeletablePluginBySpec(nfsSpec("plain")), /no deletable volume plugin matched/);
    assert.throws(() => m.findRecyclablePluginBySpec(nfsSpec()), /no recyclable volume plugin matched/);
  });

  test("findAttachablePluginBySpec: undefined unless attachable and canAttach", () => {
    const m = new VolumePluginManager(silent);
    m.register([attachable("a.io/yes", true), attachable("a.io/no", false), nfsPlugin("a.io/nfs")]);
    const csi = (driver: string) => specFromVolume({ name: "v", csi: { driver } });
    assert.equal(m.findAttachablePluginBySpec(csi("a.io/yes"))?.name, "a.io/yes");
    assert.equal(m.findAttachablePluginBySpec(csi("a.io/no")), undefined);
    assert.equal(m.findAttachablePluginBySpec(nfsSpec()), undefined);
    assert.throws(() => m.findAttachablePluginBySpec(csi("a.io/none")), NoPluginMatchedError);
    assert.equal(m.findAttachablePluginByName("a.io/no")?.name, "a.io/no");
    assert.equal(m.findAttachablePluginByName("a.io/nfs"), undefined);
  });

  test("attachablePluginFor: findAttachablePluginBySpec's answers, undefined where it throws", () => {
    const m = new VolumePluginManager(silent);
    m.register([attachable("a.io/yes", true), attachable("a.io/no", false), nfsPlugin("a.io/nfs")]);
    const csi = (driver: string) => specFromVolume({ name: "v", csi: { driver } });
    assert.equal(m.attachablePluginFor(csi("a.io/yes"))?.name, "a.io/yes");
    assert.equal(m.attachablePluginFor(csi("a.io/no")), undefined);
    assert.equal(m.attachablePluginFor(nfsSpec()), undefined);
    assert.equal(m.attachablePluginFor(csi("a.io/none")), undefined, "no plugin");
    m.register([
      { ...attachable("a.io/also", true), canSupport: (spec) => spec.volume?.csi?.driver === "a.io/yes" },
    ]);
    assert.throws(() => m.findAttachablePluginBySpec(csi("a.io/yes")), /multiple volume plugins matched/);
    assert.equal(m.attachablePluginFor(csi("a.io/yes")), undefined, "several plugins");
  });

  test("probed plugins come and go with refreshProbedPlugins", async () => {
    const m = new VolumePluginManager(silent);
    m.register([nfsPlugin("a.io/static", "static")]);
    const prober = new ScriptedProber();
    prober.pending.push([{ op: "add", plugin: nfsPlugin("flexvolume-v/one") }]);
    await m.addProber(prober);
    assert.equal(prober.inits, 1);
    assert.equal(m.findPluginBySpec(nfsSpec()).name, "flexvolume-v/one");

    const replacement = nfsPlugin("flexvolume-v/one");
    assert.equal(await m.refreshProbedPlugins(), false, "nothing probed: nothing changed");
    prober.pending.push([{ op: "update", plugin: replacement }]);
    assert.equal(await m.refreshProbedPlugins(), true);
    assert.equal(m.findPluginByName("flexvolume-v/one"), replacement);

    prober.pending.push([{ op: "add", plugin: nfsPlugin("a.io/static", "elsewhere") }]);
    await m.refreshProbedPlugins();
    assert.throws(() => m.findPluginByName("a.io/static"), /multiple volume plugins matched/);

    prober.pending.push([
      { op: "remove", pluginName: "flexvolume-v/one" },
      { op: "remove", pluginName: "a.io/static" },
    ]);
    assert.equal(await m.refreshProbedPlugins(), true);
    assert.throws(() => m.findPluginBySpec(nfsSpec()), NoPluginMatchedError);
    assert.equal(m.findPluginByName("a.io/static").canSupport(nfsSpec("static")), true);
  });

  test("refreshes apply in call order; probe errors and invalid probed names are logged, not thrown", async () => {
    const logged: string[] = [];
    const m = new VolumePluginManager(
      pino({ level: "error" }, { write: (line: string) => logged.push(line) }),
    );
    const gate = Promise.withResolvers<undefined>();
    const rounds: (() => Promise<ProbeEvent[]>)[] = [
      () => Promise.resolve([]),
      async () => {
        await gate.promise;
        return [{ op: "add", plugin: nfsPlugin("flexvolume-v/x") }];
      },
      () => Promise.resolve([{ op: "remove", pluginName: "flexvolume-v/x" }]),
    ];
    await m.addProber({
      init: () => Promise.resolve(),
      probe: () => rounds.shift()?.() ?? Promise.resolve([]),
    });
    // The slow add is probed first, so the later removal must be applied after it.
    const first = m.refreshProbedPlugins();
    const second = m.refreshProbedPlugins();
    gate.resolve(undefined);
    await Promise.all([first, second]);
    assert.throws(() => m.findPluginByName("flexvolume-v/x"), NoPluginMatchedError);

    const failing = new ScriptedProber();
    failing.fail = new Error("driver dir unreadable");
    await m.addProber(failing);
    const bad = new ScriptedProber();
    bad.pending.push([{ op: "add", plugin: nfsPlugin("not valid/name/") }]);
    await m.addProber(bad);
    assert.throws(() => m.findPluginBySpec(nfsSpec()), NoPluginMatchedError);
    assert.ok(logged.some((l) => l.includes("driver dir unreadable")));
    assert.ok(logged.some((l) => l.includes("invalid name")));

    await assert.rejects(
      m.addProber({ init: () => Promise.reject(new Error("no dir")), probe: () => Promise.resolve([]) }),
      /no dir/,
    );
  });
});

describe("hostPath provisioner and deleter", () => {
  let base: string;
  before(async () => {
    base = await mkdtemp(join(tmpdir(), "hostpath-pv-"));
  });
  after(async () => {
    await rm(base, { recursive: true, force: true });
  });
  const plugin = (provisioningEnabled = true) =>
    new HostPathPlugin({ provisioningEnabled, baseDir: base, pods: new FakePods() });

  test("canSupport PVs and inline volumes with hostPath only", () => {
    const p = plugin();
    assert.ok(p.canSupport(specFromPersistentVolume({ spec: { hostPath: { path: "/tmp/x" } } })));
    assert.ok(p.canSupport(specFromVolume({ name: "v", hostPath: { path: "/data" } })));
    assert.equal(p.canSupport(nfsSpec()), false);
    assert.equal(p.name, HOST_PATH_PLUGIN_NAME);
    assert.equal(p.supportsMountOptions, false);
  });

  test("newProvisioner refuses while provisioning is disabled", () => {
    assert.throws(() => plugin(false).newProvisioner(provisionOptions()), {
      message: 'provisioning in volume plugin "kubernetes.io/host-path" is disabled',
    });
  });

  test("provision creates a directory under the base and a PV shaped from the claim", async () => {
    const { metadata, spec } = await plugin().newProvisioner(provisionOptions()).provision();
    assert.ok(metadata && spec);
    assert.equal(metadata.name, "pvc-uid-1");
    assert.deepEqual(metadata.annotations, { "kubernetes.io/createdby": "hostpath-dynamic-provisioner" });
    assert.deepEqual(spec.capacity, { storage: "3Gi" });
    assert.deepEqual(spec.accessModes, ["ReadWriteMany"]);
    assert.equal(spec.persistentVolumeReclaimPolicy, "Retain");
    assert.equal(spec.claimRef, undefined, "claimRef is the binder's");
    const path = spec.hostPath?.path ?? "";
    assert.match(path, new RegExp(`^${base}/[0-9a-f-]{36}$`));
    const dir = await stat(path);
    assert.ok(dir.isDirectory());
    assert.equal(dir.mode & 0o027, 0, "created 0750 (less under a stricter umask)");

    const other = await plugin().newProvisioner(provisionOptions()).provision();
    assert.notEqual(other.spec?.hostPath?.path, path);
  });

  test("provision defaults access modes to ReadWriteOnce and refuses block claims", async () => {
    const pv = await plugin()
      .newProvisioner(provisionOptions(pvc({ accessModes: [] })))
      .provision();
    assert.deepEqual(pv.spec?.accessModes, ["ReadWriteOnce"]);
    await assert.rejects(
      plugin()
        .newProvisioner(provisionOptions(pvc({ volumeMode: "Block" })))
        .provision(),
      {
        message: "kubernetes.io/host-path does not support block volume provisioning",
      },
    );
  });

  test("in shadow mode the PV is described but no directory made, and the deleter removes nothing", async () => {
    const shadow = new HostPathPlugin({
      provisioningEnabled: true,
      baseDir: base,
      pods: new FakePods(),
      shadow: true,
    });
    const pv = await shadow.newProvisioner(provisionOptions()).provision();
    const path = pv.spec?.hostPath?.path ?? "";
    assert.match(path, new RegExp(`^${base}/[0-9a-f-]{36}$`));
    assert.equal(existsSync(path), false);
    const kept = join(base, "kept");
    await mkdir(kept, { recursive: true });
    const del = (p: string) =>
      shadow.newDeleter(specFromPersistentVolume({ spec: { hostPath: { path: p } } })).delete();
    await del(kept);
    assert.ok(existsSync(kept));
    // Checked as for real: a path outside the base is still refused.
    await assert.rejects(del("/etc"), /host_path deleter only deletes directories under/);
  });

  test("a leader creates and removes directories only when its write gate admits it", async () => {
    const clock = new FakeClock();
    const gate = new WriteGate(clock, 10_000);
    const gated = new HostPathPlugin({
      provisioningEnabled: true,
      baseDir: base,
      pods: new FakePods(),
      gate,
    });
    const victim = join(base, "fenced");
    await mkdir(victim, { recursive: true });
    const del = () =>
      gated.newDeleter(specFromPersistentVolume({ spec: { hostPath: { path: victim } } })).delete();
    const entries = async () => (await readdir(base)).sort();
    const before = await entries();
    // Not leading: refused, nothing touched.
    await assert.rejects(del(), FencedError);
    await assert.rejects(gated.newProvisioner(provisionOptions()).provision(), FencedError);
    assert.deepEqual(await entries(), before);

    const term = new AbortController();
    gate.renewed(clock.now());
    gate.lead(term.signal);
    // Past the renew deadline: the removal waits for a renewal; the term ends instead.
    clock.advance(10_000);
    const waiting = del();
    await new Promise((resolve) => setImmediate(resolve));
    assert.ok(existsSync(victim));
    term.abort(new Error("lease lost"));
    await assert.rejects(waiting, /no longer leading \(lease lost\)/);
    assert.ok(existsSync(victim), "a fenced leader's rm -rf removed nothing");

    const next = new AbortController();
    gate.renewed(clock.now());
    gate.lead(next.signal);
    await del();
    assert.equal(existsSync(victim), false);
    const pv = await gated.newProvisioner(provisionOptions()).provision();
    assert.ok(existsSync(pv.spec?.hostPath?.path ?? ""));
  });

  test("the deleter removes directories strictly inside the base and nothing else", async () => {
    const victim = join(base, "victim");
    await mkdir(join(victim, "sub"), { recursive: true });
    await writeFile(join(victim, "sub", "file"), "data");
    const del = (path: string) =>
      plugin()
        .newDeleter(specFromPersistentVolume({ spec: { hostPath: { path } } }))
        .delete();
    for (const outside of ["/etc", base, `${base}/../x`, `${base}-sibling/x`, "relative/dir"]) {
      await assert.rejects(del(outside), /host_path deleter only deletes directories under/, outside);
    }
    assert.ok(existsSync(victim));
    await del(`${victim}/`);
    assert.equal(existsSync(victim), false);
    await del(victim); // already gone: success, so a retried delete completes
    assert.throws(() => plugin().newDeleter(nfsSpec()), /hostPath is not set/);
  });
});

interface PodFakeOptions {
  /** Phases read in turn, the last repeating; "gone" answers NotFound. */
  phases?: string[];
  message?: string;
  createError?: Error;
  deleteError?: Error;
  events?: Partial<CoreV1Event>[];
}

/** The pod API with scripted phases; records what was created and deleted. */
class FakePods implements RecyclerPodApi {
  created: V1Pod[] = [];
  deleted: string[] = [];
  selectors: (string | undefined)[] = [];
  constructor(private readonly o: PodFakeOptions = {}) {}

  createNamespacedPod({ body }: { namespace: string; body: V1Pod }): Promise<V1Pod> {
    if (this.o.createError) return Promise.reject(this.o.createError);
    this.created.push(body);
    const created = structuredClone(body);
    (created.metadata ??= {}).uid = "pod-uid";
    return Promise.resolve(created);
  }
  readNamespacedPod({ name }: { name: string; namespace: string }): Promise<V1Pod> {
    const phase = this.o.phases && this.o.phases.length > 1 ? this.o.phases.shift() : this.o.phases?.[0];
    if (phase === "gone")
      return Promise.reject(new ApiException(404, "not found", { reason: "NotFound" }, {}));
    return Promise.resolve({
      metadata: { name },
      status: { phase: phase ?? "Pending", ...(this.o.message !== undefined && { message: this.o.message }) },
    });
  }
  deleteNamespacedPod({ name, namespace }: { name: string; namespace: string }): Promise<V1Pod> {
    this.deleted.push(`${namespace}/${name}`);
    if (this.o.deleteError) return Promise.reject(this.o.deleteError);
    return Promise.resolve({});
  }
  listNamespacedEvent({ fieldSelector }: { namespace: string; fieldSelector?: string }) {
    this.selectors.push(fieldSelector);
    const items = (this.o.events ?? []).map((e, i) => ({
      metadata: { name: `ev-${i}`, uid: `ev-uid-${i}` },
      involvedObject: {},
      ...e,
    }));
    return Promise.resolve({ items });
  }
}

function hostPathPV(storage?: string): V1PersistentVolume {
  return {
    metadata: { name: "pv-1" },
    spec: { hostPath: { path: "/tmp/hostpath_pv/abc" }, ...(storage && { capacity: { storage } }) },
  };
}

describe("hostPath recycler", () => {
  const recycler = (pods: FakePods, template?: V1Pod) =>
    new HostPathPlugin({
      provisioningEnabled: false,
      pods,
      recyclerPollIntervalMs: 1,
      recyclerPodTemplate: template,
    });

  test("the default template is upstream's scrubber", () => {
    assert.deepEqual(newRecyclerPodTemplate(), {
      metadata: { generateName: "pv-recycler-", namespace: "default" },
      spec: {
        activeDeadlineSeconds: 60,
        restartPolicy: "Never",
        volumes: [{ name: "vol" }],
        containers: [
          {
            name: "pv-recycler",
            image: "registry.k8s.io/build-image/debian-base:bookworm-v1.0.6",
            command: ["/bin/sh"],
            args: [
              "-c",
              'test -e /scrub && find /scrub -mindepth 1 -delete && test -z "$(ls -A /scrub)" || exit 1',
            ],
            volumeMounts: [{ name: "vol", mountPath: "/scrub" }],
          },
        ],
      },
    });
  });

  test("timeout is the larger of the minimum and increment × whole Gi", () => {
    assert.equal(recyclerTimeoutSeconds(60, 30, hostPathPV()), 60);
    assert.equal(recyclerTimeoutSeconds(60, 30, hostPathPV("1Gi")), 60);
    assert.equal(recyclerTimeoutSeconds(60, 30, hostPathPV("5Gi")), 150);
    assert.equal(recyclerTimeoutSeconds(60, 30, hostPathPV("2.5Gi")), 60);
    assert.equal(recyclerTimeoutSeconds(10, 30, hostPathPV("2.5Gi")), 60);
    assert.equal(recyclerTimeoutSeconds(60, 30, hostPathPV("10G")), 270); // 9.31 Gi
    assert.equal(recyclerTimeoutSeconds(60, 30, hostPathPV("1Ti")), 30720);
    assert.equal(recyclerTimeoutSeconds(60, 30, hostPathPV("garbage")), 60);
  });

  test("success: the pod is built from the template, watched until Succeeded and deleted", async () => {
    const pods = new FakePods({ phases: ["Pending", "Running", "Succeeded"] });
    const template = newRecyclerPodTemplate();
    const before = structuredClone(template);
    await recycler(pods, template).recycle(
      "pv-1",
      specFromPersistentVolume(hostPathPV("5Gi")),
      () => undefined,
    );
    const { metadata, spec } = pods.created[0]!;
    assert.deepEqual(metadata, { name: "recycler-for-pv-1", namespace: "default" });
    assert.equal(spec!.activeDeadlineSeconds, 150);
    assert.deepEqual(spec!.volumes, [{ name: "vol", hostPath: { path: "/tmp/hostpath_pv/abc" } }]);
    assert.deepEqual(spec!.containers, template.spec!.containers);
    assert.deepEqual(template, before, "the template is not modified");
    assert.deepEqual(pods.deleted, ["default/recycler-for-pv-1"]);
    assert.equal(pods.selectors[0], "involvedObject.name=recycler-for-pv-1,involvedObject.uid=pod-uid");
  });

  test("failure: the pod's message is returned, its events forwarded once, the pod deleted", async () => {
    const pods = new FakePods({
      phases: ["Running", "Running", "Failed"],
      message: "find: /scrub/x: Permission denied",
      events: [
        { type: "Normal", message: "Pulled image" },
        { type: "Warning", message: "BackOff" },
      ],
    });
    const seen: string[] = [];
    await assert.rejects(
      recycler(pods).recycle("pv-1", specFromPersistentVolume(hostPathPV()), (type, msg) =>
        seen.push(`${type} ${msg}`),
      ),
      { message: "failed to recycle volume: find: /scrub/x: Permission denied" },
    );
    assert.deepEqual(seen, ["Normal Pulled image", "Warning BackOff"]);
    assert.deepEqual(pods.deleted, ["default/recycler-for-pv-1"]);
  });

  test("a failed pod without message, and a pod deleted under the recycler", async () => {
    const spec = specFromPersistentVolume(hostPathPV());
    await assert.rejects(
      recycler(new FakePods({ phases: ["Failed"] })).recycle("pv-1", spec, () => undefined),
      {
        message: "failed to recycle volume: pod failed, pod.Status.Message unknown",
      },
    );
    await assert.rejects(
      recycler(new FakePods({ phases: ["Running", "gone"] })).recycle("pv-1", spec, () => undefined),
      {
        message: "failed to recycle volume: recycler pod was deleted",
      },
    );
  });

  test("an existing recycler pod is deleted and the attempt fails for a later retry", async () => {
    const pods = new FakePods({
      createError: new ApiException(409, "exists", { reason: "AlreadyExists" }, {}),
    });
    await assert.rejects(
      recycler(pods).recycle("pv-1", specFromPersistentVolume(hostPathPV()), () => undefined),
      {
        message: "old recycler pod found, will retry later",
      },
    );
    assert.deepEqual(pods.deleted, ["default/recycler-for-pv-1"]);
    const forbidden = new FakePods({
      createError: new ApiException(403, "forbidden", { message: "pods is forbidden" }, {}),
    });
    await assert.rejects(
      recycler(forbidden).recycle("pv-1", specFromPersistentVolume(hostPathPV()), () => undefined),
      {
        message: "unexpected error creating recycler pod: pods is forbidden",
      },
    );
    assert.deepEqual(forbidden.deleted, []);
  });

  test("success but the pod cannot be deleted is an error; a recycler error wins over it", async () => {
    const deleteError = new ApiException(500, "boom", { message: "etcd unavailable" }, {});
    const spec = specFromPersistentVolume(hostPathPV());
    await assert.rejects(
      recycler(new FakePods({ phases: ["Succeeded"], deleteError })).recycle("pv-1", spec, () => undefined),
      {
        message: "failed to delete recycler pod: etcd unavailable",
      },
    );
    await assert.rejects(
      recycler(new FakePods({ phases: ["Failed"], message: "scrub failed", deleteError })).recycle(
        "pv-1",
        spec,
        () => undefined,
      ),
      { message: "failed to recycle volume: scrub failed" },
    );
  });

  test("timeout and abort delete the pod and fail", async () => {
    const pods = new FakePods({ phases: ["Pending"] });
    const template = newRecyclerPodTemplate();
    await assert.rejects(
      recycleVolumeByWatchingPodUntilCompletion("pv-2", template, pods, () => undefined, {
        timeoutMs: 30,
        intervalMs: 5,
      }),
      /^Error: failed to recycle volume: timed out after 30 ms waiting for recycler pod default\/recycler-for-pv-2 to complete/,
    );
    assert.deepEqual(pods.deleted, ["default/recycler-for-pv-2"]);

    const aborted = new FakePods({ phases: ["Running"] });
    const controller = new AbortController();
    const run = recycler(aborted).recycle(
      "pv-3",
      specFromPersistentVolume(hostPathPV()),
      () => undefined,
      controller.signal,
    );
    controller.abort(new Error("shutting down"));
    await assert.rejects(run, { message: "failed to recycle volume: shutting down" });
    assert.deepEqual(aborted.deleted, ["default/recycler-for-pv-3"]);
  });

  test("a template without volumes is refused; non-hostPath specs are refused", async () => {
    assert.throws(
      () => recycler(new FakePods(), { spec: { containers: [] } }),
      /does not contain any volume/,
    );
    await assert.rejects(
      recycler(new FakePods()).recycle("pv-1", nfsSpec(), () => undefined),
      /hostPath is not set/,
    );
  });
});

describe("defaultPlugins and the example plugin", () => {
  test("the built-in list honours enableHostPathProvisioner and registers next to a user's plugin", async () => {
    const exports = new Map<string, string>();
    const example = new ExampleNfsPlugin("nas.example.com", {
      createExport: (name, bytes) => {
        exports.set(`/exports/${name}`, bytes);
        return Promise.resolve(`/exports/${name}`);
      },
      deleteExport: (path) => {
        exports.delete(path);
        return Promise.resolve();
      },
    });
    const m = new VolumePluginManager(silent);
    // It serves NFS sources, as the built-in NFS recycler does: it replaces that one (one plugin per spec).
    const builtIn = defaultPlugins({ enableHostPathProvisioner: false, pods: new FakePods() });
    m.register([...builtIn.filter((p) => p.name !== "kubernetes.io/nfs"), example]);

    assert.throws(
      () => m.findProvisionablePluginByName(HOST_PATH_PLUGIN_NAME).newProvisioner(provisionOptions()),
      /disabled/,
    );
    const options = { ...provisionOptions(), mountOptions: ["nfsvers=4.1"] };
    const pv = await m.findProvisionablePluginByName("example.com/nfs").newProvisioner(options).provision();
    assert.deepEqual(pv.spec, {
      capacity: { storage: "3Gi" },
      accessModes: ["ReadWriteMany"],
      persistentVolumeReclaimPolicy: "Retain",
      mountOptions: ["nfsvers=4.1"],
      nfs: { server: "nas.example.com", path: "/exports/pvc-uid-1" },
    });
    assert.deepEqual(exports, new Map([["/exports/pvc-uid-1", "3Gi"]]));

    await m
      .findDeletablePluginBySpec(specFromPersistentVolume(pv))
      .newDeleter(specFromPersistentVolume(pv))
      .delete();
    assert.equal(exports.size, 0);

    const enabled = defaultPlugins({ enableHostPathProvisioner: true, pods: new FakePods() });
    assert.deepEqual(
      enabled.map((p) => p.name),
      [HOST_PATH_PLUGIN_NAME, "kubernetes.io/nfs", "kubernetes.io/fc", "kubernetes.io/iscsi"],
    );
  });
});
