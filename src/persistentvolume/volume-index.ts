import type { V1LabelSelector, V1PersistentVolume, V1PersistentVolumeClaim } from "@kubernetes/client-node";
import {
  ACCESS_MODES,
  accessModesKey,
  accessModesMask,
  checkNodeAffinity,
  claimKey,
  claimVAC,
  compileLabelSelector,
  getClaimClass,
  getVolumeClass,
  isVolumeBoundToClaim,
  unknownAccessModes,
  volumeCapacity,
  volumeModeOf,
  volumeVAC,
  type LabelMatcher,
  type Labels,
} from "./pv-helpers.js";
import { compareQuantities, quoteQuantity, type Quantity } from "../util/quantity.js";
import { capacityProbe, parseCapacity, type Sized } from "./capacity-order.js";
import { selectorAnchors, VolumeGroup, type SelectorAnchor } from "./volume-group.js";

/**
 * The PV controller's volume cache and its claim matcher: upstream's index.go findBestMatchForClaim +
 * FindMatchingVolume on the controller path (no node, nothing excluded, VolumeAttributesClass on),
 * answered without scanning every PV.
 *
 * Upstream walks access-mode buckets fewest modes first and, in the first bucket with any match,
 * returns a volume pre-bound to the claim if there is one, else the smallest Available one. Here:
 * - Available, unbound, not-deleting PVs with a valid capacity sit in groups keyed by
 *   (access-mode mask, class, volumeMode, VAC), which are exactly upstream's equality filters, each
 *   ordered by capacity: a lookup binary-searches the smallest fit and walks upward only past PVs the
 *   claim's selector rejects; a selector with an equality, In or Exists requirement walks only the
 *   group's PVs carrying one of its labels (VolumeGroup).
 * - PVs with a claimRef are found through a claimRef (namespace/name) index; the pre-bound filters
 *   (capacity, volumeMode, VAC, deletion) are checked per candidate.
 * - Unbound, not-deleting PVs in another phase (new ones are Pending) sit in groups of their own:
 *   their next sync makes them Available (findTurningAvailable, not upstream: see WaitingClaims).
 *
 * Upstream leaves ties to map order. Our tie rules, one fixed execution of upstream:
 * - buckets with the same number of modes are visited in ascending accessModesKey order
 *   ("ROX" < "RWO" < "RWOP" < "RWX"; "RWO,ROX" < "RWO,RWOP" < "RWO,RWX" ...);
 * - within a bucket, volumes are seen in ascending name order (JS string order), so equal capacities
 *   go to the smallest name, and among several pre-bound volumes the smallest name wins.
 *
 * Every per-volume test is one of the RULES below (FindMatchingVolume's `continue`s); the groups stand
 * for the rules in GROUP_RULES, and the candidates a lookup visits are put to the other rules, so
 * `volumeVerdict` (kvc explain) and findBestMatch cannot disagree.
 *
 * Entries are snapshots: a changed PV must be add()ed again (the controller replaces, never mutates).
 */
export class VolumeIndex {
  readonly #byName = new Map<string, Entry>();
  readonly #byClaimRef = new Map<string, Entry[]>();
  /**
   * Groups by class, volumeMode and VAC (nested maps: no key string built per add or lookup), then
   * by slot: phase (AVAILABLE or TURNING_AVAILABLE) plus access-mode mask, so a lookup finds its
   * attributes once, not per bucket.
   */
  readonly #groups = new Map<string, Map<string, Map<string, Slots>>>();

  get size(): number {
    return this.#byName.size;
  }

  get(name: string): V1PersistentVolume | undefined {
    return this.#byName.get(name)?.pv;
  }

