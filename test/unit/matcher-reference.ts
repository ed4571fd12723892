import type {
  V1LabelSelector,
  V1PersistentVolume,
  V1PersistentVolumeClaim,
  V1PersistentVolumeClaimSpec,
  V1PersistentVolumeSpec,
} from "@kubernetes/client-node";

/*
 * The oracle for VolumeIndex, written again from upstream's Go alone (k8s.io/kubernetes@v1.37.2,
 * k8s.io/component-helpers and k8s.io/apimachinery @v0.37.2) so that a mistake in src/ is not shared
 * with it: nothing here is imported from src/. Each function names the upstream one it ports.
 */

/**
 * A literal, linear port of upstream's persistentVolumeOrderedIndex.findByClaim and
 * volume.FindMatchingVolume on the controller path (node nil, nothing excluded, VAC gate on).
 * Volumes are visited in bucket order as given; buckets with the same number of modes in ascending key
 * order (the VolumeIndex tie rule; upstream's sort.Sort leaves them in map order).
 *
 * Where kvc refuses input that upstream's typed, validated objects cannot carry, this oracle models
 * kvc's contract, not upstream's: a claim whose storage request is missing or does not parse, or that
 * requests an access mode Kubernetes does not know, is an error (upstream: a zero request; no
 * bucket holds the unknown mode, so no match); a PV whose capacity is missing or does not parse never
 * matches (upstream: zero capacity). An invalid selector is an error, as upstream's.
 */
export function findBestMatchLinear(
  claim: V1PersistentVolumeClaim,
  buckets: AccessModeBuckets,
  delayBinding: boolean,
): { volume?: V1PersistentVolume; error?: string } {
  let selector: LabelSelector | undefined;
  if (claim.spec?.selector != null) {
    const compiled = labelSelectorAsSelector(claim.spec.selector);
    if (compiled instanceof Error) return { error: compiled.message };
    selector = compiled;
  }
  const requested = claim.spec?.accessModes ?? [];
  if (requested.some((mode) => !ACCESS_MODES.has(mode))) return { error: "unknown access mode" };
  const request = parseQuantity(claim.spec?.resources?.requests?.storage);
  if (request === undefined) return { error: "bad request" };
  // allPossibleMatchingAccessModes: the index's keys whose modes contain every requested one.
  const keys = [...buckets.keys()]
    .filter((key) => requested.every((mode) => getAccessModesFromString(key).includes(mode)))
    .sort((a, b) => modeCount(a) - modeCount(b) || (a < b ? -1 : a > b ? 1 : 0));
  for (const key of keys) {
    const volume = findMatchingVolume(claim, buckets.get(key) ?? [], delayBinding, request, selector);
    if (volume) return { volume };
  }
  return {};
}

/** upstream's "accessmodes" indexer: PVs by getAccessModesAsString, each bucket in the order given. */
export type AccessModeBuckets = ReadonlyMap<string, readonly V1PersistentVolume[]>;

export function bucketByAccessModes(volumes: Iterable<V1PersistentVolume>): AccessModeBuckets {
  const buckets = new Map<string, V1PersistentVolume[]>();
  for (const pv of volumes) {
    const key = getAccessModesAsString(pv.spec?.accessModes);
    const bucket = buckets.get(key);
    if (bucket) bucket.push(pv);
    else buckets.set(key, [pv]);
  }
  return buckets;
}

const modeCount = (key: string): number => getAccessModesFromString(key).length;

/** Go holds quantities parsed; memoizing keeps the benchmark's linear baseline from timing the parser. */
const capacities = new WeakMap<V1PersistentVolume, Quantity | undefined>();
export function capacityOf(pv: V1PersistentVolume): Quantity | undefined {
  if (!capacities.has(pv)) capacities.set(pv, parseQuantity(pv.spec?.capacity?.storage));
  return capacities.get(pv);
}

