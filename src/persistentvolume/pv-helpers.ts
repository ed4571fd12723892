import type {
  V1LabelSelector,
  V1NodeSelectorRequirement,
  V1NodeSelectorTerm,
  V1PersistentVolume,
  V1PersistentVolumeClaim,
  V1PersistentVolumeClaimSpec,
  V1PersistentVolumeSpec,
  V1StorageClass,
} from "@kubernetes/client-node";
import { tryParseQuantity, type Quantity } from "../util/quantity.js";
import { VolumeBindingMode } from "./annotations.js";

/**
 * Pure ports of component-helpers storage/volume (pv_helpers.go, helpers.go) and of the label and
 * node selector semantics they rely on (apimachinery labels, nodeaffinity). Nothing here throws on a
 * malformed object: missing fields read as upstream's zero values, unparsable ones as undefined.
 */

export const BETA_STORAGE_CLASS_ANNOTATION = "volume.beta.kubernetes.io/storage-class";
const FILESYSTEM = "Filesystem";

/** The access modes in upstream's canonical order (GetAccessModesAsString); bit i of a mask is mode i. */
export const ACCESS_MODES = ["ReadWriteOnce", "ReadOnlyMany", "ReadWriteMany", "ReadWriteOncePod"] as const;
const ACCESS_MODE_ABBREVIATIONS = ["RWO", "ROX", "RWX", "RWOP"] as const;

/** GetPersistentVolumeClaimClass: the beta annotation wins, even when empty; no class at all is "". */
export function getClaimClass(claim: V1PersistentVolumeClaim): string {
  return claim.metadata?.annotations?.[BETA_STORAGE_CLASS_ANNOTATION] ?? claim.spec?.storageClassName ?? "";
}

/** GetPersistentVolumeClass: the beta annotation wins, even when empty. */
export function getVolumeClass(pv: V1PersistentVolume): string {
  return pv.metadata?.annotations?.[BETA_STORAGE_CLASS_ANNOTATION] ?? pv.spec?.storageClassName ?? "";
}

/**
 * IsDelayBindingMode: whether binding waits for the scheduler (the class is WaitForFirstConsumer).
 * No class, or a class that does not exist (yet), binds immediately; a class without a binding mode
 * is an error (the API server defaults it to Immediate, so only a hand-made object lacks it).
 */
export function isDelayBindingMode(
  claim: V1PersistentVolumeClaim,
  classes: { get(name: string): V1StorageClass | undefined },
): boolean | Error {
  const className = getClaimClass(claim);
  if (className === "") return false;
  const storageClass = classes.get(className);
  if (!storageClass) return false;
  const mode = storageClass.volumeBindingMode;
  if (mode === undefined) return new Error(`VolumeBindingMode not set for StorageClass "${className}"`);
  return mode === VolumeBindingMode.WaitForFirstConsumer;
}

/** IsVolumeBoundToClaim: claimRef names the claim; a claimRef UID, when present, must be the claim's. */
export function isVolumeBoundToClaim(pv: V1PersistentVolume, claim: V1PersistentVolumeClaim): boolean {
  const ref = pv.spec?.claimRef;
  if (ref == null) return false;
  if ((ref.name ?? "") !== (claim.metadata?.name ?? "")) return false;
  if ((ref.namespace ?? "") !== (claim.metadata?.namespace ?? "")) return false;
  return !ref.uid || ref.uid === (claim.metadata?.uid ?? "");
}

/** A volumeMode as CheckVolumeModeMismatches reads it: nil means Filesystem (HA upgrades may omit it). */
export function volumeModeOf(spec: V1PersistentVolumeClaimSpec | V1PersistentVolumeSpec | undefined): string {
  return spec?.volumeMode ?? FILESYSTEM;
}

/** CheckVolumeModeMismatches. */
export function volumeModeMismatch(
  claimSpec: V1PersistentVolumeClaimSpec | undefined,
  pvSpec: V1PersistentVolumeSpec | undefined,
): boolean {
  return volumeModeOf(claimSpec) !== volumeModeOf(pvSpec);
}

/** The claim's VolumeAttributesClass, nil read as "" (the VAC-enabled comparison). */
export function claimVAC(claim: V1PersistentVolumeClaim): string {
  return claim.spec?.volumeAttributesClassName ?? "";
}

export function volumeVAC(pv: V1PersistentVolume): string {
  return pv.spec?.volumeAttributesClassName ?? "";
}

