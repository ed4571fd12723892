import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { ApiException, type V1CSIDriver, type V1VolumeAttachment } from "@kubernetes/client-node";
import { pino } from "pino";
import type { VolumeAttachmentApi } from "../../src/volume/csi/attacher.js";
import { attachmentName } from "../../src/volume/csi/attachment-name.js";
import { translateInTreeSpecToCSI } from "../../src/volume/csimigration/plugin-manager.js";
import { CSIPlugin, type CSIDriverLister } from "../../src/volume/csi/plugin.js";
import { defaultPlugins } from "../../src/volume/default-plugins.js";
import { HOST_PATH_PLUGIN_NAME } from "../../src/volume/hostpath/plugin.js";
import {
  specFromPersistentVolume,
  specFromVolume,
  uniqueVolumeName,
  type VolumeSpec,
} from "../../src/volume/plugin.js";
import { VolumePluginManager } from "../../src/volume/plugin-manager.js";
import type { RecyclerPodApi } from "../../src/volume/recycler.js";

const DRIVER = "ebs.csi.aws.com";
const NODE = "node-1";
const VA_NAME = attachmentName("vol-1", DRIVER, NODE);

function csiSpec(handle = "vol-1", driver = DRIVER): VolumeSpec {
  return specFromPersistentVolume({
    metadata: { name: "pv-1" },
    spec: {
      capacity: { storage: "1Gi" },
      accessModes: ["ReadWriteOnce"],
      csi: { driver, volumeHandle: handle },
    },
  });
}

const inlineSpec = specFromVolume({ name: "scratch", csi: { driver: "inline.example.com" } });

function apiError(code: number, reason: string, message: string): ApiException<string> {
  return new ApiException(code, message, JSON.stringify({ kind: "Status", code, reason, message }), {});
}

/** An in-memory VolumeAttachment API; `onRead` plays the external-attacher between polls. */
class FakeVolumeAttachments implements VolumeAttachmentApi {
  readonly objects = new Map<string, V1VolumeAttachment>();
  readonly created: V1VolumeAttachment[] = [];
  onRead: (va: V1VolumeAttachment) => void = () => undefined;
  createError: Error | undefined;

  createVolumeAttachment({ body }: { body: V1VolumeAttachment }): Promise<V1VolumeAttachment> {
    if (this.createError) return Promise.reject(this.createError);
    const name = body.metadata?.name ?? "";
    if (this.objects.has(name))
      return Promise.reject(apiError(409, "AlreadyExists", `"${name}" already exists`));
    this.created.push(structuredClone(body));
    this.objects.set(name, structuredClone(body));
    return Promise.resolve(body);
  }

  /** The informer cache's view: the same objects, read the way the attacher polls. */
  readonly lister = {
    get: (name: string): V1VolumeAttachment | undefined => {
      const va = this.objects.get(name);
      if (!va) return undefined;
      this.onRead(va);
      return structuredClone(va);
    },
  };

  readVolumeAttachment({ name }: { name: string }): Promise<V1VolumeAttachment> {
    const va = this.objects.get(name);
    if (!va) return Promise.reject(apiError(404, "NotFound", `"${name}" not found`));
    this.onRead(va);
    return Promise.resolve(structuredClone(va));
  }

  deleteVolumeAttachment({ name }: { name: string }): Promise<V1VolumeAttachment> {
    const va = this.objects.get(name);
    if (!va) return Promise.reject(apiError(404, "NotFound", `"${name}" not found`));
    if (va.metadata?.finalizers?.length) va.metadata.deletionTimestamp = new Date();
    else this.objects.delete(name);
    return Promise.resolve(va);
  }
}

function drivers(...objects: V1CSIDriver[]): CSIDriverLister {
  const byName = new Map(objects.map((d) => [d.metadata?.name ?? "", d]));
  return { get: (name) => byName.get(name) };
}

function csiDriver(name: string, attachRequired?: boolean): V1CSIDriver {
  return { metadata: { name }, spec: attachRequired === undefined ? {} : { attachRequired } };
}

function plugin(api = new FakeVolumeAttachments(), lister = drivers(), timeoutMs = 2_000): CSIPlugin {
  return new CSIPlugin({
    volumeAttachments: api,
    volumeAttachmentLister: api.lister,
    csiDrivers: lister,
    timeoutMs,
  });
}

