import type { V1Pod } from "@kubernetes/client-node";
import { silentLogger } from "../../src/runtime/logger.js";
import {
  specFromPersistentVolume,
  uniqueVolumeName,
  type AttachableVolumePlugin,
  type VolumeSpec,
} from "../../src/volume/plugin.js";
import { VolumePluginManager } from "../../src/volume/plugin-manager.js";

/** Shared by the attach/detach cache tests: a CSI-like attachable plugin and spec/pod builders. */

export const CSI_PLUGIN_NAME = "kubernetes.io/csi";
export const TEST_DRIVER = "test.csi.example.com";
/** A driver whose CSIDriver would say attachRequired=false. */
export const NON_ATTACHING_DRIVER = "nonattaching.csi.example.com";

/** Supports PVs with a csi source; names volumes "<driver>^<handle>" like the CSI plugin. */
export function fakeCsiPlugin(): AttachableVolumePlugin {
  const unused = () => {
    throw new Error("not used by the cache tests");
  };
  return {
    name: CSI_PLUGIN_NAME,
    canSupport: (spec) => spec.persistentVolume?.spec?.csi !== undefined,
    getVolumeName(spec) {
      const csi = spec.persistentVolume?.spec?.csi;
      if (!csi?.volumeHandle) throw new Error("volume source is not a CSI volume with a handle");
      return `${csi.driver}^${csi.volumeHandle}`;
    },
    canAttach: (spec) => spec.persistentVolume?.spec?.csi?.driver !== NON_ATTACHING_DRIVER,
    newAttacher: unused,
    newDetacher: unused,
  };
}

export function testPluginManager(): VolumePluginManager {
  const manager = new VolumePluginManager(silentLogger);
  manager.register([fakeCsiPlugin()]);
  return manager;
}

/** A RWO CSI PV named `pvName` backed by `handle` (upstream GetTestVolumeSpec). */
export function testVolumeSpec(pvName: string, handle: string, driver = TEST_DRIVER): VolumeSpec {
  return specFromPersistentVolume({
    metadata: { name: pvName },
    spec: { accessModes: ["ReadWriteOnce"], csi: { driver, volumeHandle: handle } },
  });
}

/** The unique name the plugin manager resolves for testVolumeSpec(_, handle). */
export function testUniqueName(handle: string): string {
  return uniqueVolumeName(CSI_PLUGIN_NAME, `${TEST_DRIVER}^${handle}`);
}

/** Upstream NewPod: uid, and name doubling as namespace. */
export function newPod(uid: string, name = uid): V1Pod {
  return { metadata: { uid, name, namespace: name } };
}
