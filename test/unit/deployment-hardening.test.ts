import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import type {
  V1Deployment,
  V1NetworkPolicy,
  V1PodDisruptionBudget,
  V1Service,
} from "@kubernetes/client-node";
import { loadYaml } from "@kubernetes/client-node";
import { MANIFESTS_DIR, manifestObjects } from "../support/manifests.js";

// Each hardening field of the Deployment and its companions (issue 12); the apiserver's dry-run of
// the same manifests is in test/integration/manifests.test.ts.
const objects = manifestObjects();
const deployment = objects.find((o) => o.kind === "Deployment") as V1Deployment;
const pod = deployment.spec!.template;
const podLabels = pod.metadata!.labels!;
const kvc = pod.spec!.containers.find((c) => c.name === "kvc")!;
const pkg = JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8")) as {
  version: string;
};

const selects = (selector: Record<string, string> | undefined) =>
  !!selector &&
  Object.keys(selector).length > 0 &&
  Object.entries(selector).every(([k, v]) => podLabels[k] === v);

/** Mi or Gi, as the manifest writes memory, in MiB. */
function mebibytes(quantity: string | undefined): number {
  const m = /^(\d+)(Mi|Gi)$/.exec(quantity ?? "");
  assert.ok(m, `memory "${quantity}" in Mi or Gi`);
  return Number(m[1]) * (m[2] === "Gi" ? 1024 : 1);
}

test("the image tag is the release version in package.json", () => {
  assert.equal(kvc.image, `kube-volume-controller:v${pkg.version}`);
});

test("priorityClassName is system-cluster-critical", () => {
  assert.equal(pod.spec!.priorityClassName, "system-cluster-critical");
});

test("replicas are spread across nodes by a hard skew constraint that still schedules on one node", () => {
  assert.ok((deployment.spec!.replicas ?? 1) >= 2);
  const spread = pod.spec!.topologySpreadConstraints ?? [];
  assert.ok(
    spread.some(
      (c) =>
        c.topologyKey === "kubernetes.io/hostname" &&
        c.maxSkew === 1 &&
        c.whenUnsatisfiable === "DoNotSchedule" &&
        c.nodeTaintsPolicy === "Honor" &&
        selects(c.labelSelector?.matchLabels),
    ),
    JSON.stringify(spread),
  );
  // Required anti-affinity would leave the second replica Pending on a 1-node cluster.
  assert.equal(
    pod.spec!.affinity?.podAntiAffinity?.requiredDuringSchedulingIgnoredDuringExecution,
    undefined,
  );
});

test("a PodDisruptionBudget keeps a replica through voluntary disruptions", () => {
  const pdbs = objects.filter((o) => o.kind === "PodDisruptionBudget") as V1PodDisruptionBudget[];
  assert.equal(pdbs.length, 1);
  const pdb = pdbs[0]!;
  assert.equal(pdb.metadata?.namespace, deployment.metadata?.namespace);
  assert.ok(selects(pdb.spec?.selector?.matchLabels));
  assert.ok(pdb.spec?.maxUnavailable === 1 || pdb.spec?.minAvailable === 1, JSON.stringify(pdb.spec));
  assert.equal(pdb.spec?.unhealthyPodEvictionPolicy, "AlwaysAllow");
});

test("a NetworkPolicy admits only the serving (metrics) port", () => {
  const policies = objects.filter((o) => o.kind === "NetworkPolicy") as V1NetworkPolicy[];
  assert.equal(policies.length, 1);
  const policy = policies[0]!;
  assert.equal(policy.metadata?.namespace, deployment.metadata?.namespace);
  assert.ok(selects(policy.spec!.podSelector?.matchLabels));
  assert.deepEqual(policy.spec!.policyTypes, ["Ingress"]);
  const metrics = kvc.ports?.find((p) => p.name === "metrics");
  assert.ok(metrics);
  const ports = (policy.spec!.ingress ?? []).map((rule) =>
    rule.ports?.map((p) => ({ port: p.port, protocol: p.protocol, endPort: p.endPort })),
  );
  assert.deepEqual(ports, [[{ port: metrics.name, protocol: "TCP", endPort: undefined }]]);
});