/** spec.capacity.storage; undefined when missing or unparsable. */
export function volumeCapacity(pv: V1PersistentVolume): Quantity | undefined {
  return tryParseQuantity(pv.spec?.capacity?.storage);
}

/** spec.resources.requests.storage; undefined when missing or unparsable. */
export function claimRequest(claim: V1PersistentVolumeClaim): Quantity | undefined {
  return tryParseQuantity(claim.spec?.resources?.requests?.storage);
}

export function claimKey(claim: V1PersistentVolumeClaim): string {
  return `${claim.metadata?.namespace ?? ""}/${claim.metadata?.name ?? ""}`;
}

/** CheckAccessModes: the PV offers every requested mode (plain string membership, as upstream). */
export function checkAccessModes(claim: V1PersistentVolumeClaim, pv: V1PersistentVolume): boolean {
  const offered = new Set(pv.spec?.accessModes ?? []);
  return (claim.spec?.accessModes ?? []).every((mode) => offered.has(mode));
}

/** The bit mask of the known modes in `modes`; unknown modes are ignored, as in the access-mode index. */
export function accessModesMask(modes: readonly string[] | undefined): number {
  let mask = 0;
  for (const mode of modes ?? []) {
    const bit = (ACCESS_MODES as readonly string[]).indexOf(mode);
    if (bit >= 0) mask |= 1 << bit;
  }
  return mask;
}

/** Modes that are none of the four known ones. */
export function unknownAccessModes(modes: readonly string[] | undefined): string[] {
  return (modes ?? []).filter((mode) => !(ACCESS_MODES as readonly string[]).includes(mode));
}

/** GetAccessModesAsString: "RWO,ROX,RWX,RWOP" order, deduplicated, unknown modes dropped. */
export function accessModesKey(modes: readonly string[] | undefined): string {
  const mask = accessModesMask(modes);
  return ACCESS_MODE_ABBREVIATIONS.filter((_, bit) => mask & (1 << bit)).join(",");
}

// ---- label selectors (apimachinery labels.Requirement / metav1.LabelSelectorAsSelector) ----

export type Labels = Readonly<Record<string, string>> | undefined;
/** A compiled selector: true when the labels satisfy every requirement. */
export type LabelMatcher = (labels: Labels) => boolean;

type Operator = "In" | "NotIn" | "Exists" | "DoesNotExist" | "Gt" | "Lt";
interface Requirement {
  readonly key: string;
  readonly operator: Operator;
  readonly values: readonly string[];
}

const matchEverything: LabelMatcher = () => true;

/**
 * LabelSelectorAsSelector as FindMatchingVolume uses it. A nil selector means the claim has no
 * selector and matches everything (FindMatchingVolume skips the check; note LabelSelectorAsSelector
 * itself would answer Nothing); {} matches everything. Invalid keys, values or operators give an Error
 * with upstream's message. matchLabels are checked in object order (Go ranges over a map, randomly).
 */
export function compileLabelSelector(selector: V1LabelSelector | undefined): LabelMatcher | Error {
  if (selector == null) return matchEverything;
  const requirements: Requirement[] = [];
  for (const [key, value] of Object.entries(selector.matchLabels ?? {})) {
    const parsed = newRequirement(key, "In", [value], "");
    if (Array.isArray(parsed)) return new Error(aggregate(parsed));
    requirements.push(parsed);
  }
  for (const expr of selector.matchExpressions ?? []) {
    const operator = expr.operator as Operator;
    if (!["In", "NotIn", "Exists", "DoesNotExist"].includes(operator)) {
      return new Error(`${quote(expr.operator)} is not a valid label selector operator`);
    }
    // Upstream copies values with append([]string(nil), ...): an empty list prints as null.
    const values = expr.values?.length ? expr.values : undefined;
    const parsed = newRequirement(expr.key, operator, values, "");
    if (Array.isArray(parsed)) return new Error(aggregate(parsed));
    requirements.push(parsed);
  }
  if (requirements.length === 0) return matchEverything;
  return (labels) => requirements.every((r) => requirementMatches(r, labels));
}

function requirementMatches(r: Requirement, labels: Labels): boolean {
  const value = labelValue(labels, r.key);
  switch (r.operator) {
    case "In":
      return value !== undefined && r.values.includes(value);
    case "NotIn":
      return value === undefined || !r.values.includes(value);
    case "Exists":
      return value !== undefined;
    case "DoesNotExist":
      return value === undefined;
    case "Gt":
    case "Lt": {
      const actual = value === undefined ? undefined : parseInt64(value);
      const bound = r.values.length === 1 ? parseInt64(r.values[0] ?? "") : undefined;
      if (actual === undefined || bound === undefined) return false;
      return r.operator === "Gt" ? actual > bound : actual < bound;
    }
  }
}

