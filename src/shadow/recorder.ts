import { randomBytes, randomUUID } from "node:crypto";
import type {
  CoreV1Event,
  V1Node,
  V1PersistentVolume,
  V1Pod,
  V1PersistentVolumeClaim,
  V1VolumeAttachment,
} from "@kubernetes/client-node";
import { accessModesKey, isVolumeBoundToClaim, volumeCapacity } from "../persistentvolume/pv-helpers.js";
import { claimQuery, volumeMatches } from "../persistentvolume/volume-index.js";
import { compareQuantities } from "../util/quantity.js";
import {
  attachmentDecisions,
  claimDecisions,
  eventDecisions,
  nodeDecisions,
  recyclerPodDecisions,
  volumeDecisions,
  type Decision,
} from "./decisions.js";

/** A mutating API request as the client would have sent it. */
export interface WriteRequest {
  method: string;
  /** Path and query, e.g. /api/v1/persistentvolumes/pv-1/status. */
  path: string;
  body: string | undefined;
}

/** The answer the controllers get instead of the apiserver's. */
export interface RecordedResponse {
  status: number;
  body: unknown;
}

/** The informers' current objects, which a write would have changed. */
export interface CurrentObjects {
  volume(name: string): V1PersistentVolume | undefined;
  volumes(): readonly V1PersistentVolume[];
  claim(namespace: string, name: string): V1PersistentVolumeClaim | undefined;
  /** In shadow mode, with the volumesAttached kvc last reported, where it reported one (ShadowMode). */
  node(name: string): V1Node | undefined;
  volumeAttachment(name: string): V1VolumeAttachment | undefined;
  /**
   * A version the informers held before the current one (or before the object went), by resource
   * ("persistentvolumes"), key ("name" or "namespace/name") and resourceVersion, if still remembered.
   */
  earlier?(resource: string, key: string, resourceVersion: string): unknown;
  /**
   * What replaced that version in the informers, if still remembered (`object` undefined: it was
   * deleted): what was done from it, by KCM or anyone.
   */
  replacedBy?(resource: string, key: string, resourceVersion: string): { object: unknown } | undefined;
}

/** A decision of a write made from an older version than the informers hold. */
export interface StaleDecision extends Decision {
  /** What was decided for the same key from that version instead (by KCM, or by hand), if anything. */
  upstream?: string;
}

/** What a write carries, and the answer kvc's controllers get. */
export interface Recorded {
  /** Decisions: what the write changes in the version the informers hold. */
  decisions: Decision[];
  /** What it changes in an older version, or where KCM was first: compared only with KCM's. */
  confirmations: StaleDecision[];
  response: RecordedResponse;
  /** Why the request was not understood: it carries nothing, and is refused as the apiserver would. */
  unparsed?: string;
}

interface Target {
  resource: string;
  namespace: string | undefined;
  name: string | undefined;
  subresource: string | undefined;
}

const CORE = /^\/api\/v1\/(?:namespaces\/([^/]+)\/)?([a-z]+)(?:\/([^/]+))?(?:\/([a-z]+))?$/;
const STORAGE = /^\/apis\/storage\.k8s\.io\/v1\/([a-z]+)(?:\/([^/]+))?(?:\/([a-z]+))?$/;

/** The resource a request path addresses; undefined for a path no controller writes. */
export function parseTarget(path: string): Target | undefined {
  const pathname = path.split("?")[0] ?? "";
  const core = CORE.exec(pathname);
  const decode = (s: string | undefined) => {
    try {
      return s === undefined ? undefined : decodeURIComponent(s);
    } catch {
      return s; // a malformed escape: the name as sent
    }
  };
  if (core) {
    return {
      namespace: decode(core[1]),
      resource: core[2] ?? "",
      name: decode(core[3]),
      subresource: core[4],
    };
  }
  const storage = STORAGE.exec(pathname);
  if (storage) {
    return {
      namespace: undefined,
      resource: storage[1] ?? "",
      name: decode(storage[2]),
      subresource: storage[3],
    };
  }
  return undefined;
}

