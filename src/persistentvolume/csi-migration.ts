import type { V1PersistentVolume, V1StorageClass } from "@kubernetes/client-node";
import type { CsiMigration } from "../volume/csimigration/plugin-manager.js";
import {
  ANN_BETA_STORAGE_PROVISIONER,
  ANN_DYNAMICALLY_PROVISIONED,
  ANN_MIGRATED_TO,
  ANN_STORAGE_PROVISIONER,
  FINALIZER_EXTERNAL_PV_PROTECTION,
  FINALIZER_IN_TREE_PV_PROTECTION,
  ReclaimPolicy,
} from "./annotations.js";

/*
 * The binder's CSI migration rules (upstream pv_controller.go, pv_controller_base.go): which
 * provisioner serves a claim or volume once its in-tree plugin is migrated to a CSI driver, and the
 * annotations and finalizers that say so. Pure: callers save the objects. Which plugins are migrated
 * is the CsiMigration's answer (volume/csimigration).
 */

/** In-tree plugin names start with this; a provisioner named otherwise is external (upstream tests the literal). */
export const IN_TREE_PLUGIN_PREFIX = "kubernetes.io/";

/**
 * Sets or removes migrated-to on a claim's or volume's annotations (a copy) from its provisioner
 * (storage-provisioner on a claim, provisioned-by on a volume) and whether that plugin is migrated
 * to CSI. Answers whether anything changed.
 */
export function updateMigrationAnnotations(
  migration: CsiMigration,
  annotations: Record<string, string> | undefined,
  claim: boolean,
): boolean {
  if (!annotations) return false;
  const keys = claim
    ? [ANN_STORAGE_PROVISIONER, ANN_BETA_STORAGE_PROVISIONER]
    : [ANN_DYNAMICALLY_PROVISIONED];
  const key = keys.find((k) => Object.hasOwn(annotations, k));
  if (key === undefined) return false;
  const provisioner = annotations[key] ?? "";
  const migratedTo = annotations[ANN_MIGRATED_TO] ?? "";
  const driver = migration.migratedDriver(provisioner);
  if (driver !== undefined) {
    if (migratedTo === driver) return false;
    annotations[ANN_MIGRATED_TO] = driver;
    return true;
  }
  // Migration was rolled back for this plugin.
  if (migratedTo === "") return false;
  Reflect.deleteProperty(annotations, ANN_MIGRATED_TO);
  return true;
}

/**
 * The finalizers a dynamically provisioned volume should carry, and whether they differ: an in-tree
 * provisioned Delete volume is protected by kubernetes.io/pv-controller until its storage is deleted;
 * Retain/Recycle and migrated volumes are not; the external provisioner's finalizer goes (CSI
 * migration was rolled back). Statically provisioned and external volumes are left alone.
 */
export function modifyDeletionFinalizers(
  migration: CsiMigration,
  volume: V1PersistentVolume,
): { finalizers: string[] | undefined; modified: boolean } {
  const original = volume.metadata?.finalizers;
  const provisioner = volume.metadata?.annotations?.[ANN_DYNAMICALLY_PROVISIONED];
  if (provisioner === undefined) return { finalizers: original, modified: false };
  let out = [...(original ?? [])];
  let modified = false;
  const remove = (finalizer: string) => {
    if (!out.includes(finalizer)) return;
    out = out.filter((f) => f !== finalizer);
    modified = true;
  };
  const result = () => ({ finalizers: out.length > 0 ? out : undefined, modified });
  if (migration.migratedDriver(provisioner) !== undefined) {
    remove(FINALIZER_IN_TREE_PV_PROTECTION);
    return result();
  }
  if (!provisioner.startsWith(IN_TREE_PLUGIN_PREFIX)) return { finalizers: original, modified: false };
  const policy = volume.spec?.persistentVolumeReclaimPolicy;
  // Unlike upstream, never add to a volume being deleted: the apiserver forbids new finalizers then,
  // and upstream's attempt only fails every sync with "can't anneal migration annotations or finalizer".
  const deleting = volume.metadata?.deletionTimestamp != null;
  if (policy === ReclaimPolicy.Delete && !deleting && !out.includes(FINALIZER_IN_TREE_PV_PROTECTION)) {
    out.push(FINALIZER_IN_TREE_PV_PROTECTION);
    modified = true;
  } else if (policy === ReclaimPolicy.Retain || policy === ReclaimPolicy.Recycle) {
    remove(FINALIZER_IN_TREE_PV_PROTECTION);
  }
  remove(FINALIZER_EXTERNAL_PV_PROTECTION);
  return result();
}

/** Sets finalizers on a copy; none is no field, as upstream's nil slice. */
export function setFinalizers(volume: V1PersistentVolume, finalizers: readonly string[] | undefined): void {
  volume.metadata ??= {};
  if (finalizers?.length) volume.metadata.finalizers = [...finalizers];
  else delete volume.metadata.finalizers;
}

/**
 * The plugin_name of an operation handed to the class's external provisioner: the CSI driver an
 * in-tree provisioner migrated to, else the class's provisioner (never the PV's provisioned-by
 * annotation, which e.g. local provisioners fill with arbitrary names).
 */
export function classProvisionerName(migration: CsiMigration, storageClass: V1StorageClass): string {
  return migration.migratedDriver(storageClass.provisioner) ?? storageClass.provisioner;
}
