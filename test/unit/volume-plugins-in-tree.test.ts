import assert from "node:assert/strict";
import { describe, test } from "node:test";
import type { V1PersistentVolume, V1PersistentVolumeSpec, V1Pod } from "@kubernetes/client-node";
import { isMultiAttachAllowed } from "../../src/attachdetach/operation-executor.js";
import { silentLogger } from "../../src/runtime/logger.js";
import {
  attachablePlugins,
  defaultPlugins,
  provisionableRecyclablePlugins,
} from "../../src/volume/default-plugins.js";
import { FCPlugin } from "../../src/volume/fc/plugin.js";
import { ISCSIPlugin } from "../../src/volume/iscsi/plugin.js";
import { NFSPlugin } from "../../src/volume/nfs/plugin.js";
import { specFromPersistentVolume, specFromVolume } from "../../src/volume/plugin.js";
import { VolumePluginManager } from "../../src/volume/plugin-manager.js";
import { newRecyclerPodTemplate, type RecyclerPodApi } from "../../src/volume/recycler.js";

/** Upstream pkg/volume/{iscsi,fc,nfs} as kube-controller-manager registers them. */

/** Records the recycler pod; reads say Succeeded. */
function succeedingPods() {
  const created: V1Pod[] = [];
  const api: RecyclerPodApi = {
    createNamespacedPod: ({ body }) => {
      created.push(body);
      return Promise.resolve({ ...body, metadata: { ...body.metadata, uid: "uid-1" } });
    },
    readNamespacedPod: ({ name }) => Promise.resolve({ metadata: { name }, status: { phase: "Succeeded" } }),
    deleteNamespacedPod: () => Promise.resolve({}),
    listNamespacedEvent: () => Promise.resolve({ items: [] }),
  };
  return { api, created };
}

function pv(spec: V1PersistentVolumeSpec): V1PersistentVolume {
  return { metadata: { name: "pv-1" }, spec };
}

const ISCSI = { targetPortal: "10.0.0.1:3260", iqn: "iqn.2001-04.com.example:storage.disk1", lun: 3 };

function manager(plugins = defaultPlugins({ enableHostPathProvisioner: false, pods: succeedingPods().api })) {
  const m = new VolumePluginManager(silentLogger);
  m.register(plugins);
  return m;
}

describe("built-in plugins as kube-controller-manager registers them", () => {
  test("iSCSI and FC PVs and inline volumes are attachable", () => {
    const m = manager();
    const iscsiPV = specFromPersistentVolume(pv({ accessModes: ["ReadWriteOnce"], iscsi: ISCSI }));
    assert.equal(m.findAttachablePluginBySpec(iscsiPV)?.name, "kubernetes.io/iscsi");
    const fcInline = specFromVolume({ name: "v", fc: { wwids: ["3600508b400105e21"] } });
    assert.equal(m.findAttachablePluginBySpec(fcInline)?.name, "kubernetes.io/fc");
  });

  test("a Released NFS PV has a recycler", () => {
    const spec = specFromPersistentVolume(pv({ nfs: { server: "nas", path: "/exports/a" } }));
    assert.equal(manager().findRecyclablePluginBySpec(spec).name, "kubernetes.io/nfs");
  });

  test("each controller gets its kind: the binder hostPath and NFS, attach/detach iSCSI and FC", () => {
    const options = { enableHostPathProvisioner: false, pods: succeedingPods().api };
    assert.deepEqual(
      provisionableRecyclablePlugins(options).map((p) => p.name),
      ["kubernetes.io/host-path", "kubernetes.io/nfs"],
    );
    assert.deepEqual(
      attachablePlugins(options).map((p) => p.name),
      ["kubernetes.io/fc", "kubernetes.io/iscsi"],
    );
  });
});

describe("iSCSI plugin (upstream pkg/volume/iscsi)", () => {
  const plugin = new ISCSIPlugin();

  test("names a volume <portal>:<iqn>:<lun>, PV or inline alike", () => {
    const name = "10.0.0.1:3260:iqn.2001-04.com.example:storage.disk1:3";
    assert.equal(plugin.getVolumeName(specFromPersistentVolume(pv({ iscsi: ISCSI }))), name);
    assert.equal(plugin.getVolumeName(specFromVolume({ name: "v", iscsi: ISCSI })), name);
    const noLun = { targetPortal: ISCSI.targetPortal, iqn: ISCSI.iqn } as typeof ISCSI;
    assert.equal(
      plugin.getVolumeName(specFromVolume({ name: "v", iscsi: noLun })),
      "10.0.0.1:3260:iqn.2001-04.com.example:storage.disk1:0",
      "an unset LUN is Go's zero",
    );
    assert.throws(() => plugin.getVolumeName(specFromVolume({ name: "v", emptyDir: {} })), /ISCSI/);
  });

  test("attach, verify and detach do nothing and succeed", async () => {
    const spec = specFromPersistentVolume(pv({ iscsi: ISCSI }));
    assert.equal(plugin.canAttach(), true);
    assert.equal(await plugin.newAttacher().attach(spec, "node-1"), "");
    assert.deepEqual(
      await plugin.newAttacher().volumesAreAttached([spec], "node-1"),
      new Map([[spec, true]]),
    );
    await plugin.newDetacher().detach("anything", "node-1");
  });

  test("multi-attach follows the PV's access modes (RWO exclusive, ROX shared)", () => {
    const rwo = specFromPersistentVolume(pv({ accessModes: ["ReadWriteOnce"], iscsi: ISCSI }));
    const rox = specFromPersistentVolume(pv({ accessModes: ["ReadOnlyMany"], iscsi: ISCSI }));
    assert.equal(isMultiAttachAllowed(rwo), false);
    assert.equal(isMultiAttachAllowed(rox), true);
  });
});