function parseBody(body: string | undefined): Record<string, unknown> | undefined {
  if (body === undefined || body === "") return undefined;
  try {
    const parsed: unknown = JSON.parse(body);
    return parsed !== null && typeof parsed === "object" && !Array.isArray(parsed)
      ? (parsed as Record<string, unknown>)
      : undefined;
  } catch {
    return undefined;
  }
}

/** RFC 7386 JSON merge patch (the node status patch sends its whole list, so merge suffices there). */
export function mergePatch(target: unknown, patch: unknown): unknown {
  if (patch === null || typeof patch !== "object" || Array.isArray(patch)) return patch;
  const base =
    target !== null && typeof target === "object" && !Array.isArray(target)
      ? { ...(target as Record<string, unknown>) }
      : {};
  for (const [k, v] of Object.entries(patch as Record<string, unknown>)) {
    if (v === null) Reflect.deleteProperty(base, k);
    else base[k] = mergePatch(base[k], v);
  }
  return base;
}

/** The resources whose writes the shadow turns into decisions (or knows to carry none: a pod's). */
const MODELLED = new Set([
  "persistentvolumes",
  "persistentvolumeclaims",
  "nodes",
  "volumeattachments",
  "pods",
  "events",
]);

/**
 * What kvc would have written, in shadow mode: each mutating request is turned into the decisions it
 * carries (by comparing the object as the informers have it with the object as it would be after the
 * write: only the fields it changes, so a write that echoes KCM's values decides nothing) and
 * answered as the apiserver would have answered a success, with that object, so the controllers go
 * on as after a write and do not spin on errors. Nothing reaches the apiserver. A request that cannot
 * be understood (a path or subresource the shadow does not model, a body that is no JSON object) is
 * `unparsed`: counted and reported, and refused as the apiserver would refuse it (404, 400), never
 * answered with a success the shadow cannot vouch for.
 */
