import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { connect } from "node:tls";
import { after, before, describe, test } from "node:test";
import {
  AuthorizationV1Api,
  CoreV1Api,
  KubernetesObjectApi,
  RbacAuthorizationV1Api,
} from "@kubernetes/client-node";
import { probe } from "../../src/controlplane/https-probe.js";
import { LocalControlPlane } from "../../src/controlplane/local-control-plane.js";
import { freePort } from "../../src/controlplane/ports.js";
import { waitFor } from "../../src/util/wait.js";
import { killAllKvc, startKvc, type KvcProcess } from "../support/kvc-process.js";
import { manifestObjects } from "../support/manifests.js";

/** Sends one raw HTTP/1.1 request over TLS and returns the status line (what Node's parser lets through). */
function rawRequest(port: number, target: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host: "127.0.0.1", port, rejectUnauthorized: false }, () => {
      socket.write(`GET ${target} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n`);
    });
    let data = "";
    socket.setEncoding("utf8");
    socket.on("data", (chunk: string) => {
      data += chunk;
    });
    socket.on("end", () => {
      resolve(data.split("\r\n")[0] ?? "");
    });
    socket.on("error", reject);
    socket.setTimeout(5_000, () => socket.destroy(new Error(`GET ${target} timed out`)));
  });
}

