import type { VolumeSpec } from "../plugin.js";
import {
  findInTreePlugin,
  getCSINameFromInTreeName,
  IN_TREE_PLUGINS,
  translateInTreeInlineVolumeToCSI,
  translateInTreePVToCSI,
} from "./translate.js";

/*
 * When the controllers use a CSI driver in place of an in-tree plugin (upstream
 * pkg/volume/csimigration/plugin_manager.go at v1.37). Every in-tree plugin with a CSI replacement
 * has CSIMigration<X> locked on and its in-tree code unregistered, so migration is enabled and
 * complete for each: a node's CSINode "storage.alpha.kubernetes.io/migrated-plugins" annotation,
 * which upstream reads only for plugins whose migration is not complete, never matters.
 */

/** Whether CSI migration is enabled (and, at v1.37, complete) for in-tree plugin `pluginName`. */
export function isMigrationEnabledForPlugin(pluginName: string): boolean {
  return MIGRATED_PLUGINS.has(pluginName);
}

/** Whether the spec's volume belongs to an in-tree plugin that is migrated (upstream IsMigratable). */
export function isMigratable(spec: VolumeSpec): boolean {
  // Asked of every pod volume: most (configMaps, secrets, projected tokens) have no in-tree plugin,
  // and an Error per volume was about 15% of a new leader's start-up at scale (issue 30 goal 1).
  const plugin = findInTreePlugin(spec.persistentVolume, spec.volume);
  return plugin !== undefined && isMigrationEnabledForPlugin(plugin.inTreePluginName);
}

/**
 * The CSI spec of an in-tree PV or inline volume (upstream TranslateInTreeSpecToCSI): always a PV,
 * marked migrated; an inline volume's is also marked so that its VolumeAttachment carries the
 * translated spec inline instead of a PV name.
 */
export function translateInTreeSpecToCSI(spec: VolumeSpec, podNamespace: string): VolumeSpec {
  try {
    const persistentVolume = spec.persistentVolume
      ? translateInTreePVToCSI(spec.persistentVolume)
      : translateInTreeInlineVolumeToCSI(spec.volume, podNamespace);
    return {
      persistentVolume,
      readOnly: spec.readOnly,
      migrated: true,
      inlineVolumeSpecForCSIMigration: spec.persistentVolume === undefined,
    };
  } catch (err) {
    throw new Error(`failed to translate in-tree pv to CSI: ${(err as Error).message}`, { cause: err });
  }
}

/** The spec translated when it is migratable, else as it is (upstream translateInTreeSpecToCSIIfNeeded). */
export function translateInTreeSpecToCSIIfNeeded(spec: VolumeSpec, podNamespace: string): VolumeSpec {
  return isMigratable(spec) ? translateInTreeSpecToCSI(spec, podNamespace) : spec;
}

/** The migrated in-tree plugins and their CSI drivers. */
export const MIGRATED_PLUGINS: ReadonlyMap<string, string> = new Map(
  [...IN_TREE_PLUGINS.values()].map((plugin) => [plugin.inTreePluginName, plugin.csiPluginName]),
);

/** Which in-tree plugins a CSI driver serves instead; the PV binder's view (csimigration.PluginManager). */
export interface CsiMigration {
  /** The CSI driver replacing in-tree plugin `pluginName`, or undefined when it is not migrated. */
  migratedDriver(pluginName: string): string | undefined;
}

export const inTreeCsiMigration: CsiMigration = {
  migratedDriver: (pluginName) =>
    isMigrationEnabledForPlugin(pluginName) ? getCSINameFromInTreeName(pluginName) : undefined,
};