export function recordWrite(req: WriteRequest, current: CurrentObjects): Recorded {
  const target = parseTarget(req.path);
  const body = parseBody(req.body);
  const method = req.method.toUpperCase();
  const path = req.path.split("?")[0] ?? "";
  if (
    !target ||
    !MODELLED.has(target.resource) ||
    (target.subresource !== undefined && target.subresource !== "status") ||
    (method !== "POST" && target.name === undefined)
  ) {
    return refused(404, "NotFound", `${method} ${path}: no resource the shadow models`);
  }
  if (method !== "DELETE" && !body) {
    return refused(400, "BadRequest", `${method} ${path}: the body is not a JSON object`);
  }
  if (method === "POST") {
    const name = (body?.metadata as { name?: unknown } | undefined)?.name;
    if (typeof name === "string" && existing({ ...target, name }, current)) {
      // The apiserver's AlreadyExists: KCM created it first (the names kvc creates are deterministic:
      // a VolumeAttachment's, a provisioned PV's). What the create states can only confirm KCM's.
      const confirmations = decisionsOf(target, undefined, created(body ?? {}, target.namespace), current);
      return { decisions: [], confirmations, response: { status: 409, body: alreadyExists(target, name) } };
    }
  }
  const before = statusAsSent(req, target, beforeOf(target, current), body);
  const sent = (method === "PUT" || method === "PATCH") && versionOf(body);
  const gone = before === undefined && INFORMED.has(target.resource);
  const key = target.namespace === undefined ? target.name : `${target.namespace}/${target.name ?? ""}`;
  if (method === "DELETE" && gone) {
    // Deleted already (KCM reclaimed it first): kvc's deletion of the last version the informers had
    // can only confirm KCM's. The apiserver's 404.
    const last = current.earlier?.(target.resource, key ?? "", "deleted");
    const confirmations = last ? decisionsOf(target, notDeleting(last), undefined, current) : [];
    return { decisions: [], confirmations, response: { status: 404, body: notFound(target) } };
  }
  if (sent && (gone || isStale(body, before))) {
    // Written from an older version than the informers hold (KCM wrote since, or deleted it). What
    // the write would have done to the version it was made from is compared with what was done to
    // that version (the version that replaced it): the same confirms KCM's decision, another value
    // for the same key differs from it. It succeeds (not the apiserver's 409), so that kvc carries on
    // from its version as after its own write: a binding goes on to its phases, each compared in
    // turn. To a deleted object it is the apiserver's 404: nothing follows. A version no longer
    // remembered cannot say what the write changes: it confirms nothing.
    const from = current.earlier?.(target.resource, key ?? "", sent);
    const base = statusAsSent(req, target, from ?? { metadata: { name: target.name } }, body);
    const after = method === "PUT" ? body : (mergePatch(base, body ?? {}) as Record<string, unknown>);
    const replaced = current.replacedBy?.(target.resource, key ?? "", versionOf(from) ?? "");
    const done = replaced
      ? decisionsOf(target, from, replaced.object as Record<string, unknown> | undefined, current)
      : [];
    const changed = from === undefined ? [] : decisionsOf(target, base, after, current);
    const confirmations = changed.map((d): StaleDecision => {
      const upstream = done.find((u) => u.key === d.key)?.value;
      return upstream === undefined ? d : { ...d, upstream };
    });
    const response = gone
      ? { status: 404, body: notFound(target) }
      : { status: 200, body: method === "PUT" ? body : after };
    return { decisions: [], confirmations, response };
  }
  let after: Record<string, unknown> | undefined;
  let status = 200;
  switch (method) {
    case "POST":
      after = created(body ?? {}, target.namespace);
      status = 201;
      break;
    case "PUT":
      after = body ?? (before as Record<string, unknown> | undefined);
      break;
    case "PATCH":
      after = mergePatch(before ?? { metadata: { name: target.name } }, body ?? {}) as Record<
        string,
        unknown
      >;
      break;
    default: // DELETE: a finalizer keeps the object, being deleted, until it is removed
      after = deleted(before);
  }
  const decisions = decisionsOf(target, method === "POST" ? undefined : before, after, current);
  // A deletion KCM asked for first (the object is being deleted): kvc's request, an act and not an
  // echo of fields, confirms it.
  const confirmations =
    method === "DELETE"
      ? decisionsOf(target, notDeleting(before), after, current).filter(
          (s) => !decisions.some((d) => d.key === s.key),
        )
      : [];
  const response =
    method === "DELETE"
      ? { kind: "Status", apiVersion: "v1", status: "Success", details: { name: target.name } }
      : after;
  return { decisions, confirmations, response: { status, body: response } };
}

/**
 * The object a PUT of the main resource was made from, with the status the body states: the apiserver
 * ignores a status there, so it is kvc's view, which its own status writes (recorded, never applied)
 * made. Whose a finalizer's removal is depends on it (the binder's, from a Released volume).
 */
function statusAsSent(
  req: WriteRequest,
  t: Target,
  before: unknown,
  body: Record<string, unknown> | undefined,
) {
  if (req.method.toUpperCase() !== "PUT" || t.subresource !== undefined || body?.status === undefined) {
    return before;
  }
  return before === undefined ? before : { ...(before as Record<string, unknown>), status: body.status };
}

type Obj = { metadata?: { finalizers?: string[]; deletionTimestamp?: unknown } } & Record<string, unknown>;

function deleted(before: unknown): Record<string, unknown> | undefined {
  const o = before as Obj | undefined;
  if (!o?.metadata?.finalizers?.length) return undefined;
  return { ...o, metadata: { ...o.metadata, deletionTimestamp: o.metadata.deletionTimestamp ?? new Date() } };
}

