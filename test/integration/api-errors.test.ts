import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { ApiException, CoreV1Api } from "@kubernetes/client-node";
import { LocalControlPlane } from "../../src/controlplane/local-control-plane.js";
import {
  apiStatus,
  errorMessage,
  isAlreadyExists,
  isConflict,
  isGone,
  isNotFound,
} from "../../src/runtime/api-errors.js";
import { ApiClients } from "../../src/runtime/client.js";

let cp: LocalControlPlane;
let core: CoreV1Api;
before(async () => {
  cp = await LocalControlPlane.start();
  core = new ApiClients(cp.kubeConfig(), { qps: -1, burst: 1 }).core;
});
after(() => cp.stop());

async function thrown(fn: () => Promise<unknown>): Promise<unknown> {
  try {
    await fn();
  } catch (err) {
    return err;
  }
  assert.fail("expected the call to fail");
}

test("NotFound, AlreadyExists and a stale-resourceVersion Conflict are told apart on real responses", async () => {
  const notFound = await thrown(() =>
    core.readNamespacedPersistentVolumeClaim({ namespace: "default", name: "nope" }),
  );
  assert.ok(isNotFound(notFound) && !isConflict(notFound) && !isAlreadyExists(notFound));
  assert.equal(errorMessage(notFound), 'persistentvolumeclaims "nope" not found');

  const body = { metadata: { name: "errs" }, data: { a: "1" } };
  await core.createNamespacedConfigMap({ namespace: "default", body });
  const exists = await thrown(() => core.createNamespacedConfigMap({ namespace: "default", body }));
  assert.ok(isAlreadyExists(exists) && !isConflict(exists) && !isNotFound(exists));

  const stale = await core.readNamespacedConfigMap({ namespace: "default", name: "errs" });
  await core.replaceNamespacedConfigMap({
    namespace: "default",
    name: "errs",
    body: { ...body, data: { a: "2" } },
  });
  stale.data = { a: "3" };
  const conflict = await thrown(() =>
    core.replaceNamespacedConfigMap({ namespace: "default", name: "errs", body: stale }),
  );
  assert.ok(isConflict(conflict) && !isAlreadyExists(conflict) && !isGone(conflict));
  assert.equal(apiStatus(conflict)?.reason, "Conflict");
});

test("Gone is recognised from an ApiException and from a watch's HTTP error", () => {
  const status = JSON.stringify({
    kind: "Status",
    code: 410,
    reason: "Expired",
    message: "too old resource version: 1 (42)",
  });
  const err = new ApiException(410, "Gone", status, {});
  assert.ok(isGone(err) && !isNotFound(err));
  assert.equal(errorMessage(err), "too old resource version: 1 (42)");
  const watchErr = Object.assign(new Error("Gone"), { statusCode: 410 });
  assert.ok(isGone(watchErr));
  assert.equal(apiStatus(new Error("socket hang up")), undefined, "network errors carry no status");
});
