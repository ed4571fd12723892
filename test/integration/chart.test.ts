import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { fileURLToPath } from "node:url";
import {
  ApiextensionsV1Api,
  KubernetesObjectApi,
  loadAllYaml,
  type KubernetesObject,
  type V1CustomResourceDefinition,
  type V1Deployment,
} from "@kubernetes/client-node";
import { LocalControlPlane } from "../../src/controlplane/local-control-plane.js";
import { waitFor } from "../../src/util/wait.js";
import { CHART_DIR, helmBinary, helmTemplate, renderManifests, type Release } from "../support/chart.js";

const root = fileURLToPath(new URL("../..", import.meta.url));

/** Every value the chart has switched on, so a dry-run sees every template. */
const EVERYTHING: Release = {
  name: "kvc",
  namespace: "kvc-everything",
  set: [
    "serviceMonitor.enabled=true",
    "serviceMonitor.prometheusServiceAccount.name=prometheus",
    "serviceMonitor.prometheusServiceAccount.namespace=monitoring",
    "prometheusRule.enabled=true",
    "dashboard.enabled=true",
    "replicas=3",
    "image.repository=registry.example/kvc",
    "image.tag=v9.9.9",
    "extraArgs={--controllers=*\\,-bootstrapsigner,--v=2}",
    "nodeSelector.node-role\\.kubernetes\\.io/control-plane=",
    "tolerations[0].key=node-role.kubernetes.io/control-plane",
    "tolerations[0].operator=Exists",
    "tolerations[0].effect=NoSchedule",
  ],
};

const objectsOf = (yaml: string) => (loadAllYaml(yaml) as KubernetesObject[]).filter(Boolean);

describe("the Helm chart (charts/kube-volume-controller)", () => {
  let helm: string;
  before(async () => {
    helm = await helmBinary();
  });

  test("helm lint --strict passes", () => {
    execFileSync(helm, ["lint", "--strict", CHART_DIR], { encoding: "utf8", stdio: "pipe" });
  });

  test("manifests/ is the chart rendered, file for file (npm run manifests)", async () => {
    const rendered = await renderManifests(helm);
    const onDisk = [
      ...readdirSync(join(root, "manifests"))
        .filter((f) => f.endsWith(".yaml") && f !== "kustomization.yaml")
        .map((f) => join("manifests", f)),
      ...readdirSync(join(root, "manifests", "shadow")).map((f) => join("manifests", "shadow", f)),
    ];
    assert.deepEqual(onDisk.sort(), [...rendered.keys()].sort(), "the same files");
    for (const [path, text] of rendered) {
      assert.equal(
        readFileSync(join(root, path), "utf8"),
        text,
        `${path} drifted from the chart: npm run manifests`,
      );
    }
  });

  test("values reach the Deployment: replicas, image, extraArgs after the chart's flags, placement", () => {
    const objects = objectsOf(helmTemplate(helm, EVERYTHING));
    const deployment = objects.find((o) => o.kind === "Deployment") as V1Deployment;
    const pod = deployment.spec?.template.spec;
    const kvc = pod?.containers[0];
    assert.equal(deployment.spec?.replicas, 3);
    assert.equal(kvc?.image, "registry.example/kvc:v9.9.9");
    assert.deepEqual(kvc?.args?.slice(-2), ["--controllers=*,-bootstrapsigner", "--v=2"]);
    assert.ok(kvc?.args?.includes("--leader-elect-resource-name=kvc"), "the Lease is the release's");
    assert.deepEqual(pod?.nodeSelector, { "node-role.kubernetes.io/control-plane": "" });
    assert.equal(pod?.tolerations?.[0]?.key, "node-role.kubernetes.io/control-plane");
    assert.deepEqual(
      [...new Set(objects.map((o) => o.kind))]
        .filter((k) => !["ClusterRole", "ClusterRoleBinding"].includes(k ?? ""))
        .sort(),
      [
        "ConfigMap",
        "Deployment",
        "NetworkPolicy",
        "PodDisruptionBudget",
        "PrometheusRule",
        "Role",
        "RoleBinding",
        "Service",
        "ServiceAccount",
        "ServiceMonitor",
      ],
    );
  });

  test("the PrometheusRule: the alerts for the release's scrape job; shadow mode's alone in shadow mode", () => {
    const rule = (release: Release) =>
      objectsOf(helmTemplate(helm, release)).find((o) => o.kind === "PrometheusRule") as KubernetesObject & {
        spec: { groups: { name: string; rules: { alert: string; expr: string }[] }[] };
      };
    const kvc = rule(EVERYTHING);
    assert.deepEqual(
      kvc.spec.groups.map((g) => g.name),
      ["kube-volume-controller"],
    );
    for (const r of kvc.spec.groups[0]?.rules ?? []) {
      assert.doesNotMatch(r.expr, /job="kube-volume-controller"/, r.alert);
      if (r.expr.includes("job=")) assert.match(r.expr, /job="kvc"/, r.alert);
    }
    const shadow = rule({
      name: "s",
      namespace: "s",
      set: ["shadow.enabled=true", "prometheusRule.enabled=true"],
    });
    assert.deepEqual(
      shadow.spec.groups.flatMap((g) => g.rules.map((r) => r.alert)),
      ["KubeVolumeControllerShadowDisagreement"],
    );
  });

  describe("on the real apiserver", () => {
    let cp: LocalControlPlane;
    let objects: KubernetesObjectApi;
    before(async () => {
      cp = await LocalControlPlane.start();
      objects = KubernetesObjectApi.makeApiClient(cp.kubeConfig());
      // The Prometheus Operator's CRDs, generated from its API types (test/fixtures/crds/generate.sh).
      const crds = cp.kubeConfig().makeApiClient(ApiextensionsV1Api);
      const dir = join(root, "test", "fixtures", "crds");
      for (const f of readdirSync(dir).filter((f) => f.endsWith(".yaml"))) {
        const crd = objectsOf(readFileSync(join(dir, f), "utf8"))[0] as V1CustomResourceDefinition;
        await crds.createCustomResourceDefinition({ body: crd });
        await waitFor(
          async () =>
            (
              await crds.readCustomResourceDefinition({ name: crd.metadata?.name ?? "" })
            ).status?.conditions?.some((c) => c.type === "Established" && c.status === "True"),
          { timeoutMs: 30_000, what: `CRD ${crd.metadata?.name} established` },
        );
      }
    });
    after(async () => {
      await cp.stop();
    });

    for (const [what, release] of [
      ["the defaults", { name: "kube-volume-controller", namespace: "kube-volume-controller" }],
      [
        "shadow mode",
        {
          name: "kvc-shadow",
          namespace: "kvc-shadow",
          set: ["shadow.enabled=true", "prometheusRule.enabled=true"],
        },
      ],
      ["every option on", EVERYTHING],
    ] as const) {
      test(`helm template with ${what} passes a server-side dry-run create`, async () => {
        // As `helm install --create-namespace`: the namespace exists before the release's objects.
        await objects.create({ apiVersion: "v1", kind: "Namespace", metadata: { name: release.namespace } });
        for (const o of objectsOf(helmTemplate(helm, release))) await objects.create(o, undefined, "All");
      });
    }
  });
});
