import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";
import {
  loadAllYaml,
  type V1ClusterRole,
  type V1ClusterRoleBinding,
  type V1Deployment,
} from "@kubernetes/client-node";

const objects = loadAllYaml(
  readFileSync(new URL("../../manifests/shadow/shadow.yaml", import.meta.url), "utf8"),
) as { kind: string }[];

test("manifests/shadow: its own ServiceAccount, granted get/list/watch only", () => {
  const roles = objects.filter((o) => o.kind === "ClusterRole") as V1ClusterRole[];
  assert.ok(roles.length > 0);
  for (const rule of roles.flatMap((r) => r.rules ?? [])) {
    assert.deepEqual(
      rule.verbs.filter((v) => !["get", "list", "watch"].includes(v)),
      [],
      `${rule.resources?.join(",")}`,
    );
  }
  const bindings = objects.filter((o) => o.kind === "ClusterRoleBinding") as V1ClusterRoleBinding[];
  for (const b of bindings) {
    assert.deepEqual(
      b.subjects?.map((s) => s.name),
      ["kube-volume-controller-shadow"],
    );
    // Its own role, or the built-in reviewer role (TokenReviews, SubjectAccessReviews) for /shadow.
    assert.ok(
      roles.some((r) => r.metadata?.name === b.roleRef.name) || b.roleRef.name === "system:auth-delegator",
      b.roleRef.name,
    );
  }
  const deployment = objects.find((o) => o.kind === "Deployment") as V1Deployment;
  const pod = deployment.spec?.template.spec;
  assert.equal(pod?.serviceAccountName, "kube-volume-controller-shadow");
  assert.ok(pod?.containers[0]?.args?.includes("--shadow"));
});