describe("secure serving as KCM's: HTTPS, delegated authentication and authorization", () => {
  let cp: LocalControlPlane;
  let kvc: KvcProcess;
  let core: CoreV1Api;
  const tokens: Record<"reader" | "nobody", string> = { reader: "", nobody: "" };

  before(async () => {
    cp = await LocalControlPlane.start();
    core = cp.kubeConfig().makeApiClient(CoreV1Api);
    // The shipped ClusterRole, bound to one ServiceAccount; another has no permissions at all.
    const role = manifestObjects().find((o) => o.metadata?.name === "kube-volume-controller:metrics-reader");
    assert.ok(role, "manifests/ ship the metrics-reader ClusterRole");
    await KubernetesObjectApi.makeApiClient(cp.kubeConfig()).create(role);
    await cp
      .kubeConfig()
      .makeApiClient(RbacAuthorizationV1Api)
      .createClusterRoleBinding({
        body: {
          metadata: { name: "metrics-reader" },
          roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "ClusterRole", name: role.metadata!.name! },
          subjects: [{ kind: "ServiceAccount", name: "reader", namespace: "default" }],
        },
      });
    for (const name of ["reader", "nobody"] as const) {
      await core.createNamespacedServiceAccount({ namespace: "default", body: { metadata: { name } } });
      const req = await core.createNamespacedServiceAccountToken({
        namespace: "default",
        name,
        body: { spec: { audiences: [], expirationSeconds: 3600 } },
      });
      tokens[name] = req.status?.token ?? "";
    }
    // The apiserver's RBAC authorizer learns of the binding from its informers: wait until it applies.
    const authz = cp.kubeConfig().makeApiClient(AuthorizationV1Api);
    await waitFor(
      async () =>
        (
          await authz.createSubjectAccessReview({
            body: {
              spec: {
                user: "system:serviceaccount:default:reader",
                nonResourceAttributes: { path: "/metrics", verb: "get" },
              },
            },
          })
        ).status?.allowed,
      { timeoutMs: 30_000, what: "RBAC to allow the reader /metrics" },
    );
    kvc = await startKvc(cp.kubeconfigPath, ["--leader-elect=false", "--controllers=pv-protection"]);
    await kvc.ready();
  });
  after(async () => {
    killAllKvc();
    await cp.stop();
  });

  test("/metrics: 200 for a token allowed get on /metrics, 403 for one that is not, 401 for a bad token", async () => {
    const allowed = await kvc.get("/metrics", tokens.reader);
    assert.equal(allowed.status, 200, allowed.body);
    assert.match(allowed.body, /^process_cpu_user_seconds_total /m);
    const denied = await kvc.get("/metrics", tokens.nobody);
    assert.equal(denied.status, 403, denied.body);
    assert.match(denied.body, /User "system:serviceaccount:default:nobody" cannot get path "\/metrics"/);
    const bad = await kvc.get("/metrics", "not-a-token");
    assert.equal(bad.status, 401, bad.body);
  });

  test("no token: anonymous, so health paths answer and /metrics is forbidden, exactly as KCM answers", async () => {
    for (const path of ["/healthz", "/readyz", "/livez"]) {
      const res = await probe(kvc.url(path));
      assert.equal(res.status, 200, `${path}: ${res.body}`);
    }
    const anonymous = await probe(kvc.url("/metrics"));
    assert.equal(anonymous.status, 403, anonymous.body);
    assert.match(anonymous.body, /User "system:anonymous" cannot get path "\/metrics"/);

    // upstream kube-controller-manager with the same delegation gives the same answers
    const port = await freePort();
    await cp.startKubeControllerManager({
      controllers: ["persistentvolume-protection-controller"],
      securePort: port,
      args: [
        `--authentication-kubeconfig=${cp.kubeconfigPath}`,
        `--authorization-kubeconfig=${cp.kubeconfigPath}`,
      ],
    });
    const kcm = (path: string, token?: string) =>
      probe(`https://127.0.0.1:${port}${path}`, token ? { token } : {});
    assert.equal((await kcm("/metrics")).status, 403);
    assert.equal((await kcm("/healthz")).status, 200);
    assert.equal((await kcm("/metrics", "not-a-token")).status, 401);
    assert.equal((await kcm("/metrics", tokens.nobody)).status, 403);
    assert.equal((await kcm("/metrics", tokens.reader)).status, 200);
  });

  test("malformed request targets get a 400 and the process keeps serving", async () => {
    for (const target of ["//[", "http://a:b@c:99999/", "http://[::1/", "//a:99999999"]) {
      assert.equal(await rawRequest(kvc.port, target), "HTTP/1.1 400 Bad Request", target);
      const healthz = await probe(kvc.url("/healthz"));
      assert.equal(healthz.status, 200, `after ${target}: ${kvc.logs().slice(-2000)}`);
    }
    assert.equal(kvc.child.exitCode, null, kvc.logs());
  });

  test("5,000 junk tokens at once: bounded connections and memory, no review waits past its 10 s deadline, then an authorised /metrics GET answers within 1 s", async (t) => {
    const rss = () =>
      Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${kvc.child.pid}/status`, "utf8"))?.[1]) / 1024;
    const rssBefore = rss();
    // Far beyond the 200 reviews a second kvc's review client allows (burst 400): unbounded waits
    // would hold the last for (5,000 - 400) / 200 = 23 s. Connections over serve()'s limit are closed.
    const junk = await Promise.all(
      Array.from({ length: 5_000 }, async (_, i) => {
        const sent = performance.now();
        const status = await probe(kvc.url("/metrics"), { token: `junk-${i}`, timeoutMs: 60_000 }).then(
          (r) => r.status,
          () => 0, // the connection was closed unanswered
        );
        return { status, ms: performance.now() - sent };
      }),
    );
    const answered = junk.filter((j) => j.status !== 0);
    const grown = rss() - rssBefore;
    const slowest = Math.max(...junk.map((j) => j.ms));
    t.diagnostic(
      `${answered.length} answered (${new Set(answered.map((j) => j.status)).size} distinct codes), ` +
        `${junk.length - answered.length} connections closed, slowest ${Math.round(slowest)} ms ` +
        `(answered ${Math.round(Math.max(...answered.map((j) => j.ms)))} ms); ` +
        `kvc RSS ${rssBefore.toFixed(0)} MiB + ${grown.toFixed(0)} MiB`,
    );
    // Without a connection limit all 5,000 were held at once: RSS grew by 333 MiB (about 100 with it).
    assert.ok(grown < 200, `kvc's RSS grew by ${grown.toFixed(0)} MiB`);
    assert.ok(
      answered.every((j) => j.status === 401),
      `junk tokens are only ever 401: ${[...new Set(answered.map((j) => j.status))].join(", ")}`,
    );
    assert.ok(answered.length > 0);
    // The limiter's own account (client-go's histogram): no review waited past its 10 s deadline,
    // whatever the load on the machine added around it.
    const metrics = (await kvc.get("/metrics")).body;
    const count = (le: string) =>
      [
        ...metrics.matchAll(
          new RegExp(
            `^rest_client_rate_limiter_duration_seconds_bucket\\{le="${le.replace("+", "\\+")}",verb="POST"[^}]*\\} (\\d+)$`,
            "gm",
          ),
        ),
      ].reduce((sum, m) => sum + Number(m[1]), 0);
    t.diagnostic(
      `limiter waits: ${count("1")} within 1 s, ${count("8")} within 8 s, ${count("15")} within 15 s, ${count("+Inf")} in all`,
    );
    assert.ok(count("+Inf") >= answered.length, "every review waited on the limiter");
    assert.equal(count("15"), count("+Inf"), "a review waited on the limiter for more than 15 s");
    // A token not seen before, so its TokenReview goes through the same limiter.
    const fresh = await core.createNamespacedServiceAccountToken({
      namespace: "default",
      name: "reader",
      body: { spec: { audiences: [], expirationSeconds: 3600 } },
    });
    const sent = performance.now();
    const scrape = await kvc.get("/metrics", fresh.status?.token);
    const ms = performance.now() - sent;
    assert.equal(scrape.status, 200, scrape.body);
    assert.ok(ms < 1_000, `the authorised scrape took ${Math.round(ms)} ms`);
    assert.equal(kvc.child.exitCode, null, kvc.logs().slice(-2_000));
  });

  test("serves only TLS: plain HTTP on the port gets no HTTP answer", async () => {
    await assert.rejects(probe(`http://127.0.0.1:${kvc.port}/healthz`, { timeoutMs: 2_000 }));
  });
});