  list(): V1PersistentVolume[] {
    return Array.from(this.#byName.values(), (entry) => entry.pv);
  }

  /**
   * Adds or replaces the PV by name. Answers a warning when the PV is unusable for matching (no name:
   * not stored; no valid capacity: stored, never matched; unknown access modes: ignored, as upstream).
   */
  add(pv: V1PersistentVolume): string | undefined {
    const name = pv.metadata?.name;
    if (!name) return "persistent volume without metadata.name is not indexed";
    if (this.#byName.has(name)) this.delete(name);
    const spec = pv.spec;
    const parsed = parseCapacity(spec?.capacity?.storage);
    const capacity = parsed?.quantity;
    const modes = accessModesMask(spec?.accessModes);
    const ref = spec?.claimRef;
    const claimRefKey = ref == null ? undefined : `${ref.namespace ?? ""}/${ref.name ?? ""}`;
    let group: Group | undefined;
    if (ref == null && capacity !== undefined && pv.metadata?.deletionTimestamp == null) {
      const storageClass = getVolumeClass(pv);
      const volumeMode = volumeModeOf(spec);
      const vac = volumeVAC(pv);
      const slot = (pv.status?.phase === "Available" ? AVAILABLE : TURNING_AVAILABLE) + modes;
      let byMode = this.#groups.get(storageClass);
      if (!byMode) this.#groups.set(storageClass, (byMode = new Map<string, Map<string, Slots>>()));
      let byVAC = byMode.get(volumeMode);
      if (!byVAC) byMode.set(volumeMode, (byVAC = new Map<string, Slots>()));
      let slots = byVAC.get(vac);
      if (!slots) byVAC.set(vac, (slots = []));
      group = slots[slot] ??= { storageClass, volumeMode, vac, slot, volumes: new VolumeGroup() };
    }
    const entry: Entry = {
      pv,
      name,
      capacity,
      capacityKey: parsed?.key ?? NaN,
      labels: pv.metadata?.labels,
      modes,
      group,
      claimRefKey,
    };
    this.#byName.set(name, entry);
    if (group && isSized(entry)) group.volumes.insert(entry);
    if (claimRefKey !== undefined) {
      const list = this.#byClaimRef.get(claimRefKey);
      if (list) list.push(entry);
      else this.#byClaimRef.set(claimRefKey, [entry]);
    }
    if (capacity === undefined) {
      const raw = describe(spec?.capacity?.storage);
      return `persistent volume ${name} has no valid spec.capacity.storage (${raw}); it will not match any claim`;
    }
    const unknown = unknownAccessModes(spec?.accessModes);
    if (unknown.length) return `persistent volume ${name} has unsupported access modes ${unknown.join(", ")}`;
    return undefined;
  }

  /**
   * Sorts what add() left pending in every group. Lookups settle the groups they read, so this only
   * moves that work earlier: after a bulk load, before the first lookup.
   */
  settle(): void {
    for (const byMode of this.#groups.values())
      for (const byVAC of byMode.values())
        for (const slots of byVAC.values()) for (const group of slots) group?.volumes.settle();
  }

  delete(name: string): boolean {
    const entry = this.#byName.get(name);
    if (!entry) return false;
    this.#byName.delete(name);
    const { group, claimRefKey } = entry;
    if (group && isSized(entry)) {
      group.volumes.remove(entry);
      if (group.volumes.isEmpty) this.#dropGroup(group);
    }
    if (claimRefKey !== undefined) {
      const list = this.#byClaimRef.get(claimRefKey) ?? [];
      list.splice(list.indexOf(entry), 1);
      if (list.length === 0) this.#byClaimRef.delete(claimRefKey);
    }
    return true;
  }

  /** Forgets an empty group, and the maps it leaves empty. */
  #dropGroup({ storageClass, volumeMode, vac, slot }: Group): void {
    const byMode = this.#groups.get(storageClass);
    const byVAC = byMode?.get(volumeMode);
    const slots = byVAC?.get(vac);
    if (!byMode || !byVAC || !slots) return;
    slots[slot] = undefined;
    if (!slots.every((g) => g === undefined)) return;
    byVAC.delete(vac);
    if (byVAC.size === 0) byMode.delete(volumeMode);
    if (byMode.size === 0) this.#groups.delete(storageClass);
  }

  /**
   * findBestMatchForClaim. No volume and no error: nothing matches. An error: the claim cannot be
   * matched at all (invalid selector, as upstream; or, where upstream would read zero or ignore bad
   * input, a missing/unparsable storage request or an unknown access mode). Volumes `excluded` names
   * are passed over as if bound to another claim (the controller's reservations, ControllerCache).
   */
  findBestMatch(
    claim: V1PersistentVolumeClaim,
    delayBinding: boolean,
    excluded: (name: string) => boolean = () => false,
  ): MatchResult {
    const query = claimQuery(claim);
    if (query instanceof Error) return { error: query.message };
    const prebound = this.#prebound(query, excluded);
    const available = this.#lookup(AVAILABLE, query, excluded);
    for (const mask of BUCKET_ORDER) {
      if ((mask & query.modes) !== query.modes) continue;
      if (prebound?.modes === mask) return { volume: prebound.pv };
      // The PV controller leaves unbound volumes of WaitForFirstConsumer claims to the scheduler.
      if (delayBinding) continue;
      const found = available(mask);
      if (found) return { volume: found.pv };
    }
    return {};
  }

  /**
   * The volume findBestMatch would answer for the claim (not delaying binding, nothing pre-bound)
   * once the unbound volumes not yet Available have been synced: their sync makes them Available.
   * Not upstream: a claim that finds nothing yet waits for such a volume without an event.
   */
  findTurningAvailable(
    claim: V1PersistentVolumeClaim,
    excluded: (name: string) => boolean = () => false,
  ): V1PersistentVolume | undefined {
    const query = claimQuery(claim);
    if (query instanceof Error) return undefined;
    const turning = this.#lookup(TURNING_AVAILABLE, query, excluded);
    for (const mask of BUCKET_ORDER) {
      if ((mask & query.modes) !== query.modes) continue;
      const found = turning(mask);
      if (found) return found.pv;
    }
    return undefined;
  }

  /**
   * The smallest volume that fits the claim in the group of `phase` with an access-mode mask, among
   * those passing the rules the group does not stand for; what the claim decides is computed once.
   */
  #lookup(
    phase: number,
    query: ClaimQuery,
    excluded: (name: string) => boolean,
  ): (mask: number) => Entry | undefined {
    const slots = this.#groups.get(query.storageClass)?.get(query.volumeMode)?.get(query.vac);
    if (!slots) return () => undefined;
    const min = capacityProbe(query.request);
    const accept = (entry: Entry) => !excluded(entry.name) && passes(query, entry, UNGROUPED_RULES);
    return (mask) => slots[phase + mask]?.volumes.first(min, query.anchors, accept);
  }

  /** The pre-bound volume upstream would return first: earliest bucket, then smallest name. */
  #prebound(query: ClaimQuery, excluded: (name: string) => boolean): Entry | undefined {
    let best: Entry | undefined;
    for (const entry of this.#byClaimRef.get(query.key) ?? []) {
      if (excluded(entry.name) || !passes(query, entry, RULES)) continue;
      if (!best || visitedBefore(entry, best)) best = entry;
    }
    return best;
  }
}