/** component-helpers storage/volume FindMatchingVolume, node nil, excludedVolumes nil, vacEnabled. */
function findMatchingVolume(
  claim: V1PersistentVolumeClaim,
  volumes: readonly V1PersistentVolume[],
  delayBinding: boolean,
  requestedQty: Quantity,
  selector: LabelSelector | undefined,
): V1PersistentVolume | undefined {
  let smallestVolume: V1PersistentVolume | undefined;
  let smallestVolumeQty: Quantity | undefined;
  const requestedClass = getPersistentVolumeClaimClass(claim);
  for (const volume of volumes) {
    if (volume.spec?.claimRef != null && !isVolumeBoundToClaim(volume, claim)) continue;
    const volumeQty = capacityOf(volume);
    if (volumeQty === undefined || cmp(volumeQty, requestedQty) < 0) continue;
    if (checkVolumeModeMismatches(claim.spec, volume.spec)) continue;
    const claimVAC = claim.spec?.volumeAttributesClassName ?? "";
    const volumeVAC = volume.spec?.volumeAttributesClassName ?? "";
    if (claimVAC !== volumeVAC) continue;
    if (volume.metadata?.deletionTimestamp != null) continue;
    if (isVolumeBoundToClaim(volume, claim)) return volume;
    if (delayBinding) continue;
    if (volume.status?.phase !== "Available") continue;
    if (selector !== undefined && !selector(volume.metadata?.labels ?? {})) continue;
    if (getPersistentVolumeClass(volume) !== requestedClass) continue;
    if (smallestVolume === undefined || cmp(smallestVolumeQty!, volumeQty) > 0) {
      smallestVolume = volume;
      smallestVolumeQty = volumeQty;
    }
  }
  return smallestVolume;
}

// --- component-helpers storage/volume (helpers.go, pv_helpers.go) ---

const BETA_STORAGE_CLASS_ANNOTATION = "volume.beta.kubernetes.io/storage-class";

/** GetPersistentVolumeClaimClass: the beta annotation first, even empty. */
function getPersistentVolumeClaimClass(claim: V1PersistentVolumeClaim): string {
  const annotations = claim.metadata?.annotations ?? {};
  if (Object.hasOwn(annotations, BETA_STORAGE_CLASS_ANNOTATION)) {
    return annotations[BETA_STORAGE_CLASS_ANNOTATION]!;
  }
  return claim.spec?.storageClassName ?? "";
}

/** GetPersistentVolumeClass. */
function getPersistentVolumeClass(volume: V1PersistentVolume): string {
  const annotations = volume.metadata?.annotations ?? {};
  if (Object.hasOwn(annotations, BETA_STORAGE_CLASS_ANNOTATION)) {
    return annotations[BETA_STORAGE_CLASS_ANNOTATION]!;
  }
  return volume.spec?.storageClassName ?? "";
}

/** IsVolumeBoundToClaim: name and namespace, and the UID when the claimRef has one. */
export function isVolumeBoundToClaim(volume: V1PersistentVolume, claim: V1PersistentVolumeClaim): boolean {
  const ref = volume.spec?.claimRef;
  if (ref == null) return false;
  if ((claim.metadata?.name ?? "") !== (ref.name ?? "")) return false;
  if ((claim.metadata?.namespace ?? "") !== (ref.namespace ?? "")) return false;
  if ((ref.uid ?? "") !== "" && (claim.metadata?.uid ?? "") !== ref.uid) return false;
  return true;
}

/** CheckVolumeModeMismatches: nil reads as Filesystem on both sides. */
function checkVolumeModeMismatches(
  pvcSpec: V1PersistentVolumeClaimSpec | undefined,
  pvSpec: V1PersistentVolumeSpec | undefined,
): boolean {
  return (pvcSpec?.volumeMode ?? "Filesystem") !== (pvSpec?.volumeMode ?? "Filesystem");
}

// --- pkg/apis/core/v1/helper: the index's keys ---

const ACCESS_MODES = new Map([
  ["ReadWriteOnce", "RWO"],
  ["ReadOnlyMany", "ROX"],
  ["ReadWriteMany", "RWX"],
  ["ReadWriteOncePod", "RWOP"],
]);

