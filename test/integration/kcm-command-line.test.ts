import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { CoordinationV1Api } from "@kubernetes/client-node";
import { format, resolveConfig } from "prettier";
import { CONTROLLERS } from "../../src/app/controller-names.js";
import { LocalControlPlane } from "../../src/controlplane/local-control-plane.js";
import { waitFor } from "../../src/util/wait.js";
import { KCM_FEATURE_GATES } from "../../src/app/kcm-feature-gates.js";
import { catalogueModule, helpFeatureGates, kcmAppSources, kcmHelp } from "../support/kcm-flags.js";
import { killAllKvc, startKvc } from "../support/kvc-process.js";
import { kubeadmKcmFlags } from "../support/kubeadm.js";

test("src/app/kcm-flags.ts is what the built kube-controller-manager's --help yields (npm run kcm:flags)", async () => {
  const path = new URL("../../src/app/kcm-flags.ts", import.meta.url);
  const options = await resolveConfig(path);
  const expected = await format(catalogueModule(kcmHelp(), kcmAppSources()), {
    ...options,
    parser: "typescript",
  });
  assert.equal(readFileSync(path, "utf8"), expected, "run `npm run kcm:flags`");
});

test("src/app/kcm-feature-gates.ts has the built kube-controller-manager's alpha and beta gates (npm run kcm:flags)", () => {
  const catalogued = KCM_FEATURE_GATES.filter((g) => g.stage === "ALPHA" || g.stage === "BETA").map(
    ({ name, stage, default: on }) => ({ name, stage, default: on }),
  );
  assert.deepEqual(catalogued, helpFeatureGates(kcmHelp()), "run `npm run kcm:flags`");
});

describe("a kubeadm kube-controller-manager command line", () => {
  let cp: LocalControlPlane;
  before(async () => {
    cp = await LocalControlPlane.start();
  });
  after(async () => {
    killAllKvc();
    await cp.stop();
  });

  test("starts kvc run on the real control plane, the flags kvc ignores named once", async () => {
    const flags = kubeadmKcmFlags({
      kubeconfig: cp.kubeconfigPath,
      caFile: cp.caFile,
      keyFile: join(cp.dir, "sa.key"),
    });
    const kvc = await startKvc(cp.kubeconfigPath, flags);
    await kvc.ready();
    const coordination = cp.kubeConfig().makeApiClient(CoordinationV1Api);
    await waitFor(
      async () =>
        (await coordination.readNamespacedLease({ namespace: "kube-system", name: "kube-volume-controller" }))
          .spec?.holderIdentity,
      { timeoutMs: 30_000, what: "kvc to hold its lease" },
    );
    // `--controllers=*,bootstrapsigner,tokencleaner`: kvc's four loops run (logs are written async).
    const logs = await waitFor(
      () => {
        const l = kvc.logs();
        return CONTROLLERS.every((c) => l.includes(`"controller":"${c.name}","msg":"starting controller"`))
          ? l
          : undefined;
      },
      { timeoutMs: 30_000, what: "kvc to start its four controllers" },
    );
    const warnings = logs.split("\n").filter((l) => l.includes("kube-controller-manager flags"));
    assert.equal(warnings.length, 1, logs);
    const { flags: ignored } = JSON.parse(warnings[0] ?? "") as { flags: string[] };
    assert.ok(ignored.includes("--cluster-signing-key-file") && !ignored.includes("--kubeconfig"));
  });
});
