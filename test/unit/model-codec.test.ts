import assert from "node:assert/strict";
import { describe, test } from "node:test";
import * as models from "@kubernetes/client-node";
import { ObjectSerializer } from "@kubernetes/client-node/dist/gen/models/ObjectSerializer.js";
import fc from "fast-check";
import { cachedObjectDecoder, modelDecoder } from "../../src/runtime/model-codec.js";
import * as resources from "../../src/runtime/informer/resources.js";
import type { ResourceType } from "../../src/runtime/informer/resources.js";

interface Attribute {
  baseName: string;
  type: string;
}

const attributesOf = (type: string): Attribute[] | undefined =>
  (models as unknown as Record<string, { getAttributeTypeMap?: () => Attribute[] }>)[
    type
  ]?.getAttributeTypeMap?.();

/** JSON shaped by client-node's model of `type`, a few levels deep, every field optional. */
function jsonOf(type: string, depth = 0): fc.Arbitrary<unknown> {
  type = type.replace(/ \| (null|undefined)$/, "");
  const array = /^Array<(.+)>$/.exec(type)?.[1];
  if (array) return fc.array(jsonOf(array, depth + 1), { maxLength: 2 });
  const map = /^\{ \[key: string\]: (.+); \}$/.exec(type)?.[1];
  if (map) return fc.dictionary(fc.string({ maxLength: 3 }), jsonOf(map, depth + 1), { maxKeys: 2 });
  if (type === "Date") return fc.date({ noInvalidDate: true }).map((d) => d.toISOString());
  if (type === "number") return fc.integer();
  if (type === "boolean") return fc.boolean();
  const attributes = attributesOf(type);
  if (!attributes) return fc.string({ maxLength: 4 });
  if (depth > 5) return fc.constant({});
  return fc.record(Object.fromEntries(attributes.map((a) => [a.baseName, jsonOf(a.type, depth + 1)])), {
    requiredKeys: [],
  });
}

/** Comparable form: Dates marked, class instances as plain objects. */
function canonical(value: unknown): unknown {
  if (value instanceof Date) return { date: value.toISOString() };
  if (Array.isArray(value)) return value.map(canonical);
  if (value !== null && typeof value === "object") {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, canonical(v)]));
  }
  return value;
}

const shadowEvents = {
  groupVersionPath: "/api/v1",
  plural: "events",
  namespaced: true,
  model: "CoreV1Event",
};
const RESOURCES: Omit<ResourceType<models.KubernetesObject>, "transform">[] = [
  ...Object.values(resources),
  shadowEvents,
];

describe("model-codec", () => {
  test("decodes every informer's model as client-node's ObjectSerializer does", () => {
    for (const resource of RESOURCES) {
      const { model } = resource;
      const decode = modelDecoder(resource);
      fc.assert(
        fc.property(jsonOf(model), (json) => {
          const theirs = ObjectSerializer.deserialize(structuredClone(json), model, "") as unknown;
          assert.deepEqual(canonical(decode(structuredClone(json))), canonical(theirs), model);
        }),
        { numRuns: 40 },
      );
    }
  });

  test("keeps the fields client-node's models lack", () => {
    const json = {
      metadata: { name: "c", creationTimestamp: "2026-12-04T10:00:00Z", futureField: 1 },
      status: {
        phase: "Bound",
        healthStatus: { abnormal: true },
        conditions: [{ type: "Resizing", lastTransitionTime: "2026-12-04T10:00:01Z" }],
      },
    };
    const decoded = modelDecoder(resources.persistentVolumeClaims)(structuredClone(json));
    const dropped = ObjectSerializer.deserialize(
      structuredClone(json),
      "V1PersistentVolumeClaim",
      "",
    ) as object;
    assert.equal(JSON.stringify(dropped).includes("healthStatus"), false, "ObjectSerializer drops it");
    assert.deepEqual((decoded.status as Record<string, unknown>).healthStatus, { abnormal: true });
    assert.equal((decoded.metadata as Record<string, unknown>).futureField, 1);
    assert.deepEqual(decoded.status?.conditions?.[0]?.lastTransitionTime, new Date("2026-12-04T10:00:01Z"));
    // Encoded back as the apiserver sent it.
    assert.deepEqual(JSON.parse(JSON.stringify(decoded)), {
      ...json,
      metadata: { ...json.metadata, creationTimestamp: "2026-12-04T10:00:00.000Z" },
      status: {
        ...json.status,
        conditions: [{ type: "Resizing", lastTransitionTime: "2026-12-04T10:00:01.000Z" }],
      },
    });
  });

  test("the cache's decoder shows managedFields to its inspector, then drops them", () => {
    const managedFields = [{ manager: "kube-controller-manager", time: "2026-12-04T10:00:00Z" }];
    const seen: unknown[] = [];
    const decode = cachedObjectDecoder(resources.persistentVolumes, (json) => {
      seen.push(structuredClone((json as models.KubernetesObject).metadata?.managedFields));
    });
    const pv = decode({ metadata: { name: "v", creationTimestamp: "2026-12-04T10:00:00Z", managedFields } });
    assert.deepEqual(seen, [managedFields]);
    assert.equal(pv.metadata?.managedFields, undefined);
    assert.deepEqual(pv.metadata?.creationTimestamp, new Date("2026-12-04T10:00:00Z"));
  });

  test("a model that renames a field is refused at once", () => {
    assert.throws(
      () => modelDecoder({ ...shadowEvents, model: "V1ListMeta" }),
      /renames continue to _continue/,
    );
  });
});
