import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { AuthorizationV1Api, CoreV1Api, KubernetesObjectApi, StorageV1Api } from "@kubernetes/client-node";
import { LocalControlPlane } from "../../src/controlplane/local-control-plane.js";
import { waitFor } from "../../src/util/wait.js";
import {
  attachWhenAsked,
  csiUniqueName,
  nodeReportsAttached,
  podWithCSIVolumeOnManagedNode,
} from "../support/attach-detach.js";
import { serviceAccountKubeconfig, waitGone } from "../support/api.js";
import { killAllKvc, startKvc } from "../support/kvc-process.js";
import { manifestObjects } from "../support/manifests.js";

const NS = "kube-volume-controller";

describe("manifests/ on the real apiserver", () => {
  let cp: LocalControlPlane;
  let objects: KubernetesObjectApi;
  let core: CoreV1Api;

  before(async () => {
    cp = await LocalControlPlane.start();
    objects = KubernetesObjectApi.makeApiClient(cp.kubeConfig());
    core = cp.kubeConfig().makeApiClient(CoreV1Api);
  });
  after(async () => {
    killAllKvc();
    await cp.stop();
  });

  test("every object passes a server-side dry-run create", async () => {
    const all = manifestObjects();
    assert.deepEqual([...new Set(all.map((o) => o.kind))].sort(), [
      "ClusterRole",
      "ClusterRoleBinding",
      "Deployment",
      "Namespace",
      "NetworkPolicy",
      "PodDisruptionBudget",
      "Role",
      "RoleBinding",
      "Service",
      "ServiceAccount",
    ]);
    const [namespace, ...rest] = all;
    assert.equal(namespace?.kind, "Namespace");
    await objects.create(namespace, undefined, "All");
    // Namespaced objects need their namespace to exist, even for a dry run.
    await objects.create(namespace);
    for (const o of rest) await objects.create(o, undefined, "All");
  });

  test("the ServiceAccount's RBAC is enough: kvc with only its token binds, provisions, reclaims, attaches and lets objects be deleted", async () => {
    for (const o of manifestObjects().filter((o) => o.kind !== "Deployment" && o.kind !== "Namespace")) {
      await objects.create(o);
    }
    // The apiserver's RBAC authorizer learns of new bindings from its own informers: wait until every
    // binding is in effect, or kvc's first requests race it and are refused.
    const authz = cp.kubeConfig().makeApiClient(AuthorizationV1Api);
    const user = `system:serviceaccount:${NS}:kube-volume-controller`;
    for (const attrs of [
      { verb: "update", resource: "persistentvolumes", subresource: "status" },
      { verb: "patch", resource: "nodes", subresource: "status" },
      { verb: "patch", resource: "persistentvolumeclaims" },
      { verb: "patch", resource: "persistentvolumes" },
      { verb: "create", resource: "leases", group: "coordination.k8s.io", namespace: NS },
      // A standby watches its one Lease (a field selector on the name) to take over on its release.
      ...["list", "watch"].map((verb) => ({
        verb,
        resource: "leases",
        group: "coordination.k8s.io",
        namespace: NS,
        name: "kube-volume-controller",
      })),
    ]) {
      await waitFor(
        async () =>
          (await authz.createSubjectAccessReview({ body: { spec: { user, resourceAttributes: attrs } } }))
            .status?.allowed,
        { timeoutMs: 30_000, what: `RBAC to allow ${attrs.verb} ${attrs.resource}` },
      );
    }
    const kubeconfig = await serviceAccountKubeconfig(cp, NS, "kube-volume-controller");

    const kvc = await startKvc(kubeconfig, [
      `--leader-elect-resource-namespace=${NS}`,
      "--pvclaimbinder-sync-period=1s",
      "--enable-hostpath-provisioner",
    ]);
    const storage = cp.kubeConfig().makeApiClient(StorageV1Api);
    try {
      await kvc.ready();
      // static bind
      await core.createPersistentVolume({
        body: {
          metadata: { name: "sa-static" },
          spec: {
            capacity: { storage: "1Gi" },
            accessModes: ["ReadWriteOnce"],
            storageClassName: "sa",
            hostPath: { path: "/tmp/kvc-it/sa" },
          },
        },
      });
      const claim = (name: string, storageClassName: string) =>
        core.createNamespacedPersistentVolumeClaim({
          namespace: "default",
          body: {
            metadata: { name },
            spec: {
              accessModes: ["ReadWriteOnce"],
              storageClassName,
              resources: { requests: { storage: "1Gi" } },
            },
          },
        });
      await claim("sa-static", "sa");
      // dynamic provisioning with hostPath, reclaim Delete
      await storage.createStorageClass({
        body: {
          metadata: { name: "sa-hostpath" },
          provisioner: "kubernetes.io/host-path",
          reclaimPolicy: "Delete",
        },
      });
      await claim("sa-dynamic", "sa-hostpath");
      const bound = async (name: string) =>
        waitFor(
          async () => {
            const c = await core.readNamespacedPersistentVolumeClaim({ namespace: "default", name });
            return c.status?.phase === "Bound" ? c : undefined;
          },
          {
            timeoutMs: 60_000,
            what: `${name} to be Bound by the ServiceAccount (logs: ${kvc.logs().slice(-1500)})`,
          },
        );
      assert.equal((await bound("sa-static")).spec?.volumeName, "sa-static");
      const dynamic = await bound("sa-dynamic");
      // delete: protection controllers release the claim, the binder deletes the provisioned PV
      await core.deleteNamespacedPersistentVolumeClaim({ namespace: "default", name: "sa-dynamic" });
      await waitGone("the provisioned PV", () =>
        core.readPersistentVolume({ name: dynamic.spec!.volumeName! }),
      );
      // events were written (create/patch on events)
      const events = (await core.listNamespacedEvent({ namespace: "default" })).items;
      assert.ok(
        events.some(
          (e) =>
            e.reason === "ProvisioningSucceeded" && e.source?.component === "persistentvolume-controller",
        ),
      );
      // attach: a pod on a managed node gets its CSI volume's VolumeAttachment, and once the (test-played)
      // external-attacher reports it attached, the node's status lists it (patch nodes/status)
      await podWithCSIVolumeOnManagedNode(core, {
        name: "sa-csi",
        pod: "sa-pod",
        node: "sa-node",
        driver: "sa.csi.example.com",
        handle: "sa-disk",
        bound,
      });
      const va = await waitFor(
        async () => (await storage.listVolumeAttachment()).items.find((v) => v.spec.nodeName === "sa-node"),
        { timeoutMs: 60_000, what: `the VolumeAttachment (logs: ${kvc.logs().slice(-1500)})` },
      );
      await attachWhenAsked(storage, va.metadata!.name!);
      await nodeReportsAttached(core, "sa-node", csiUniqueName("sa.csi.example.com", "sa-disk"), {
        what: "the node status to list the attached volume",
      });
      const refused = kvc
        .logs()
        .split("\n")
        .filter((l) => /forbidden/i.test(l));
      assert.deepEqual(refused, [], "no request was refused");
    } finally {
      kvc.child.kill("SIGTERM");
      await kvc.exited;
    }
  });
});