/** GetAccessModesAsString: the known modes abbreviated, in this fixed order, once each. */
export function getAccessModesAsString(modes: readonly string[] | undefined): string {
  return [...ACCESS_MODES]
    .filter(([mode]) => modes?.includes(mode))
    .map(([, short]) => short)
    .join(",");
}

/** GetAccessModesFromString. */
function getAccessModesFromString(key: string): string[] {
  const modes: string[] = [];
  for (const part of key.split(",")) {
    const found = [...ACCESS_MODES].find(([, short]) => short === part.trim());
    if (found) modes.push(found[0]);
  }
  return modes;
}

// --- apimachinery pkg/apis/meta/v1 LabelSelectorAsSelector, pkg/labels NewRequirement ---

type LabelSelector = (labels: Record<string, string>) => boolean;

/** LabelSelectorAsSelector, for a non-nil selector; an Error where upstream returns one. */
function labelSelectorAsSelector(ps: V1LabelSelector): LabelSelector | Error {
  const matchLabels = Object.entries(ps.matchLabels ?? {});
  const expressions = ps.matchExpressions ?? [];
  if (matchLabels.length + expressions.length === 0) return () => true;
  const requirements: LabelSelector[] = [];
  for (const [key, value] of matchLabels) {
    const r = newRequirement(key, "Equals", [value]);
    if (r instanceof Error) return r;
    requirements.push(r);
  }
  for (const expr of expressions) {
    if (!["In", "NotIn", "Exists", "DoesNotExist"].includes(expr.operator)) {
      return new Error(`${JSON.stringify(expr.operator)} is not a valid label selector operator`);
    }
    const r = newRequirement(expr.key, expr.operator, [...(expr.values ?? [])]);
    if (r instanceof Error) return r;
    requirements.push(r);
  }
  return (labels) => requirements.every((r) => r(labels));
}

/** NewRequirement's checks (any failure is an error; its text is not modelled) and Requirement.Matches. */
function newRequirement(key: string, op: string, values: string[]): LabelSelector | Error {
  if (!isLabelKey(key)) return new Error(`invalid label key ${JSON.stringify(key)}`);
  if ((op === "In" || op === "NotIn") && values.length === 0) {
    return new Error("for 'in', 'notin' operators, values set can't be empty");
  }
  if (op === "Equals" && values.length !== 1) return new Error("exact-match requires one single value");
  if ((op === "Exists" || op === "DoesNotExist") && values.length !== 0) {
    return new Error("values set must be empty for exists and does not exist");
  }
  const bad = values.find((v) => !isLabelValue(v));
  if (bad !== undefined) return new Error(`invalid label value ${JSON.stringify(bad)}`);
  return (labels) => {
    const has = Object.hasOwn(labels, key);
    switch (op) {
      case "In":
      case "Equals":
        return has && values.includes(labels[key]!);
      case "NotIn":
        return !has || !values.includes(labels[key]!);
      case "Exists":
        return has;
      default: // DoesNotExist
        return !has;
    }
  };
}

const LABEL_KEY_NAME = /^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$/;
const DNS1123_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

/** api/validate/content IsLabelKey: an optional DNS subdomain prefix and "/", then a name of ≤ 63. */
function isLabelKey(value: string): boolean {
  const parts = value.split("/");
  if (parts.length > 2) return false;
  const name = parts.at(-1)!;
  if (parts.length === 2) {
    const prefix = parts[0]!;
    if (prefix.length === 0 || prefix.length > 253 || !DNS1123_SUBDOMAIN.test(prefix)) return false;
  }
  return name.length > 0 && name.length <= 63 && LABEL_KEY_NAME.test(name);
}

/** IsLabelValue: empty, or a label key's name. */
function isLabelValue(value: string): boolean {
  return value === "" || (value.length <= 63 && LABEL_KEY_NAME.test(value));
}

// --- apimachinery pkg/api/resource ParseQuantity and Quantity.Cmp ---