test("memory request and limit follow docs/operations.md's rule from the 50k-pair measurement", () => {
  const operations = readFileSync(new URL("../../docs/operations.md", import.meta.url), "utf8");
  const rule =
    /request (\d+) MiB \+ (\d+) KiB per PV\/PVC pair \+ (\d+) KiB per pod.*?limit ([\d.]+) × the request/s.exec(
      operations,
    );
  assert.ok(rule, "operations.md states the sizing rule");
  const [base, perPair, perPod, factor] = [
    Number(rule[1]),
    Number(rule[2]),
    Number(rule[3]),
    Number(rule[4]),
  ];
  // The measurement the rule is fitted to: kvc's settled and peak RSS at 50k pairs.
  const performance = readFileSync(new URL("../../docs/performance.md", import.meta.url), "utf8");
  const row = /^\| 50,000 \+ 50,000 +\| +(\d+) MiB \| +(\d+) MiB \|/m.exec(performance);
  assert.ok(row, "performance.md has the 50k-pair memory row");
  const [settled, peak] = [Number(row[1]), Number(row[2])];
  const predicted = base + (perPair * 50_000) / 1024;
  assert.ok(
    Math.abs(predicted - settled) / settled < 0.05,
    `rule ${predicted} MiB vs measured ${settled} MiB`,
  );

  // The size the manifest is for (its comment): 50,000 pairs and 30,000 pods.
  const sized = predicted + (perPod * 30_000) / 1024;
  const request = mebibytes(kvc.resources?.requests?.memory);
  const limit = mebibytes(kvc.resources?.limits?.memory);
  assert.ok(request >= sized && request >= settled, `request ${request} Mi < ${sized} Mi`);
  assert.ok(limit >= factor * sized && limit >= peak, `limit ${limit} Mi < ${factor * sized} Mi`);
  assert.equal(kvc.resources?.limits?.cpu, undefined, "no CPU limit (a throttled leader decides late)");
});

test("the namespace enforces Pod Security restricted, which the pod spec meets", () => {
  const ns = objects.find((o) => o.kind === "Namespace");
  assert.equal(ns?.metadata?.labels?.["pod-security.kubernetes.io/enforce"], "restricted");
  const sc = pod.spec!.securityContext!;
  assert.equal(sc.runAsNonRoot, true);
  assert.equal(sc.seccompProfile?.type, "RuntimeDefault");
  assert.equal(kvc.securityContext?.allowPrivilegeEscalation, false);
  assert.deepEqual(kvc.securityContext?.capabilities?.drop, ["ALL"]);
  assert.ok(
    (pod.spec!.volumes ?? []).every((v) => !v.hostPath),
    "no hostPath volume",
  );
});

test("a Service selects the pods on the metrics port (a ServiceMonitor finds kvc by it)", () => {
  const svc = objects.find((o) => o.kind === "Service") as V1Service | undefined;
  assert.ok(svc, "manifests/ ship a Service");
  assert.ok(selects(svc.spec?.selector));
  const port = svc.spec?.ports?.find((p) => p.name === "metrics");
  assert.equal(port?.targetPort, "metrics");
  assert.ok(kvc.ports?.some((p) => p.name === "metrics" && p.containerPort === port.port));
});

test("manifests/kustomization.yaml lists every manifest and sets the release image tag", () => {
  const kustomization = loadYaml<{ resources: string[]; images: { name: string; newTag: string }[] }>(
    readFileSync(join(MANIFESTS_DIR, "kustomization.yaml"), "utf8"),
  );
  const files = readdirSync(MANIFESTS_DIR).filter((f) => f.endsWith(".yaml") && f !== "kustomization.yaml");
  assert.deepEqual([...kustomization.resources].sort(), files.sort());
  assert.deepEqual(kustomization.images, [{ name: "kube-volume-controller", newTag: `v${pkg.version}` }]);
});