/** Own properties only: a label key such as "constructor" must not find Object.prototype's. */
function labelValue(labels: Labels, key: string): string | undefined {
  if (labels == null || !Object.hasOwn(labels, key)) return undefined;
  const value = labels[key];
  return typeof value === "string" ? value : undefined;
}

/** labels.NewRequirement: the requirement, or every validation message (field path prefixed by `path`). */
function newRequirement(
  key: string,
  operator: Operator,
  values: readonly string[] | undefined,
  path: string,
): Requirement | string[] {
  const errors: string[] = [];
  const keyErrors = labelKeyErrors(key);
  if (keyErrors.length) errors.push(invalid(child(path, "key"), quote(key), keyErrors.join("; ")));
  const valuesPath = child(path, "values");
  const list = values ?? [];
  switch (operator) {
    case "In":
    case "NotIn":
      if (list.length === 0) {
        errors.push(
          invalid(valuesPath, json(values), "for 'in', 'notin' operators, values set can't be empty"),
        );
      }
      break;
    case "Exists":
    case "DoesNotExist":
      if (list.length !== 0) {
        errors.push(
          invalid(valuesPath, json(values), "values set must be empty for exists and does not exist"),
        );
      }
      break;
    case "Gt":
    case "Lt":
      if (list.length !== 1) {
        errors.push(
          invalid(valuesPath, json(values), "for 'Gt', 'Lt' operators, exactly one value is required"),
        );
      }
      list.forEach((value, i) => {
        if (parseInt64(value) === undefined) {
          const detail = "for 'Gt', 'Lt' operators, the value must be an integer";
          errors.push(invalid(`${valuesPath}[${i}]`, quote(value), detail));
        }
      });
      break;
  }
  list.forEach((value, i) => {
    const valueErrors = labelValueErrors(value);
    if (valueErrors.length) {
      errors.push(invalid(`${valuesPath}[${i}][${key}]`, quote(value), valueErrors.join("; ")));
    }
  });
  return errors.length ? errors : { key, operator, values: list };
}

const LABEL_KEY_FMT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
const LABEL_KEY_MSG =
  "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
const LABEL_VALUE_FMT = `(${LABEL_KEY_FMT})?`;
const LABEL_VALUE_MSG =
  "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
const DNS1123_LABEL_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?";
const DNS1123_SUBDOMAIN_FMT = `${DNS1123_LABEL_FMT}(\\.${DNS1123_LABEL_FMT})*`;
const DNS1123_SUBDOMAIN_MSG =
  "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character";
const LABEL_KEY_RE = new RegExp(`^${LABEL_KEY_FMT}$`);
const LABEL_VALUE_RE = new RegExp(`^${LABEL_VALUE_FMT}$`);
const DNS1123_SUBDOMAIN_RE = new RegExp(`^${DNS1123_SUBDOMAIN_FMT}$`);

/** content.IsLabelKey. Lengths are in UTF-8 bytes, as Go's len(). */
function labelKeyErrors(value: string): string[] {
  const parts = value.split("/");
  if (parts.length > 2) {
    return [
      `a valid label key ${regexError(LABEL_KEY_MSG, LABEL_KEY_FMT, "MyName", "my.name", "123-abc")}` +
        " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
    ];
  }
  const errors: string[] = [];
  const name = parts.at(-1) ?? "";
  if (parts.length === 2) {
    const prefix = parts[0] ?? "";
    if (prefix === "") errors.push("prefix part must be non-empty");
    else {
      if (Buffer.byteLength(prefix) > 253) errors.push("prefix part must be no more than 253 bytes");
      if (!DNS1123_SUBDOMAIN_RE.test(prefix)) {
        errors.push(`prefix part ${regexError(DNS1123_SUBDOMAIN_MSG, DNS1123_SUBDOMAIN_FMT, "example.com")}`);
      }
    }
  }
  if (name === "") errors.push("name part must be non-empty");
  else if (Buffer.byteLength(name) > 63) errors.push("name part must be no more than 63 bytes");
  if (!LABEL_KEY_RE.test(name)) {
    errors.push(`name part ${regexError(LABEL_KEY_MSG, LABEL_KEY_FMT, "MyName", "my.name", "123-abc")}`);
  }
  return errors;
}