// The hostPath plugin only uses it to recycle, which these tests never do.
const noPods = {} as RecyclerPodApi;

describe("CSI plugin names", () => {
  test("VolumeAttachment name matches upstream getAttachmentName (derived vector)", () => {
    assert.equal(VA_NAME, "csi-58932ddfc9a6504f794af09a26429db947138ba3d683dee3d975aa932cb39f48");
  });

  test("volume name is driver^handle and the unique name kubernetes.io/csi/driver^handle", () => {
    const p = plugin();
    assert.equal(p.getVolumeName(csiSpec()), "ebs.csi.aws.com^vol-1");
    assert.equal(
      uniqueVolumeName(p.name, p.getVolumeName(csiSpec())),
      "kubernetes.io/csi/ebs.csi.aws.com^vol-1",
    );
  });

  test("inline CSI volumes are supported but have no volume name", () => {
    const p = plugin();
    assert.equal(p.canSupport(inlineSpec), true);
    assert.equal(p.canSupport(csiSpec()), true);
    assert.equal(p.canSupport(specFromVolume({ name: "h", hostPath: { path: "/x" } })), false);
    assert.throws(() => p.getVolumeName(inlineSpec), {
      message:
        "kubernetes.io/csi: plugin.GetVolumeName failed to extract volume source from spec: " +
        "unexpected api.CSIVolumeSource found in volume.Spec",
    });
  });
});

describe("CSI canAttach", () => {
  test("attaches when there is no CSIDriver object or it requires attach", () => {
    assert.equal(plugin().canAttach(csiSpec()), true);
    assert.equal(plugin(undefined, drivers(csiDriver(DRIVER, true))).canAttach(csiSpec()), true);
    assert.equal(plugin(undefined, drivers(csiDriver(DRIVER))).canAttach(csiSpec()), true);
  });

  test("skips attach for attachRequired=false and for inline (ephemeral) volumes", () => {
    assert.equal(plugin(undefined, drivers(csiDriver(DRIVER, false))).canAttach(csiSpec()), false);
    assert.equal(plugin().canAttach(inlineSpec), false);
  });

  test("the plugin manager finds it attachable only when the driver requires attach", () => {
    const lister = new Map<string, V1CSIDriver>();
    const vas = new FakeVolumeAttachments();
    const m = new VolumePluginManager(pino({ level: "silent" }));
    m.register(
      defaultPlugins({
        enableHostPathProvisioner: false,
        pods: noPods,
        csi: {
          volumeAttachments: vas,
          volumeAttachmentLister: vas.lister,
          csiDrivers: { get: (n) => lister.get(n) },
        },
      }),
    );
    assert.equal(m.findAttachablePluginBySpec(csiSpec())?.name, "kubernetes.io/csi");
    lister.set(DRIVER, csiDriver(DRIVER, false));
    assert.equal(m.findAttachablePluginBySpec(csiSpec()), undefined);
    assert.equal(m.findAttachablePluginByName("kubernetes.io/csi")?.name, "kubernetes.io/csi");
  });

  test("defaultPlugins leaves the CSI plugin out without its dependencies", () => {
    const names = defaultPlugins({ enableHostPathProvisioner: false, pods: noPods }).map((p) => p.name);
    assert.deepEqual(names, [
      HOST_PATH_PLUGIN_NAME,
      "kubernetes.io/nfs",
      "kubernetes.io/fc",
      "kubernetes.io/iscsi",
    ]);
  });
});

