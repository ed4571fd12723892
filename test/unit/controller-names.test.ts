import assert from "node:assert/strict";
import { test } from "node:test";
import { enabledControllers, noLoopsWarning } from "../../src/app/controller-names.js";

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

test("KCM's other controllers, by name or alias, are accepted and left to KCM", () => {
  // kubeadm's manifest: --controllers=*,bootstrapsigner,tokencleaner
  assert.equal(enabledControllers(["*", "bootstrapsigner", "tokencleaner"]).size, 4);
  assert.deepEqual(
    [...enabledControllers(["-nodelifecycle", "node-ipam-controller", "pv-protection"])],
    ["persistentvolume-protection-controller"],
  );
});

test("names KCM does not know are refused", () => {
  assert.throws(
    () => enabledControllers(["*", "-nosuchcontroller"]),
    /"-nosuchcontroller" is not in the list of known controllers/,
  );
});

test("KCM's cut-over line pasted into kvc's flags turns every loop off: warned", () => {
  const kcmLine = [
    "*",
    "bootstrapsigner",
    "tokencleaner",
    "-persistentvolume-binder-controller",
    "-persistentvolume-attach-detach-controller",
    "-persistentvolumeclaim-protection-controller",
    "-persistentvolume-protection-controller",
  ];
  assert.match(
    noLoopsWarning(enabledControllers(kcmLine)) ?? "",
    /turns off all four volume loops.*--controllers=\*/,
  );
  assert.equal(noLoopsWarning(enabledControllers(["*", "-attachdetach"])), undefined);
});