export interface MatchResult {
  volume?: V1PersistentVolume;
  error?: string;
}

/** What the rules read of a PV, parsed once. */
interface Candidate {
  readonly pv: V1PersistentVolume;
  /** Undefined when missing or unparsable: such a PV never matches. */
  readonly capacity: Quantity | undefined;
  readonly modes: number;
}

interface Entry extends Candidate {
  readonly name: string;
  /** capacityKey(capacity); NaN without a capacity. */
  readonly capacityKey: number;
  readonly labels: Labels;
  /** The group holding this PV, if it is unbound and not being deleted (Available or turning so). */
  readonly group: Group | undefined;
  readonly claimRefKey: string | undefined;
}

/** One group of the index: its place in #groups, and its volumes. */
interface Group {
  readonly storageClass: string;
  readonly volumeMode: string;
  readonly vac: string;
  readonly slot: number;
  readonly volumes: VolumeGroup<SizedEntry>;
}
type Slots = (Group | undefined)[];

/** What FindMatchingVolume reads from a claim, validated once per lookup. */
export interface ClaimQuery {
  readonly claim: V1PersistentVolumeClaim;
  readonly key: string;
  readonly request: Quantity;
  readonly modes: number;
  readonly storageClass: string;
  readonly volumeMode: string;
  readonly vac: string;
  readonly selector: LabelMatcher;
  /** Requirements of the selector that name the labels a volume must carry (see VolumeGroup). */
  readonly anchors: readonly SelectorAnchor[];
  /** The scheduler's path (FindMatchingVolume's node): the PV's node affinity must admit this node. */
  readonly node: TargetNode | undefined;
}

