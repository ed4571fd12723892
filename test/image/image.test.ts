import assert from "node:assert/strict";
import { execFile, execFileSync, spawnSync } from "node:child_process";
import { randomUUID } from "node:crypto";
import {
  chmodSync,
  copyFileSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { CoordinationV1Api, CoreV1Api } from "@kubernetes/client-node";
import { LocalControlPlane } from "../../src/controlplane/local-control-plane.js";
import { probe } from "../../src/controlplane/https-probe.js";
import { freePort } from "../../src/controlplane/ports.js";
import { startExternalAttacher } from "../../src/dev/external-attacher.js";
import { silentLogger } from "../../src/runtime/logger.js";
import { waitFor } from "../../src/util/wait.js";
import {
  csiUniqueName,
  nodeReportsAttached,
  podWithCSIVolumeOnManagedNode,
} from "../support/attach-detach.js";
import { buildImage, podmanEnv } from "./build-image.js";

/*
 * The image users build: the Dockerfile, unchanged, built with podman (runc) on the stand-in base
 * that test/image/base-image.sh caches, then run as the Deployment runs it against the embedded
 * control plane.
 */

const root = fileURLToPath(new URL("../../", import.meta.url));
const IMAGE = `localhost/kube-volume-controller:image-test`;
const NS = "kube-volume-controller";
const pkg = JSON.parse(readFileSync(join(root, "package.json"), "utf8")) as {
  devDependencies: Record<string, string>;
};
/** Kubernetes' default terminationGracePeriodSeconds. */
const GRACE_SECONDS = 30;
const env = podmanEnv;
const run = promisify(execFile);

async function podman(...args: string[]): Promise<string> {
  const { stdout } = await run("podman", args, { env, maxBuffer: 64 << 20 });
  return stdout;
}

/**
 * A kvc serving URL: HTTPS with the in-memory self-signed certificate; health paths need no token,
 * and probe() does not verify a loopback peer.
 */
function servingUrl(port: number, path: string): string {
  return `https://127.0.0.1:${port}${path}`;
}

describe("the image built from the Dockerfile", () => {
  const work = mkdtempSync(join(tmpdir(), "kvc-image-test-"));
  const secretMarker = `kvc-build-secret-${randomUUID()}`;
  let cp: LocalControlPlane;
  let container = "";

  before(async () => {
    const start = Date.now();
    buildImage(IMAGE, secretMarker);
    const size = Number(await podman("image", "inspect", "--format", "{{.Size}}", IMAGE));
    console.log(
      `image: built in ${((Date.now() - start) / 1000).toFixed(0)} s; size ${(size / 2 ** 20).toFixed(0)} MiB`,
    );
    cp = await LocalControlPlane.start();
  });
  after(async () => {
    if (container) await podman("rm", "--force", "--time=0", container).catch(() => undefined);
    await cp?.stop();
    rmSync(work, { recursive: true, force: true });
  });

  test("`kvc version` answers", async () => {
    assert.match(await podman("run", "--rm", IMAGE, "version"), /^kube-volume-controller v\d+\.\d+\.\d+/);
  });

  test("no dev dependency is in the image, nor the build's registry secret", async () => {
    // Dev dependencies that no production dependency needs (@types/node is one of client-node's).
    const production = new Set(
      execFileSync("npm", ["ls", "--omit=dev", "--all", "--parseable"], { cwd: root, encoding: "utf8" })
        .split("\n")
        .map((path) => path.slice(join(root, "node_modules/").length)),
    );
    const devOnly = Object.keys(pkg.devDependencies).filter((d) => !production.has(d));
    for (const d of ["tsx", "typescript", "eslint", "fast-check", "prettier", "node"])
      assert.ok(devOnly.includes(d), d);
    const present = await podman(
      "run",
      "--rm",
      "--entrypoint=/bin/sh",
      IMAGE,
      "-c",
      'for d in "$@"; do [ ! -e "/app/node_modules/$d" ] || echo "$d"; done',
      "sh",
      ...devOnly,
      "@kubernetes/client-node",
    );
    assert.deepEqual(present.trim().split("\n"), ["@kubernetes/client-node"], "only production dependencies");
    // Every layer, as `podman save` writes it: the npmrc given as a secret is in none.
    const archive = join(work, "image.tar");
    await podman("save", "--format=docker-archive", "-o", archive, IMAGE);
    const grep = spawnSync("grep", ["-c", "-a", secretMarker, archive], { encoding: "utf8" });
    rmSync(archive);
    assert.equal(grep.stdout.trim(), "0", "the build secret is in a layer");
  });

  test("`kvc run` (read-only root, uid 65532, no capabilities, host network) binds, attaches, reaps a driver's orphans, answers /healthz, and ends on SIGTERM with the Lease released", async () => {
    const kc = cp.kubeConfig();
    const core = kc.makeApiClient(CoreV1Api);
    const coord = kc.makeApiClient(CoordinationV1Api);
    await core.createNamespace({ body: { metadata: { name: NS } } });

    // What the container mounts: a kubeconfig it can read as uid 65532, a FlexVolume plugin dir with a
    // driver that orphans a child, and a directory where that child reports.
    const mounts = join(work, "mounts");
    mkdirSync(join(mounts, "flex/kvc~orphaning"), { recursive: true });
    mkdirSync(join(mounts, "out"));
    chmodSync(join(mounts, "out"), 0o777);
    copyFileSync(
      join(root, "test/fixtures/flexvolume/orphaning-driver.sh"),
      join(mounts, "flex/kvc~orphaning/orphaning"),
    );
    chmodSync(join(mounts, "flex/kvc~orphaning/orphaning"), 0o755);
    const user = kc.getCurrentUser()!;
    writeFileSync(
      join(mounts, "kubeconfig"),
      JSON.stringify({
        apiVersion: "v1",
        kind: "Config",
        clusters: [
          {
            name: "local",
            cluster: {
              server: cp.server,
              "certificate-authority-data": Buffer.from(readFileSync(cp.caFile)).toString("base64"),
            },
          },
        ],
        users: [{ name: "admin", user: { token: user.token } }],
        contexts: [{ name: "local", context: { cluster: "local", user: "admin" } }],
        "current-context": "local",
      }),
      { mode: 0o644 },
    );

    const port = await freePort();
    container = `kvc-image-test-${process.pid}`;
    await podman(
      "run",
      "--detach",
      "--name",
      container,
      "--read-only",
      "--user=65532:65532",
      "--cap-drop=ALL",
      "--security-opt=no-new-privileges",
      "--network=host",
      "--env",
      "KVC_ORPHAN_OUT=/out/orphan.out",
      "--volume",
      `${mounts}/kubeconfig:/etc/kvc/kubeconfig:ro`,
      "--volume",
      `${mounts}/flex:/flexvolume:ro`,
      "--volume",
      `${mounts}/out:/out`,
      IMAGE,
      "run",
      "--kubeconfig=/etc/kvc/kubeconfig",
      "--bind-address=127.0.0.1",
      `--secure-port=${port}`,
      "--leader-elect=true",
      `--leader-elect-resource-namespace=${NS}`,
      "--leader-elect-resource-name=kube-volume-controller",
      "--pvclaimbinder-sync-period=1s",
      "--flex-volume-plugin-dir=/flexvolume",
    );
    const logs = async () => (await podman("logs", container).catch((e: unknown) => String(e))).slice(-3000);
    const attacher = new AbortController();
    const external = startExternalAttacher({
      kubeConfig: kc,
      drivers: ["image.csi.example.com"],
      log: silentLogger,
      signal: attacher.signal,
    });
    try {
      await waitFor(async () => (await probe(servingUrl(port, "/readyz"))).status === 200, {
        timeoutMs: 60_000,
        what: `kvc's /readyz in the container (logs: ${await logs()})`,
      });
      const healthz = await probe(servingUrl(port, "/healthz"));
      assert.equal(healthz.status, 200, healthz.body);

      // A static pair binds.
      await core.createPersistentVolume({
        body: {
          metadata: { name: "image-static" },
          spec: {
            capacity: { storage: "1Gi" },
            accessModes: ["ReadWriteOnce"],
            storageClassName: "image",
            hostPath: { path: "/tmp/kvc-image" },
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
      const bound = (name: string) =>
        waitFor(
          async () =>
            (await core.readNamespacedPersistentVolumeClaim({ namespace: "default", name })).status?.phase ===
            "Bound",
          { timeoutMs: 60_000, what: `${name} to be Bound` },
        );
      await claim("image-static", "image");
      await bound("image-static");

      // A CSI volume of a pod on a managed node is attached and reported in the node's status.
      await podWithCSIVolumeOnManagedNode(core, {
        name: "image-csi",
        pod: "image-pod",
        node: "image-node",
        driver: "image.csi.example.com",
        handle: "image-disk",
        bound,
      });
      await nodeReportsAttached(core, "image-node", csiUniqueName("image.csi.example.com", "image-disk"), {
        what: `the node status to list the attached CSI volume (logs: ${await logs()})`,
      });

      // The FlexVolume driver's init left a child that outlived it; once it has exited, its new parent
      // (PID 1) must have reaped it: its pid is gone from /proc, not a zombie.
      const [orphan, parent] = await waitFor(
        () => {
          try {
            return readFileSync(join(mounts, "out/orphan.out"), "utf8").trim().split(" ");
          } catch {
            return undefined;
          }
        },
        { timeoutMs: 30_000, what: "the driver's orphaned child to report" },
      );
      assert.equal(parent, "1", "the orphan was re-parented to PID 1");
      const orphanState = async () =>
        (
          await podman(
            "exec",
            container,
            "/bin/sh",
            "-c",
            `grep '^State:' /proc/${orphan}/status || echo gone`,
          )
        ).trim();
      await waitFor(async () => (await orphanState()) === "gone", {
        timeoutMs: 10_000,
        what: `the orphan ${orphan} to be reaped`,
      }).catch(async (err: unknown) => {
        throw new Error(`${String(err)}; its ${await orphanState()}`);
      });
      const zombies = await podman(
        "exec",
        container,
        "/bin/sh",
        "-c",
        "grep -l '^State:.*Z' /proc/[0-9]*/status || true",
      );
      assert.equal(zombies.trim(), "", "no zombie in the container");

      // SIGTERM (podman stop sends it, then SIGKILL after the grace period): a clean exit in time,
      // the Lease released for the standby.
      const held = await coord.readNamespacedLease({ namespace: NS, name: "kube-volume-controller" });
      assert.ok(held.spec?.holderIdentity, "kvc holds the Lease");
      const stopping = Date.now();
      await podman("stop", `--time=${GRACE_SECONDS}`, container);
      const stopSeconds = (Date.now() - stopping) / 1000;
      const exitCode = (await podman("inspect", "--format", "{{.State.ExitCode}}", container)).trim();
      assert.equal(exitCode, "0", `kvc exited ${exitCode} on SIGTERM (logs: ${await logs()})`);
      assert.ok(stopSeconds < GRACE_SECONDS, `stopped in ${stopSeconds} s`);
      console.log(`image: kvc stopped on SIGTERM in ${stopSeconds.toFixed(1)} s`);
      const released = await coord.readNamespacedLease({ namespace: NS, name: "kube-volume-controller" });
      assert.equal(released.spec?.holderIdentity ?? "", "", "the Lease is released");
    } finally {
      attacher.abort();
      await external.stop();
    }
  });
});