describe("CSI attach", () => {
  test("creates the VolumeAttachment and resolves with an empty device path once attached", async () => {
    const api = new FakeVolumeAttachments();
    let reads = 0;
    api.onRead = (va) => {
      if (++reads === 2) va.status = { attached: true, attachmentMetadata: { device: "/dev/xvdb" } };
    };
    assert.equal(await plugin(api).newAttacher().attach(csiSpec(), NODE), "");
    assert.deepEqual(api.created, [
      {
        metadata: { name: VA_NAME },
        spec: { attacher: DRIVER, nodeName: NODE, source: { persistentVolumeName: "pv-1" } },
      },
    ]);
    // Again: the cache holds it, already attached, so nothing is written.
    api.createError = new Error("no write expected");
    assert.equal(await plugin(api).newAttacher().attach(csiSpec(), NODE), "");
    assert.equal(api.created.length, 1);
    // In shadow mode the create is still sent: it is kvc's decision to compare (answered 409 there).
    api.createError = undefined;
    const shadow = new CSIPlugin({
      volumeAttachments: api,
      volumeAttachmentLister: api.lister,
      csiDrivers: drivers(),
      timeoutMs: 2_000,
      shadow: true,
    });
    let sent = 0;
    const create = api.createVolumeAttachment.bind(api);
    api.createVolumeAttachment = (req) => (sent++, create(req));
    assert.equal(await shadow.newAttacher().attach(csiSpec(), NODE), "");
    assert.equal(sent, 1);
  });

  test("a migrated inline volume's VolumeAttachment carries its translated spec, a PV's its name", async () => {
    const api = new FakeVolumeAttachments();
    api.onRead = (va) => (va.status = { attached: true });
    const attacher = plugin(api).newAttacher();
    await attacher.attach(
      translateInTreeSpecToCSI(
        specFromVolume({ name: "v", awsElasticBlockStore: { volumeID: "vol-1" } }),
        "ns",
      ),
      NODE,
    );
    await attacher.attach(
      translateInTreeSpecToCSI(
        specFromPersistentVolume({
          metadata: { name: "pv-2" },
          spec: { awsElasticBlockStore: { volumeID: "vol-2" } },
        }),
        "ns",
      ),
      NODE,
    );
    assert.deepEqual(
      api.created.map((va) => [va.metadata?.name, va.spec.source]),
      [
        [
          VA_NAME,
          {
            inlineVolumeSpec: {
              csi: {
                driver: DRIVER,
                volumeHandle: "vol-1",
                readOnly: false,
                fsType: "",
                volumeAttributes: { partition: "0" },
              },
              accessModes: ["ReadWriteOnce"],
              volumeMode: "Filesystem",
            },
          },
        ],
        [attachmentName("vol-2", DRIVER, NODE), { persistentVolumeName: "pv-2" }],
      ],
    );
  });

  test("an attachment created meanwhile by someone else (AlreadyExists) is this one", async () => {
    const api = new FakeVolumeAttachments();
    const hidden = new FakeVolumeAttachments(); // a cache that has not seen the object yet
    api.objects.set(VA_NAME, {
      metadata: { name: VA_NAME },
      spec: { attacher: DRIVER, nodeName: NODE, source: { persistentVolumeName: "pv-1" } },
      status: { attached: true },
    });
    let reads = 0;
    const lister = { get: (name: string) => (++reads > 1 ? api.lister.get(name) : hidden.lister.get(name)) };
    const p = new CSIPlugin({
      volumeAttachments: api,
      volumeAttachmentLister: lister,
      csiDrivers: drivers(),
      timeoutMs: 2_000,
    });
    assert.equal(await p.newAttacher().attach(csiSpec(), NODE), "");
    assert.equal(api.created.length, 0);
  });

  test("rejects with the external-attacher's attachError verbatim", async () => {
    const api = new FakeVolumeAttachments();
    api.onRead = (va) => {
      va.status = { attached: false, attachError: { message: "boom" } };
    };
    await assert.rejects(plugin(api).newAttacher().attach(csiSpec(), NODE), { message: "boom" });
  });

  test("fails fast when the attachment is being deleted or was deleted", async () => {
    const api = new FakeVolumeAttachments();
    api.onRead = (va) => {
      (va.metadata ??= {}).deletionTimestamp = new Date();
    };
    await assert.rejects(plugin(api).newAttacher().attach(csiSpec(), NODE), {
      message: "volume attachment is being deleted",
    });

    const gone = new FakeVolumeAttachments();
    // Read once as created, then gone: someone deleted it while we waited.
    gone.onRead = () => gone.objects.delete(VA_NAME);
    await assert.rejects(plugin(gone).newAttacher().attach(csiSpec(), NODE), {
      message: "volume attachment has been deleted",
    });
  });

  test("times out with upstream's message", async () => {
    await assert.rejects(
      plugin(new FakeVolumeAttachments(), drivers(), 50).newAttacher().attach(csiSpec(), NODE),
      {
        message:
          "timed out waiting for external-attacher of ebs.csi.aws.com CSI driver to attach volume vol-1",
      },
    );
  });

  test("reports create failures and non-persistent specs with upstream's prefixes", async () => {
    const api = new FakeVolumeAttachments();
    api.createError = apiError(403, "Forbidden", "volumeattachments is forbidden");
    await assert.rejects(plugin(api).newAttacher().attach(csiSpec(), NODE), {
      message: "kubernetes.io/csi: attacher.Attach failed: volumeattachments is forbidden",
    });
    await assert.rejects(plugin().newAttacher().attach(inlineSpec, NODE), {
      message:
        "kubernetes.io/csi: attacher.Attach failed to get CSIPersistentVolumeSource: " +
        "unexpected api.CSIVolumeSource found in volume.Spec",
    });
  });

  test("stops waiting when aborted", async () => {
    const controller = new AbortController();
    const attaching = plugin().newAttacher().attach(csiSpec(), NODE, controller.signal);
    controller.abort(new Error("shutting down"));
    await assert.rejects(attaching, { message: "shutting down" });
  });
});

