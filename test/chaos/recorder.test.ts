import assert from "node:assert/strict";
import { test } from "node:test";
import { relistChanges } from "./recorder.js";

/* What the recorder records when a 410 Gone makes it list again: nothing lost that the list shows. */

const obj = (name: string, uid: string, rv: string) => ({ metadata: { name, uid, resourceVersion: rv } });

test("a relist records the gone, the replaced and the changed objects, and nothing else", () => {
  const seen = new Map([
    ["same", obj("same", "u1", "5")],
    ["changed", obj("changed", "u2", "6")],
    ["gone", obj("gone", "u3", "7")],
    ["replaced", obj("replaced", "u4", "8")],
  ]);
  const listed = [
    obj("same", "u1", "5"),
    obj("changed", "u2", "12"),
    obj("replaced", "u9", "13"),
    obj("new", "u10", "14"),
  ];
  const changes = relistChanges(seen, listed).map(
    (c) =>
      `${c.deleted ? "deleted" : "state"} ${c.object.metadata.name} ${c.object.metadata.resourceVersion}`,
  );
  assert.deepEqual(changes, [
    // A deletion carries the last state seen: replayed right after it, the earliest it can have been.
    "deleted gone 7",
    "deleted replaced 8",
    "state changed 12",
    "state replaced 13",
    "state new 14",
  ]);
  assert.deepEqual(relistChanges(seen, [...seen.values()]), []);
});