/** A quantity's exact value: numerator / 10^9 (ParseQuantity rounds every value up to nano units). */
export type Quantity = bigint;

const NANO = 9;
/** ParseQuantity caps binary-SI values at the largest int64 (maxAllowed). */
const MAX_ALLOWED = (1n << 63n) - 1n;

/** Quantity.Cmp. */
export function cmp(a: Quantity, b: Quantity): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/**
 * ParseQuantity (parseQuantityString's grammar, the suffixer's table, rounding up to nano, the
 * binary-SI cap): undefined for anything it rejects, and for a missing value.
 */
export function parseQuantity(str: string | undefined): Quantity | undefined {
  if (str === undefined || str.length === 0) return undefined;
  // <sign><digits>[.<digits>]<suffix>, the suffix from "eEinumkKMGTP" then an optional signed integer.
  const m = /^([+-]?)([0-9]*)(?:\.([0-9]*))?([eEinumkKMGTP]*(?:[+-]?[0-9]+)?)$/.exec(str);
  if (!m) return undefined;
  const [, sign, num = "", denom = "", suffix = ""] = m;
  const interpreted = interpretSuffix(suffix);
  if (!interpreted) return undefined;
  const { base, exponent } = interpreted;
  // What int64 cannot hold exactly goes through inf.Dec's SetString, which wants a digit; the int64
  // path takes a number without any ("Ki", "+", "e5") as zero.
  if (num === "" && denom === "" && !int64PathForZero(base, exponent)) return undefined;
  // The exact value in nano units, as numerator / denominator.
  let numerator = BigInt((num || "0") + denom) * 10n ** BigInt(NANO);
  let denominator = 10n ** BigInt(denom.length);
  if (base === 2) numerator <<= BigInt(exponent);
  else if (exponent >= 0) numerator *= 10n ** BigInt(exponent);
  else denominator *= 10n ** BigInt(-exponent);
  // Rounded up (away from zero) to whole nano units; binary SI capped.
  let nanos = numerator / denominator + (numerator % denominator === 0n ? 0n : 1n);
  const cap = MAX_ALLOWED * 10n ** BigInt(NANO);
  if (base === 2 && nanos > cap) nanos = cap;
  return sign === "-" ? -nanos : nanos;
}

/**
 * Whether ParseQuantity's int64 path takes a zero ("0" with no fraction): its precision check
 * (18 digits less the number's; binary SI also less 3/10 of the exponent and one) passes and the
 * scale is at least nano.
 */
function int64PathForZero(base: 2 | 10, exponent: number): boolean {
  if (base === 10) return exponent >= -NANO;
  return 15 - 1 - Math.trunc((exponent * 3) / 10) - 1 >= 0;
}

/** fastLookup / suffixHandler.interpret: decimal SI, binary SI, or e/E and an integer exponent. */
function interpretSuffix(suffix: string): { base: 2 | 10; exponent: number } | undefined {
  const decimal: Record<string, number> = {
    "": 0,
    n: -9,
    u: -6,
    m: -3,
    k: 3,
    M: 6,
    G: 9,
    T: 12,
    P: 15,
    E: 18,
  };
  const binary: Record<string, number> = { Ki: 10, Mi: 20, Gi: 30, Ti: 40, Pi: 50, Ei: 60 };
  if (Object.hasOwn(decimal, suffix)) return { base: 10, exponent: decimal[suffix]! };
  if (Object.hasOwn(binary, suffix)) return { base: 2, exponent: binary[suffix]! };
  if (
    suffix.length > 1 &&
    (suffix[0] === "e" || suffix[0] === "E") &&
    /^[+-]?[0-9]+$/.test(suffix.slice(1))
  ) {
    const exponent = Number(suffix.slice(1));
    // Upstream takes any int64 (truncated to int32); one beyond ±999 is refused here, which the
    // property tests never generate.
    return Number.isSafeInteger(exponent) && Math.abs(exponent) < 1000 ? { base: 10, exponent } : undefined;
  }
  return undefined;
}
