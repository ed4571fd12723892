import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, test } from "node:test";
import { fileURLToPath } from "node:url";
import { ManagedProcess } from "../../../src/controlplane/process.js";
import { loadKubeConfig } from "../../../src/runtime/client.js";
import { abortedWhen, waitFor } from "../../../src/util/wait.js";
import { runScenarios } from "../scenarios.js";

/*
 * The e2e scenarios on a real cluster (cluster.sh: real kubelet, containerd, kube-proxy, scheduler,
 * the CSI hostpath driver and its sidecars), once with kvc deployed in KCM's loops' place and once
 * with KCM's own loops: both must pass. The cluster script runs under pdeathsig, so a killed test
 * run takes the cluster down with it (its reaper runs `cluster.sh down`).
 */

const here = fileURLToPath(new URL(".", import.meta.url));
const script = join(here, "cluster.sh");
const STATE = "/tmp/kvc-cluster";
const HOSTPATH_DATA = "/var/lib/csi-hostpath-data";
const BUSYBOX = "registry.k8s.io/e2e-test-images/busybox:1.36.1-1";
const PAUSE = "registry.k8s.io/pause:3.10.2";

// The binaries and images first, with no deadline: a first build takes many minutes.
execFileSync(script, ["build"], { stdio: ["ignore", "inherit", "inherit"] });

const logs = mkdtempSync(join(tmpdir(), "kvc-cluster-test-"));
after(() => {
  rmSync(logs, { recursive: true, force: true });
});

for (const impl of ["kvc", "kcm"] as const) {
  describe(`the real cluster with ${impl === "kvc" ? "kvc deployed" : "KCM's own volume loops"}`, () => {
    let cluster: ManagedProcess | undefined;
    after(async () => {
      // SIGTERM: the script takes the cluster down (processes, mounts, bridge, cgroups) before exiting.
      await cluster?.stop(120_000);
      assert.ok(!existsSync(STATE), `cluster.sh left ${STATE}`);
    });

    test("comes up", async () => {
      cluster = new ManagedProcess("cluster", script, ["up", `--impl=${impl}`], join(logs, `${impl}.log`));
      const up = cluster;
      await waitFor(() => existsSync(join(STATE, "ready")), {
        timeoutMs: 600_000,
        intervalMs: 1000,
        what: `the ${impl} cluster to come up (log: ${up.logFile})`,
        signal: abortedWhen(up.exited, (code) => new Error(`cluster.sh exited with ${String(code)}`)),
      }).catch((err: unknown) => {
        throw new Error(`${(err as Error).message}\n${up.logTail(60)}`, { cause: err });
      });
    });

    test("passes the e2e scenarios with real mounts", async () => {
      assert.ok(existsSync(join(STATE, "ready")), "the cluster is up");
      const results = await runScenarios({
        kubeConfig: loadKubeConfig(join(STATE, "admin.kubeconfig"), undefined),
        namespace: "kvc-e2e",
        wffcClass: "csi-hostpath-wffc",
        csiClass: "csi-hostpath-sc",
        kubelet: true,
        podImage: PAUSE,
        dataImage: BUSYBOX,
        driverHasVolume: (handle) => Promise.resolve(existsSync(join(HOSTPATH_DATA, handle))),
        attachedBy: impl === "kvc" ? "kube-volume-controller" : "kube-controller-manager",
      });
      const failed = results.filter((r) => !r.passed);
      assert.deepEqual(
        failed.map((r) => `${r.name}: ${r.error}`),
        [],
        results
          .map((r) => `${r.passed ? "PASS" : "FAIL"} ${r.name} (${(r.ms / 1000).toFixed(1)} s)`)
          .join("\n"),
      );
      assert.equal(results.length, 4, "every scenario ran, the data scenario included");
    });
  });
}