function notDeleting(before: unknown): unknown {
  const o = before as Obj | undefined;
  if (!o?.metadata) return o;
  const metadata = { ...o.metadata };
  delete metadata.deletionTimestamp;
  return { ...o, metadata };
}

/** The resources whose current objects the informers hold (an absent one is gone). */
const INFORMED = new Set(["persistentvolumes", "persistentvolumeclaims", "nodes"]);

/** An object's resourceVersion when it is a (decimal) one. */
function versionOf(o: unknown): string | undefined {
  const rv = (o as { metadata?: { resourceVersion?: unknown } } | undefined)?.metadata?.resourceVersion;
  return typeof rv === "string" && /^\d{1,19}$/.test(rv) ? rv : undefined;
}

/** The body names an older resourceVersion than the object has: the apiserver's conflict. */
function isStale(body: unknown, before: unknown): boolean {
  const sent = versionOf(body);
  const held = versionOf(before);
  return sent !== undefined && held !== undefined && BigInt(sent) < BigInt(held);
}

/** An unparsed request's answer: the apiserver's Status for it. */
function refused(code: number, reason: string, message: string): Recorded {
  const body = { kind: "Status", apiVersion: "v1", status: "Failure", reason, code, message };
  return { decisions: [], confirmations: [], response: { status: code, body }, unparsed: message };
}

function notFound(t: Target) {
  return {
    kind: "Status",
    apiVersion: "v1",
    status: "Failure",
    reason: "NotFound",
    code: 404,
    message: `${t.resource} "${t.name ?? ""}" not found`,
    details: { name: t.name, kind: t.resource },
  };
}

function alreadyExists(t: Target, name: string) {
  return {
    kind: "Status",
    apiVersion: "v1",
    status: "Failure",
    reason: "AlreadyExists",
    code: 409,
    message: `${t.resource} "${name}" already exists`,
    details: { name, kind: t.resource },
  };
}

/** Whether the informers hold the object `t` names. */
function existing(t: Target, current: CurrentObjects): boolean {
  if (t.name === undefined) return false;
  switch (t.resource) {
    case "volumeattachments":
      return current.volumeAttachment(t.name) !== undefined;
    case "persistentvolumes":
    case "persistentvolumeclaims":
    case "nodes":
      return beforeOf(t, current) !== undefined;
    default:
      return false;
  }
}

function beforeOf(t: Target, current: CurrentObjects): unknown {
  if (t.name === undefined) return undefined;
  switch (t.resource) {
    case "persistentvolumes":
      return current.volume(t.name);
    case "persistentvolumeclaims":
      return current.claim(t.namespace ?? "", t.name);
    case "nodes":
      return current.node(t.name);
    case "volumeattachments":
      return current.volumeAttachment(t.name) ?? { metadata: { name: t.name }, spec: { source: {} } };
    default:
      return undefined;
  }
}

function created(body: Record<string, unknown>, namespace: string | undefined): Record<string, unknown> {
  const metadata = (body.metadata ?? {}) as Record<string, unknown>;
  const generated =
    typeof metadata.generateName === "string"
      ? `${metadata.generateName}${randomBytes(3).toString("hex")}`
      : "";
  return {
    ...body,
    metadata: {
      ...metadata,
      name: typeof metadata.name === "string" && metadata.name !== "" ? metadata.name : generated,
      ...(namespace !== undefined && { namespace }),
      uid: randomUUID(),
      resourceVersion: "0",
      creationTimestamp: new Date().toISOString(),
    },
  };
}