export interface TargetNode {
  readonly name: string;
  readonly labels: Labels;
}

/** The claim as FindMatchingVolume reads it, or why it cannot be matched at all. */
export function claimQuery(claim: V1PersistentVolumeClaim, node?: TargetNode): ClaimQuery | Error {
  const key = claimKey(claim);
  const selector = compileLabelSelector(claim.spec?.selector);
  if (selector instanceof Error) {
    return new Error(`error creating internal label selector for claim: ${key}: ${selector.message}`);
  }
  const unknown = unknownAccessModes(claim.spec?.accessModes);
  if (unknown.length) {
    return new Error(`claim ${key} requests unsupported access modes ${unknown.join(", ")}`);
  }
  // claimRequest, through the capacities' memo: most claims ask for a size many have asked for.
  const request = parseCapacity(claim.spec?.resources?.requests?.storage)?.quantity;
  if (request === undefined) {
    const raw = describe(claim.spec?.resources?.requests?.storage);
    return new Error(`claim ${key} has no valid spec.resources.requests.storage (${raw})`);
  }
  return {
    claim,
    key,
    request,
    modes: accessModesMask(claim.spec?.accessModes),
    storageClass: getClaimClass(claim),
    volumeMode: volumeModeOf(claim.spec),
    vac: claimVAC(claim),
    selector,
    anchors: selectorAnchors(claim.spec?.selector),
    node,
  };
}

/** Why FindMatchingVolume skips a volume: `kvc explain`'s reason codes (part of its output schema). */
export const REASON_CODES = [
  "BoundToOther",
  "AccessModes",
  "TooSmall",
  "VolumeMode",
  "AttributesClass",
  "Deleting",
  "NodeAffinity",
  "NotAvailable",
  "Selector",
  "ClassMismatch",
] as const;
export type ReasonCode = (typeof REASON_CODES)[number];

/** One failed rule with the values it compared: what the claim wants, what the volume has. */
export interface MismatchReason {
  readonly code: ReasonCode;
  readonly wanted: string;
  readonly found: string;
}

interface Rule {
  readonly code: ReasonCode;
  /** Whether FindMatchingVolume skips the volume for this reason. */
  fails(query: ClaimQuery, candidate: Candidate): boolean;
  /** The values compared, only asked of a failing volume. */
  compared(query: ClaimQuery, candidate: Candidate): Omit<MismatchReason, "code">;
}

/** A volume pre-bound to the claim skips the class, phase and selector filters (FindMatchingVolume). */
const isPrebound = (query: ClaimQuery, pv: V1PersistentVolume): boolean =>
  pv.spec?.claimRef != null && isVolumeBoundToClaim(pv, query.claim);