describe("CSI detach", () => {
  function attached(api: FakeVolumeAttachments, finalizers?: string[]): void {
    api.objects.set(VA_NAME, {
      metadata: { name: VA_NAME, ...(finalizers && { finalizers }) },
      spec: { attacher: DRIVER, nodeName: NODE, source: { persistentVolumeName: "pv-1" } },
      status: { attached: true },
    });
  }

  test("deletes the VolumeAttachment and resolves once it is gone", async () => {
    const api = new FakeVolumeAttachments();
    attached(api, ["external-attacher/ebs-csi-aws-com"]);
    let reads = 0;
    api.onRead = (va) => {
      assert.ok(va.metadata?.deletionTimestamp);
      if (++reads === 2) api.objects.delete(VA_NAME);
    };
    await plugin(api).newDetacher().detach("ebs.csi.aws.com^vol-1", NODE);
    assert.equal(api.objects.size, 0);
    // Detaching what is not attached succeeds.
    await plugin(api).newDetacher().detach("ebs.csi.aws.com^vol-1", NODE);
  });

  test("rejects with the detachError verbatim, and on timeout", async () => {
    const api = new FakeVolumeAttachments();
    attached(api, ["external-attacher/ebs-csi-aws-com"]);
    api.onRead = (va) => {
      va.status = { attached: true, detachError: { message: "unpublish failed" } };
    };
    await assert.rejects(plugin(api).newDetacher().detach("ebs.csi.aws.com^vol-1", NODE), {
      message: "unpublish failed",
    });

    const stuck = new FakeVolumeAttachments();
    attached(stuck, ["external-attacher/ebs-csi-aws-com"]);
    await assert.rejects(plugin(stuck, drivers(), 50).newDetacher().detach("ebs.csi.aws.com^vol-1", NODE), {
      message: "timed out waiting for external-attacher of ebs.csi.aws.com CSI driver to detach volume vol-1",
    });
  });

  test("rejects volume names it did not make", async () => {
    const d = plugin().newDetacher();
    await assert.rejects(d.detach("", NODE), { message: "missing expected parameter volumeName" });
    await assert.rejects(d.detach("vol-1", NODE), { message: "volumeName missing expected data" });
    await assert.rejects(d.detach("a^b^c", NODE), { message: "volumeName missing expected data" });
  });
});

describe("CSI volumesAreAttached", () => {
  test("reads status.attached; missing objects, other plugins' specs are false; attach-free drivers true", async () => {
    const api = new FakeVolumeAttachments();
    const yes = csiSpec("vol-1");
    const no = csiSpec("vol-2");
    const missing = csiSpec("vol-3");
    const free = csiSpec("vol-4", "nfs.csi.k8s.io");
    for (const [handle, isAttached] of [
      ["vol-1", true],
      ["vol-2", false],
    ] as const) {
      const name = attachmentName(handle, DRIVER, NODE);
      api.objects.set(name, {
        metadata: { name },
        spec: { attacher: DRIVER, nodeName: NODE, source: {} },
        status: { attached: isAttached },
      });
    }
    const result = await plugin(api, drivers(csiDriver("nfs.csi.k8s.io", false)))
      .newAttacher()
      .volumesAreAttached([yes, no, missing, free, inlineSpec], NODE);
    assert.deepEqual(
      [yes, no, missing, free, inlineSpec].map((s) => result.get(s)),
      [true, false, false, true, false],
    );
  });
});
