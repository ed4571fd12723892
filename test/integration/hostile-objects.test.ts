/**
 * Hostile objects on the real apiserver: a claim with the largest exponent the apiserver accepts and
 * a poisoned PV (megabyte-scale annotation, thousands of labels, an absurd capacity) do not stop
 * other claims from binding.
 */
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { CoreV1Api, type V1PersistentVolume, type V1PersistentVolumeClaim } from "@kubernetes/client-node";
import { LocalControlPlane } from "../../src/controlplane/local-control-plane.js";
import { abortableRequest } from "../../src/runtime/client.js";
import { waitFor } from "../../src/util/wait.js";
import { BINDER_FLAGS, killAllKvc, startKvc, type KvcProcess } from "../support/kvc-process.js";

const NS = "hostile";
let cp: LocalControlPlane;
let core: CoreV1Api;
let kvc: KvcProcess;

before(async () => {
  cp = await LocalControlPlane.start();
  core = cp.kubeConfig().makeApiClient(CoreV1Api);
  kvc = await startKvc(cp.kubeconfigPath, BINDER_FLAGS);
  await kvc.ready();
  await core.createNamespace({ body: { metadata: { name: NS } } });
});
after(async () => {
  killAllKvc();
  await cp.stop();
});

const volume = (name: string, size: string, extra: Partial<V1PersistentVolume> = {}): V1PersistentVolume => ({
  ...extra,
  metadata: { name, ...extra.metadata },
  spec: {
    capacity: { storage: size },
    accessModes: ["ReadWriteOnce"],
    persistentVolumeReclaimPolicy: "Retain",
    storageClassName: "",
    hostPath: { path: `/tmp/kvc-it/${name}` },
  },
});
const claim = (name: string, size: string): V1PersistentVolumeClaim => ({
  metadata: { name, namespace: NS },
  spec: { accessModes: ["ReadWriteOnce"], resources: { requests: { storage: size } }, storageClassName: "" },
});

async function bound(name: string): Promise<V1PersistentVolumeClaim> {
  return waitFor(
    async () => {
      const c = await core.readNamespacedPersistentVolumeClaim({ namespace: NS, name });
      return c.status?.phase === "Bound" ? c : undefined;
    },
    { timeoutMs: 60_000, what: `claim ${name} to be Bound (kvc logs: ${kvc.logs().slice(-2000)})` },
  );
}

test("a claim requesting the largest exponent the apiserver accepts is handled; other claims keep binding", async (t) => {
  // Upstream's own parser expands the exponent, so the apiserver may take long or refuse; try big first.
  let accepted: string | undefined;
  for (const size of ["1e30000000", "1e300000", "1e3000"]) {
    try {
      await core.createNamespacedPersistentVolumeClaim(
        { namespace: NS, body: claim("huge", size) },
        abortableRequest(AbortSignal.timeout(30_000)),
      );
      accepted = size;
      break;
    } catch (error) {
      t.diagnostic(`apiserver refused or timed out on ${size}: ${String(error).slice(0, 200)}`);
    }
  }
  assert.ok(accepted, "the apiserver accepted none of the huge requests");
  t.diagnostic(`apiserver accepted a request of ${accepted}`);
  await core.createPersistentVolume({ body: volume("pv-small", "1Gi") });
  await core.createNamespacedPersistentVolumeClaim({ namespace: NS, body: claim("small", "1Gi") });
  assert.equal((await bound("small")).spec?.volumeName, "pv-small");
  const huge = await core.readNamespacedPersistentVolumeClaim({ namespace: NS, name: "huge" });
  assert.equal(huge.status?.phase, "Pending", "no volume is that large");
  assert.ok(kvc.logs().length < 10_000_000, "logs do not echo the expanded number");
});

test("a poisoned PV (huge annotation, thousands of labels, absurd capacity) does not stop binding", async () => {
  const labels = Object.fromEntries(Array.from({ length: 5000 }, (_, i) => [`k${i}`, `v${i}`]));
  await core.createPersistentVolume({
    body: volume("pv-poison", "1e3000", {
      metadata: { name: "pv-poison", labels, annotations: { big: "x".repeat(200_000) } },
    }),
  });
  await core.createPersistentVolume({ body: volume("pv-normal", "2Gi") });
  // Both in kvc's cache before any claim: else "normal" could meet the poisoned PV alone.
  for (const name of ["pv-poison", "pv-normal"])
    await waitFor(async () => (await core.readPersistentVolume({ name })).status?.phase === "Available", {
      timeoutMs: 60_000,
      what: `volume ${name} to be Available`,
    });
  await core.createNamespacedPersistentVolumeClaim({ namespace: NS, body: claim("normal", "2Gi") });
  // The poisoned PV is the only one large enough for this claim: it binds too, however big it is.
  await core.createNamespacedPersistentVolumeClaim({ namespace: NS, body: claim("bigger", "1e2999") });
  assert.equal((await bound("normal")).spec?.volumeName, "pv-normal");
  assert.equal((await bound("bigger")).spec?.volumeName, "pv-poison");
});