/** FindMatchingVolume's filters in its order, plus the access-mode index's bucket choice. */
const RULES: readonly Rule[] = [
  {
    code: "BoundToOther",
    fails: (q, { pv }) => pv.spec?.claimRef != null && !isVolumeBoundToClaim(pv, q.claim),
    compared: (q, { pv }) => ({ wanted: claimWithUid(q.claim), found: claimRefText(pv) }),
  },
  {
    code: "AccessModes",
    fails: (q, { modes }) => (modes & q.modes) !== q.modes,
    compared: (q, { pv }) => ({
      wanted: accessModesKey(q.claim.spec?.accessModes),
      found: accessModesKey(pv.spec?.accessModes) || "<none>",
    }),
  },
  {
    code: "TooSmall",
    fails: (q, { capacity }) => capacity === undefined || compareQuantities(capacity, q.request) < 0,
    compared: (q, { pv }) => ({
      wanted: q.claim.spec?.resources?.requests?.storage ?? "",
      found: pv.spec?.capacity?.storage ?? "missing",
    }),
  },
  {
    code: "VolumeMode",
    fails: (q, { pv }) => volumeModeOf(pv.spec) !== q.volumeMode,
    compared: (q, { pv }) => ({ wanted: q.volumeMode, found: volumeModeOf(pv.spec) }),
  },
  {
    code: "AttributesClass",
    fails: (q, { pv }) => volumeVAC(pv) !== q.vac,
    compared: (q, { pv }) => ({ wanted: q.vac || "<none>", found: volumeVAC(pv) || "<none>" }),
  },
  {
    code: "Deleting",
    fails: (_, { pv }) => pv.metadata?.deletionTimestamp != null,
    compared: (_, { pv }) => ({
      wanted: "not being deleted",
      found: `deleted at ${new Date(pv.metadata?.deletionTimestamp ?? 0).toISOString()}`,
    }),
  },
  {
    code: "NodeAffinity",
    fails: (q, { pv }) => q.node !== undefined && checkNodeAffinity(pv, q.node.labels) !== undefined,
    compared: (q, { pv }) => ({
      wanted: `node ${q.node?.name ?? ""}`,
      found: checkNodeAffinity(pv, q.node?.labels)?.message ?? "",
    }),
  },
  {
    code: "NotAvailable",
    fails: (_, { pv }) => pv.spec?.claimRef == null && pv.status?.phase !== "Available",
    compared: (_, { pv }) => ({ wanted: "Available", found: pv.status?.phase ?? "<none>" }),
  },
  {
    code: "Selector",
    fails: (q, { pv }) => !isPrebound(q, pv) && !q.selector(pv.metadata?.labels),
    compared: (q, { pv }) => failedRequirements(q.claim.spec?.selector, pv.metadata?.labels),
  },
  {
    code: "ClassMismatch",
    fails: (q, { pv }) => !isPrebound(q, pv) && getVolumeClass(pv) !== q.storageClass,
    compared: (q, { pv }) => ({ wanted: q.storageClass || "<none>", found: getVolumeClass(pv) || "<none>" }),
  },
];

/**
 * The rules an available group stands for: its key (access modes, class, volumeMode, VAC), its
 * membership (no claimRef, Available, not deleting) and the capacity search (TooSmall).
 */
const GROUP_RULES: ReadonlySet<ReasonCode> = new Set([
  "BoundToOther",
  "AccessModes",
  "TooSmall",
  "VolumeMode",
  "AttributesClass",
  "Deleting",
  "NotAvailable",
  "ClassMismatch",
]);
const UNGROUPED_RULES = RULES.filter((rule) => !GROUP_RULES.has(rule.code));

function passes(query: ClaimQuery, candidate: Candidate, rules: readonly Rule[]): boolean {
  for (const rule of rules) if (rule.fails(query, candidate)) return false;
  return true;
}

/**
 * Every reason FindMatchingVolume (through the access-mode index) has to skip `pv` for the claim;
 * none: the volume matches. The same rules findBestMatch applies.
 */
export function volumeVerdict(query: ClaimQuery, pv: V1PersistentVolume): MismatchReason[] {
  const candidate = candidateOf(pv);
  return RULES.filter((rule) => rule.fails(query, candidate)).map((rule) => ({
    code: rule.code,
    ...rule.compared(query, candidate),
  }));
}

/** Whether FindMatchingVolume would take `pv` for the claim: volumeVerdict without the reasons. */
export function volumeMatches(query: ClaimQuery, pv: V1PersistentVolume): boolean {
  return passes(query, candidateOf(pv), RULES);
}

