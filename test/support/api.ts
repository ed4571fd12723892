import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { CoreV1Api } from "@kubernetes/client-node";
import type { LocalControlPlane } from "../../src/controlplane/local-control-plane.js";
import { isNotFound } from "../../src/runtime/api-errors.js";
import { waitFor } from "../../src/util/wait.js";

/** Resolves when `read` answers 404: deletes are asynchronous when finalizers are involved. */
export async function waitGone(
  what: string,
  read: () => Promise<unknown>,
  timeoutMs = 60_000,
): Promise<void> {
  await waitFor(
    async () => {
      try {
        await read();
        return false;
      } catch (err) {
        if (isNotFound(err)) return true;
        throw err;
      }
    },
    { timeoutMs, what: `${what} to be deleted` },
  );
}

/** A kubeconfig file that authenticates as ServiceAccount `namespace/name` (a fresh 1-hour token). */
export async function serviceAccountKubeconfig(
  cp: LocalControlPlane,
  namespace: string,
  name: string,
): Promise<string> {
  const core = cp.kubeConfig().makeApiClient(CoreV1Api);
  const token = await core.createNamespacedServiceAccountToken({
    namespace,
    name,
    body: { spec: { audiences: [], expirationSeconds: 3600 } },
  });
  const path = join(cp.dir, `${namespace}-${name}.kubeconfig`);
  writeFileSync(
    path,
    JSON.stringify({
      apiVersion: "v1",
      kind: "Config",
      clusters: [{ name: "local", cluster: { server: cp.server, "certificate-authority": cp.caFile } }],
      users: [{ name, user: { token: token.status?.token } }],
      contexts: [{ name, context: { cluster: "local", user: name } }],
      "current-context": name,
    }),
    { mode: 0o600 },
  );
  return path;
}
