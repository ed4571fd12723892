import * as models from "@kubernetes/client-node";
import type { KubernetesObject } from "@kubernetes/client-node";
import type { ResourceType } from "./informer/resources.js";
import { trimManagedFields } from "./informer/transform.js";

/**
 * API objects as JSON ↔ the shape client-node's models give them, keeping every field.
 *
 * client-node's ObjectSerializer rebuilds each object from its model's attribute list, both ways: a
 * field its models lack is dropped. Against v1.37, client-node 2.0.1 lacks
 * PersistentVolumeClaimStatus.healthStatus (among others), so a claim decoded by it and written back
 * by a PUT of its status erased that field on the server. It also walks every field of every object
 * with string type lookups, most of kvc's decoding CPU. Here an object is JSON.parse'd and only what
 * the models type differently from JSON is converted: date-time strings become Dates, in place.
 * Encoding is JSON.stringify (a Date's toJSON is the ISO string ObjectSerializer writes too).
 */

/** What to convert in one model's JSON: own Date fields, and nested models with something to convert. */
interface Plan {
  readonly dates: string[];
  readonly nested: [field: string, shape: Shape, plan: Plan][];
}

type Shape = "one" | "array" | "map";

interface Attribute {
  name: string;
  baseName: string;
  type: string;
}

type Model = { getAttributeTypeMap(): Attribute[] };

const ARRAY = /^Array<(.+)>$/;
const MAP = /^\{ \[key: string\]: (.+); \}$/;

const plans = new Map<string, Plan>();
const compiling = new Set<Plan>();

function modelClass(type: string): Model | undefined {
  const value = (models as Record<string, unknown>)[type];
  return typeof value === "function" && "getAttributeTypeMap" in value
    ? (value as unknown as Model)
    : undefined;
}

/** The plan of a model, compiled once; recursive models share their plan object. */
function planOf(model: string): Plan {
  const known = plans.get(model);
  if (known) return known;
  const cls = modelClass(model);
  if (!cls) throw new Error(`client-node has no model ${model}`);
  const plan: Plan = { dates: [], nested: [] };
  plans.set(model, plan);
  compiling.add(plan);
  for (const attribute of cls.getAttributeTypeMap()) {
    // Decoding in place keeps JSON's names; ObjectSerializer would rename these few (none reachable
    // from the kinds kvc reads: JSONSchemaProps' "$ref", ListMeta's "continue" ...).
    if (attribute.name !== attribute.baseName) {
      throw new Error(`model ${model} renames ${attribute.baseName} to ${attribute.name}: not supported`);
    }
    let type = attribute.type.replace(/ \| (null|undefined)$/, "");
    let shape: Shape = "one";
    const array = ARRAY.exec(type);
    const map = MAP.exec(type);
    if (array?.[1]) [type, shape] = [array[1], "array"];
    else if (map?.[1]) [type, shape] = [map[1], "map"];
    if (type === "Date") {
      // No model holds a list or map of dates.
      if (shape !== "one") throw new Error(`model ${model}: ${attribute.name} is a ${shape} of Date`);
      plan.dates.push(attribute.baseName);
    } else if (modelClass(type)) {
      const child = planOf(type);
      if (!isEmpty(child)) plan.nested.push([attribute.baseName, shape, child]);
    }
  }
  compiling.delete(plan);
  return plan;
}

/** A plan still being compiled (a model reached from itself) may yet get something to convert. */
const isEmpty = (plan: Plan): boolean =>
  !compiling.has(plan) && plan.dates.length === 0 && plan.nested.length === 0;

function apply(value: unknown, plan: Plan): void {
  if (value === null || typeof value !== "object") return;
  const obj = value as Record<string, unknown>;
  for (const field of plan.dates) {
    const v = obj[field];
    if (v !== undefined && v !== null && !(v instanceof Date)) obj[field] = new Date(v as string);
  }
  for (const [field, shape, child] of plan.nested) {
    const v = obj[field];
    if (v === undefined || v === null) continue;
    if (shape === "one") apply(v, child);
    else if (shape === "array") {
      if (Array.isArray(v)) for (const item of v) apply(item, child);
    } else for (const item of Object.values(v)) apply(item, child);
  }
}

/**
 * A decoder of parsed JSON into the shape of the resource's model (e.g. V1PersistentVolume),
 * converting in place. Throws at once when the model cannot be decoded this way.
 */
export function modelDecoder<T extends KubernetesObject>(resource: ResourceType<T>): (json: unknown) => T {
  const plan = planOf(resource.model);
  return (json) => {
    apply(json, plan);
    return json as T;
  };
}

/**
 * The decoder of objects kvc caches (informers' lists and watch events, and the binder's answers to
 * its writes, which go to the same cache): modelDecoder's, without metadata.managedFields
 * (trimManagedFields). `inspect` sees the JSON first, managedFields still there; it must not change
 * it. They are trimmed before decoding, which would make a Date of each entry's time for nothing.
 */
export function cachedObjectDecoder<T extends KubernetesObject>(
  resource: ResourceType<T>,
  inspect?: (json: unknown) => void,
): (json: unknown) => T {
  const decode = modelDecoder(resource);
  return (json) => {
    inspect?.(json);
    return decode(trimManagedFields(json));
  };
}