function candidateOf(pv: V1PersistentVolume): Candidate {
  return { pv, capacity: volumeCapacity(pv), modes: accessModesMask(pv.spec?.accessModes) };
}

function claimWithUid(claim: V1PersistentVolumeClaim): string {
  const uid = claim.metadata?.uid;
  return uid ? `${claimKey(claim)} (uid ${uid})` : claimKey(claim);
}

function claimRefText(pv: V1PersistentVolume): string {
  const ref = pv.spec?.claimRef;
  const key = `${ref?.namespace ?? ""}/${ref?.name ?? ""}`;
  return ref?.uid ? `${key} (uid ${ref.uid})` : key;
}

/** A label selector's requirements one by one, written as kubectl prints selectors. */
interface SelectorRequirement {
  readonly key: string;
  readonly text: string;
  /** A selector of this requirement alone. */
  readonly alone: V1LabelSelector;
}

function requirements(selector: V1LabelSelector | undefined): SelectorRequirement[] {
  const out = Object.entries(selector?.matchLabels ?? {}).map(([key, value]): SelectorRequirement => ({
    key,
    text: `${key}=${value}`,
    alone: { matchLabels: { [key]: value } },
  }));
  for (const expr of selector?.matchExpressions ?? []) {
    const values = expr.values?.length ? ` (${expr.values.join(",")})` : "";
    out.push({
      key: expr.key,
      text: `${expr.key} ${expr.operator}${values}`,
      alone: { matchExpressions: [expr] },
    });
  }
  return out;
}

export function labelSelectorText(selector: V1LabelSelector): string {
  return (
    requirements(selector)
      .map((r) => r.text)
      .join(", ") || "<everything>"
  );
}

/**
 * The selector's requirements the labels fail, each tried alone through the same compiler (it
 * validated the whole selector already).
 */
function failedRequirements(
  selector: V1LabelSelector | undefined,
  labels: Labels,
): Omit<MismatchReason, "code"> {
  const failed = requirements(selector).filter(({ alone }) => {
    const matcher = compileLabelSelector(alone);
    return !(matcher instanceof Error) && !matcher(labels);
  });
  const found = [...new Set(failed.map((r) => r.key))].map((key) =>
    labels != null && Object.hasOwn(labels, key) ? `${key}=${labels[key]}` : `no ${key} label`,
  );
  return { wanted: failed.map((r) => r.text).join(", "), found: found.join(", ") };
}

/** Every access-mode mask in visiting order: fewest modes first, then accessModesKey ascending. */
const BUCKET_ORDER: readonly number[] = Array.from({ length: 1 << ACCESS_MODES.length }, (_, mask) => {
  const modes = ACCESS_MODES.filter((_, bit) => mask & (1 << bit));
  return { mask, count: modes.length, key: accessModesKey(modes) };
})
  .sort((a, b) => a.count - b.count || (a.key < b.key ? -1 : a.key > b.key ? 1 : 0))
  .map(({ mask }) => mask);
const BUCKET_RANK = new Map(BUCKET_ORDER.map((mask, rank) => [mask, rank]));

/** Upstream's visiting order under our tie rules: by bucket, then by name. */
function visitedBefore(a: Entry, b: Entry): boolean {
  const byBucket = (BUCKET_RANK.get(a.modes) ?? 0) - (BUCKET_RANK.get(b.modes) ?? 0);
  return byBucket < 0 || (byBucket === 0 && a.name < b.name);
}

/** Group slot offsets: an Available volume; one in another phase, which its next sync makes Available. */
const AVAILABLE = 0;
const TURNING_AVAILABLE = 1 << ACCESS_MODES.length;

const describe = (quantity: string | undefined): string =>
  quantity === undefined ? "missing" : quoteQuantity(quantity);

/** An entry with a valid capacity: the only kind a group holds. */
type SizedEntry = Entry & Sized;
const isSized = (entry: Entry): entry is SizedEntry => entry.capacity !== undefined;