function decisionsOf(
  t: Target,
  before: unknown,
  after: Record<string, unknown> | undefined,
  current: CurrentObjects,
): Decision[] {
  switch (t.resource) {
    case "persistentvolumes":
      return withTies(volumeDecisions(before as V1PersistentVolume | undefined, after), current);
    case "persistentvolumeclaims":
      return withTies(claimDecisions(before as V1PersistentVolumeClaim | undefined, after), current);
    case "nodes":
      return nodeDecisions(before as V1Node | undefined, after);
    case "volumeattachments":
      return attachmentDecisions(
        before as V1VolumeAttachment | undefined,
        after as V1VolumeAttachment | undefined,
      );
    case "pods":
      return recyclerPodDecisions(before as V1Pod | undefined, after);
    case "events":
      // A patch of an event only counts a repeat: the decision was its creation.
      return before === undefined && after && t.name === undefined
        ? eventDecisions(after as unknown as CoreV1Event)
        : [];
    default:
      return [];
  }
}

/**
 * Adds to each binding the volumes upstream could as well have chosen: upstream's matcher takes the
 * smallest matching volume, and among equally small ones whichever its map iteration meets first.
 */
function withTies(decisions: Decision[], current: CurrentObjects): Decision[] {
  return decisions.map((d) => {
    if (d.kind !== "binding") return d;
    const [namespace = "", name = ""] = d.key.replace(/^binding pvc /, "").split("/");
    const claim = current.claim(namespace, name);
    const chosen = current.volume(d.value);
    if (!claim || !chosen) return d;
    return { ...d, equivalents: equalChoices(claim, chosen, current.volumes()) };
  });
}

/**
 * The volumes other than `chosen` that upstream's binder could as well have taken for the claim: both
 * pass every rule of the binder's matcher (volumeMatches: access modes, size, volume mode,
 * VolumeAttributesClass, deletion, selector, class; no node on the controller's path, as upstream's
 * findBestMatchForClaim passes none) and are equally good by its order: the same access modes (one
 * index bucket) and the same capacity. Upstream takes the smallest match in the first bucket with one
 * and leaves equal ones to Go's map order; kvc breaks that tie by name. None when `chosen` itself
 * breaks a rule: nothing is as good as a mistake.
 */
export function equalChoices(
  claim: V1PersistentVolumeClaim,
  chosen: V1PersistentVolume,
  volumes: readonly V1PersistentVolume[],
): string[] {
  const query = claimQuery(claim);
  const mine = asCandidate(chosen, claim);
  const size = volumeCapacity(chosen);
  if (query instanceof Error || !mine || !size || !volumeMatches(query, mine)) return [];
  const modes = accessModesKey(chosen.spec?.accessModes);
  return volumes
    .filter((pv) => {
      if (pv.metadata?.name === chosen.metadata?.name) return false;
      const candidate = asCandidate(pv, claim);
      const capacity = volumeCapacity(pv);
      return (
        candidate !== undefined &&
        capacity !== undefined &&
        compareQuantities(capacity, size) === 0 &&
        accessModesKey(pv.spec?.accessModes) === modes &&
        volumeMatches(query, candidate)
      );
    })
    .map((pv) => pv.metadata?.name ?? "");
}

/**
 * `pv` as the matcher met it when the binding was decided, unbound and Available: upstream's choice
 * may already show in the cache, bound to this very claim (judged as pre-bound, it would pass without
 * class or selector), and a volume not yet Available there (no phase, Pending) is Available to
 * upstream once its volume sync ran. Undefined: bound to another claim, or Released or Failed.
 */
function asCandidate(pv: V1PersistentVolume, claim: V1PersistentVolumeClaim): V1PersistentVolume | undefined {
  if (pv.spec?.claimRef != null && !isVolumeBoundToClaim(pv, claim)) return undefined;
  if (pv.status?.phase === "Released" || pv.status?.phase === "Failed") return undefined;
  if (pv.spec?.claimRef == null && pv.status?.phase === "Available") return pv;
  const spec: V1PersistentVolume["spec"] = Object.assign({}, pv.spec, { claimRef: undefined });
  return Object.assign({}, pv, { spec, status: Object.assign({}, pv.status, { phase: "Available" }) });
}