describe("FC plugin (upstream pkg/volume/fc)", () => {
  const plugin = new FCPlugin();

  test("names a volume by Go's %v of its WWNs and LUN, or of its WWIDs", () => {
    const wwns = specFromPersistentVolume(
      pv({ fc: { targetWWNs: ["500a0981891b8dc5", "500a0981991b8dc5"], lun: 0 } }),
    );
    assert.equal(plugin.getVolumeName(wwns), "[500a0981891b8dc5 500a0981991b8dc5]:0");
    const wwids = specFromVolume({ name: "v", fc: { wwids: ["3600508b400105e21", "3600508b400105e22"] } });
    assert.equal(plugin.getVolumeName(wwids), "[3600508b400105e21 3600508b400105e22]");
    assert.equal(plugin.getVolumeName(specFromVolume({ name: "v", fc: { targetWWNs: ["a"] } })), "");
  });

  test("attach and detach do nothing and succeed", async () => {
    const spec = specFromVolume({ name: "v", fc: { wwids: ["x"] } });
    assert.equal(await plugin.newAttacher().attach(spec, "node-1"), "");
    await plugin.newDetacher().detach("[x]", "node-1");
  });
});

describe("NFS recycler (upstream pkg/volume/nfs)", () => {
  test("the pod mounts the export read-write, with a deadline of max(minimum, increment × Gi)", async () => {
    const pods = succeedingPods();
    const plugin = new NFSPlugin({ pods: pods.api, minimumTimeoutSeconds: 300, timeoutIncrementSeconds: 30 });
    const volume = pv({
      capacity: { storage: "20Gi" },
      nfs: { server: "nas.example.com", path: "/exports/a", readOnly: true },
    });
    await plugin.recycle("pv-1", specFromPersistentVolume(volume), () => undefined);
    const [pod] = pods.created;
    assert.equal(pod?.metadata?.name, "recycler-for-pv-1");
    assert.equal(pod?.spec?.activeDeadlineSeconds, 600);
    assert.deepEqual(pod?.spec?.volumes, [
      { name: "vol", nfs: { server: "nas.example.com", path: "/exports/a" } },
    ]);
    assert.deepEqual(pod?.spec?.containers, newRecyclerPodTemplate().spec?.containers);
    await plugin.recycle(
      "pv-1",
      specFromPersistentVolume(pv({ nfs: { server: "s", path: "/p" } })),
      () => {},
    );
    assert.equal(pods.created[1]?.spec?.activeDeadlineSeconds, 300, "the minimum for a PV without capacity");
  });

  test("uses the --pv-recycler-pod-template-filepath-nfs pod and rejects one without volumes", async () => {
    const pods = succeedingPods();
    const template = newRecyclerPodTemplate();
    template.spec!.containers[0]!.image = "example.com/scrubber:1";
    const plugin = new NFSPlugin({
      pods: pods.api,
      minimumTimeoutSeconds: 1,
      timeoutIncrementSeconds: 1,
      podTemplate: template,
    });
    await plugin.recycle(
      "pv-1",
      specFromPersistentVolume(pv({ nfs: { server: "s", path: "/p" } })),
      () => {},
    );
    assert.equal(pods.created[0]?.spec?.containers[0]?.image, "example.com/scrubber:1");
    assert.throws(
      () =>
        new NFSPlugin({
          pods: pods.api,
          minimumTimeoutSeconds: 1,
          timeoutIncrementSeconds: 1,
          podTemplate: { spec: { containers: [] } },
        }),
      /does not contain any volume/,
    );
  });

  test("a non-NFS spec is an error", async () => {
    const plugin = new NFSPlugin({
      pods: succeedingPods().api,
      minimumTimeoutSeconds: 1,
      timeoutIncrementSeconds: 1,
    });
    await assert.rejects(
      plugin.recycle("pv-1", specFromVolume({ name: "v", nfs: { server: "s", path: "/p" } }), () => {}),
      { message: "spec.PersistentVolumeSource.NFS is nil" },
    );
  });
});
