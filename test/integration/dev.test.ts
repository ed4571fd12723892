import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { once } from "node:events";
import { existsSync } from "node:fs";
import { dirname } from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import { CoreV1Api, KubeConfig } from "@kubernetes/client-node";
import { probe } from "../../src/controlplane/https-probe.js";
import { freePort } from "../../src/controlplane/ports.js";
import { waitFor } from "../../src/util/wait.js";

const cli = fileURLToPath(new URL("../../src/cli.ts", import.meta.url));

test("kvc dev (the README's run command) starts a control plane with the controllers, and Ctrl-C removes it", async () => {
  const port = await freePort();
  const child = spawn(process.execPath, ["--import", "tsx", cli, "dev", `--secure-port=${port}`], {
    stdio: ["ignore", "ignore", "pipe"],
  });
  let stderr = "";
  child.stderr.on("data", (c: Buffer) => (stderr += c.toString()));
  const exited = once(child, "exit") as Promise<[number | null]>;
  try {
    const kubeconfig = await waitFor(() => /export KUBECONFIG=(\S+)/.exec(stderr)?.[1], {
      timeoutMs: 120_000,
      what: "kvc dev to print the KUBECONFIG line",
    });
    await waitFor(async () => (await probe(`http://127.0.0.1:${port}/readyz`)).status === 200, {
      timeoutMs: 60_000,
      what: "the controllers to be ready",
    });
    const kc = new KubeConfig();
    kc.loadFromFile(kubeconfig);
    const pvs = await kc.makeApiClient(CoreV1Api).listPersistentVolume();
    assert.ok(Array.isArray(pvs.items));

    child.kill("SIGINT");
    const [code] = await exited;
    assert.equal(code, 0, stderr);
    assert.equal(existsSync(dirname(kubeconfig)), false, "the control plane's directory is removed");
  } finally {
    child.kill("SIGKILL");
  }
});
