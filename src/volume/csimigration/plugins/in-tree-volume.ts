import type {
  V1NodeSelectorRequirement,
  V1PersistentVolume,
  V1Volume,
  V1VolumeNodeAffinity,
} from "@kubernetes/client-node";

/*
 * The contract of an in-tree plugin's translator and the topology helpers they share (upstream
 * k8s.io/csi-translation-lib/plugins/in_tree_volume.go). Only the in-tree to CSI direction is here:
 * the controllers never translate back, nor translate StorageClasses (the external provisioner does).
 */

/** Translates one in-tree plugin's volumes to its CSI driver's (upstream plugins.InTreePlugin). */
export interface InTreePlugin {
  /** The in-tree plugin name, e.g. "kubernetes.io/aws-ebs". */
  readonly inTreePluginName: string;
  /** The CSI driver that supersedes it, e.g. "ebs.csi.aws.com". */
  readonly csiPluginName: string;
  canSupport(pv: V1PersistentVolume): boolean;
  canSupportInline(volume: V1Volume): boolean;
  /** Returns the PV with its in-tree source replaced by a CSI source; `pv` is a copy it may modify. */
  translateInTreePVToCSI(pv: V1PersistentVolume): V1PersistentVolume;
  /** A PV wrapping the CSI equivalent of the inline volume; `podNamespace` only matters to azureFile. */
  translateInTreeInlineVolumeToCSI(volume: V1Volume, podNamespace: string): V1PersistentVolume;
}

export const LABEL_TOPOLOGY_ZONE = "topology.kubernetes.io/zone";
export const LABEL_TOPOLOGY_REGION = "topology.kubernetes.io/region";
export const LABEL_FAILURE_DOMAIN_BETA_ZONE = "failure-domain.beta.kubernetes.io/zone";
export const LABEL_FAILURE_DOMAIN_BETA_REGION = "failure-domain.beta.kubernetes.io/region";

/** Separates the zones of a multi-zone volume in its zone label (k8s.io/cloud-provider/volume). */
export const LABEL_MULTI_ZONE_DELIMITER = "__";

function nodeSelectorTerms(pv: V1PersistentVolume) {
  return pv.spec?.nodeAffinity?.required?.nodeSelectorTerms ?? [];
}

/**
 * Renames every match expression keyed `oldKey` to `newKey` (upstream replaceTopology). Values are not
 * merged with an existing `newKey` expression, so a term may end up with both.
 */
export function replaceTopology(pv: V1PersistentVolume, oldKey: string, newKey: string): void {
  for (const term of nodeSelectorTerms(pv)) {
    for (const requirement of term.matchExpressions ?? []) {
      if (requirement.key === oldKey) requirement.key = newKey;
    }
  }
}

/** Every distinct value of `key` across the node affinity terms, sorted (upstream getTopologyValues). */
export function getTopologyValues(pv: V1PersistentVolume, key: string): string[] {
  const values = new Set<string>();
  for (const term of nodeSelectorTerms(pv)) {
    for (const requirement of term.matchExpressions ?? []) {
      if (requirement.key === key) for (const value of requirement.values ?? []) values.add(value);
    }
  }
  return [...values].sort();
}

/**
 * Appends `topologyKey In zones` (trimmed, deduplicated, sorted, empty ones dropped) to every node
 * affinity term, creating one term if there is none (upstream addTopology).
 */
export function addTopology(pv: V1PersistentVolume, topologyKey: string, zones: readonly string[]): void {
  const filtered = [...new Set(zones.map((zone) => zone.trim()).filter((zone) => zone.length > 0))].sort();
  if (filtered.length < 1) throw new Error("there are no valid zones to add to pv");
  pv.spec ??= {};
  pv.spec.nodeAffinity ??= {};
  pv.spec.nodeAffinity.required ??= { nodeSelectorTerms: [] };
  const required = pv.spec.nodeAffinity.required;
  if (required.nodeSelectorTerms.length === 0) required.nodeSelectorTerms = [{}];
  for (const term of required.nodeSelectorTerms) {
    const topology: V1NodeSelectorRequirement = { key: topologyKey, operator: "In", values: [...filtered] };
    term.matchExpressions = [...(term.matchExpressions ?? []), topology];
  }
}

/** Whether any node affinity term has an expression keyed `key` (upstream TopologyKeyExist). */
export function topologyKeyExist(key: string, affinity: V1VolumeNodeAffinity | undefined): boolean {
  return (affinity?.required?.nodeSelectorTerms ?? []).some((term) =>
    (term.matchExpressions ?? []).some((requirement) => requirement.key === key),
  );
}

/**
 * Which zone and region labels the PV uses, GA or beta: node affinity first, then the PV's labels;
 * GA when neither says (upstream getTopologyLabel).
 */
export function getTopologyLabel(pv: V1PersistentVolume): { zoneLabel: string; regionLabel: string } {
  const ga = { zoneLabel: LABEL_TOPOLOGY_ZONE, regionLabel: LABEL_TOPOLOGY_REGION };
  const beta = { zoneLabel: LABEL_FAILURE_DOMAIN_BETA_ZONE, regionLabel: LABEL_FAILURE_DOMAIN_BETA_REGION };
  const affinity = pv.spec?.nodeAffinity;
  if (topologyKeyExist(LABEL_TOPOLOGY_ZONE, affinity)) return ga;
  if (topologyKeyExist(LABEL_FAILURE_DOMAIN_BETA_ZONE, affinity)) return beta;
  const labels = pv.metadata?.labels ?? {};
  if (Object.hasOwn(labels, LABEL_TOPOLOGY_ZONE)) return ga;
  if (Object.hasOwn(labels, LABEL_FAILURE_DOMAIN_BETA_ZONE)) return beta;
  return ga;
}

/**
 * Moves the PV's zone to the CSI topology key (upstream translateTopologyFromInTreeToCSI): a zone in
 * the node affinity is renamed; otherwise the zone label (zones joined by "__") becomes a node
 * affinity requirement. A beta region in the node affinity becomes the GA one, so that nodes carrying
 * only GA labels still match.
 */
export function translateTopologyFromInTreeToCSI(pv: V1PersistentVolume, csiTopologyKey: string): void {
  const { zoneLabel, regionLabel } = getTopologyLabel(pv);
  if (getTopologyValues(pv, zoneLabel).length > 0) {
    replaceTopology(pv, zoneLabel, csiTopologyKey);
  } else {
    const labels = pv.metadata?.labels ?? {};
    if (Object.hasOwn(labels, zoneLabel)) {
      try {
        addTopology(pv, csiTopologyKey, (labels[zoneLabel] ?? "").split(LABEL_MULTI_ZONE_DELIMITER));
      } catch {
        // Upstream ignores a label with no usable zone.
      }
    }
  }
  if (regionLabel === LABEL_FAILURE_DOMAIN_BETA_REGION && getTopologyValues(pv, regionLabel).length > 0) {
    replaceTopology(pv, regionLabel, LABEL_TOPOLOGY_REGION);
  }
}