/** content.IsLabelValue. */
function labelValueErrors(value: string): string[] {
  const errors: string[] = [];
  if (Buffer.byteLength(value) > 63) errors.push("must be no more than 63 bytes");
  if (!LABEL_VALUE_RE.test(value)) {
    errors.push(regexError(LABEL_VALUE_MSG, LABEL_VALUE_FMT, "MyValue", "my_value", "12345"));
  }
  return errors;
}

function regexError(message: string, re: string, ...examples: string[]): string {
  return `${message} (e.g. ${examples.map((e) => `'${e}', `).join(" or ")}regex used for validation is '${re}')`;
}

/** strconv.ParseInt(s, 10, 64). */
function parseInt64(text: string): bigint | undefined {
  if (!/^[+-]?[0-9]+$/.test(text)) return undefined;
  const value = BigInt(text);
  return value >= -(1n << 63n) && value < 1n << 63n ? value : undefined;
}

// field.Error rendering. Go quotes strings with %q and other values with encoding/json; JSON.stringify
// agrees with both for printable text.
const quote = (value: string): string => JSON.stringify(value);
const json = (values: readonly string[] | undefined): string => JSON.stringify(values ?? null);
const child = (path: string, name: string): string => (path === "" ? name : `${path}.${name}`);
const invalid = (field: string, value: string, detail: string): string =>
  `${field}: Invalid value: ${value}: ${detail}`;
const notSupported = (field: string, value: string, supported: readonly string[]): string =>
  `${field}: Unsupported value: ${quote(value)}: supported values: ${supported.map(quote).join(", ")}`;

/** utilerrors aggregate: one message alone, several deduplicated inside brackets. */
function aggregate(messages: readonly string[]): string {
  const unique = [...new Set(messages)];
  return unique.length === 1 ? (unique[0] ?? "") : `[${unique.join(", ")}]`;
}

// ---- node affinity (component-helpers CheckNodeAffinity, nodeaffinity.LazyErrorNodeSelector) ----

const NODE_SELECTOR_OPERATORS = ["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"] as const;
const NODE_FIELD_OPERATORS = ["In", "NotIn"] as const;

/**
 * CheckNodeAffinity: undefined when the PV's required node affinity admits a node with these labels,
 * else an Error (upstream's parse errors, or "no matching NodeSelectorTerms"). Terms are ORed; an empty
 * term matches nothing; a term's parse errors are reported only if no term matches. The node has no
 * name here, so matchFields are validated but never constrain, exactly as upstream.
 */
export function checkNodeAffinity(pv: V1PersistentVolume, nodeLabels: Labels): Error | undefined {
  const required = pv.spec?.nodeAffinity?.required;
  if (required == null) return undefined;
  // Required by the schema; a decoded object may still lack it.
  const terms = required.nodeSelectorTerms as V1NodeSelectorTerm[] | undefined;
  const errors: string[] = [];
  for (const [t, term] of (terms ?? []).entries()) {
    const expressions = term.matchExpressions ?? [];
    const fields = term.matchFields ?? [];
    if (expressions.length === 0 && fields.length === 0) continue;
    const path = `nodeSelectorTerms[${t}]`;
    const requirements: Requirement[] = [];
    const termErrors: string[] = [];
    expressions.forEach((expr, i) => {
      const at = `${path}.matchExpressions[${i}]`;
      if (!(NODE_SELECTOR_OPERATORS as readonly string[]).includes(expr.operator)) {
        termErrors.push(notSupported(`${at}.operator`, expr.operator, NODE_SELECTOR_OPERATORS));
        return;
      }
      const parsed = newRequirement(expr.key, expr.operator as Operator, expr.values, at);
      if (Array.isArray(parsed)) termErrors.push(...parsed);
      else requirements.push(parsed);
    });
    fields.forEach((expr, i) =>
      termErrors.push(...fieldRequirementErrors(expr, `${path}.matchFields[${i}]`)),
    );
    if (termErrors.length) errors.push(...termErrors);
    else if (requirements.every((r) => requirementMatches(r, nodeLabels))) return undefined;
  }
  return new Error(errors.length ? aggregate(errors) : "no matching NodeSelectorTerms");
}

/** nodeSelectorRequirementsAsFieldSelector's validation. */
function fieldRequirementErrors(expr: V1NodeSelectorRequirement, at: string): string[] {
  if (!(NODE_FIELD_OPERATORS as readonly string[]).includes(expr.operator)) {
    return [notSupported(`${at}.operator`, expr.operator, NODE_FIELD_OPERATORS)];
  }
  if (expr.values?.length !== 1) return [invalid(`${at}.values`, json(expr.values), "must have one element")];
  return [];
}
