import assert from "node:assert/strict";
import { test } from "node:test";
import { enabledControllers } from "../../src/controller-names.js";

test("* enables every controller; -name disables one, by name or alias", () => {
  assert.equal(enabledControllers(["*"]).size, 4);
  const set = enabledControllers(["*", "-attachdetach", "-persistentvolume-protection-controller"]);
  assert.deepEqual([...set].sort(), [
    "persistentvolume-binder-controller",
    "persistentvolumeclaim-protection-controller",
  ]);
});

test("without * only named controllers run; the first mention wins", () => {
  assert.deepEqual(
    [...enabledControllers(["persistentvolume-binder"])],
    ["persistentvolume-binder-controller"],
  );
  assert.deepEqual([...enabledControllers(["-pv-protection", "pv-protection", "*"])].length, 3);
  assert.equal(enabledControllers([]).size, 0);
});

test("unknown names are refused", () => {
  assert.throws(
    () => enabledControllers(["*", "-nodelifecycle"]),
    /"-nodelifecycle" is not in the list of known controllers/,
  );
});
