import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { delimiter, join } from "node:path";
import { test } from "node:test";
import { loadKubeConfig } from "../../src/runtime/client.js";

function kubeconfig(dir: string, name: string, server: string, current: string): string {
  const path = join(dir, name);
  writeFileSync(
    path,
    JSON.stringify({
      apiVersion: "v1",
      kind: "Config",
      clusters: [
        { name: "shared", cluster: { server } },
        { name, cluster: { server: `${server}/${name}` } },
      ],
      users: [{ name: "u", user: { token: name } }],
      contexts: [{ name, context: { cluster: name, user: "u" } }],
      "current-context": current,
    }),
  );
  return path;
}

test("without --kubeconfig, $KUBECONFIG is read as kubectl does: merged, the first file wins", () => {
  const dir = mkdtempSync(join(tmpdir(), "kvc-kubeconfig-"));
  try {
    const a = kubeconfig(dir, "a", "https://a.example", "");
    const b = kubeconfig(dir, "b", "https://b.example", "b");
    const c = kubeconfig(dir, "c", "https://c.example", "c");
    const env = { KUBECONFIG: [a, join(dir, "missing"), b, c].join(delimiter) };
    const kc = loadKubeConfig(undefined, undefined, env);
    assert.equal(kc.currentContext, "b", "the first file that sets a current context");
    assert.equal(kc.getCurrentCluster()?.server, "https://b.example/b");
    assert.equal(kc.getCluster("shared")?.server, "https://a.example", "the first file naming a cluster");
    assert.equal(kc.getUsers().find((u) => u.name === "u")?.token, "a");
    assert.deepEqual(
      kc.getContexts().map((x) => x.name),
      ["a", "b", "c"],
    );
    // --master overrides the server of the current cluster, as with --kubeconfig.
    assert.equal(
      loadKubeConfig(undefined, "https://m.example", env).getCurrentCluster()?.server,
      "https://m.example",
    );
    // --kubeconfig wins over $KUBECONFIG.
    assert.equal(loadKubeConfig(c, undefined, env).currentContext, "c");
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("with neither flags, $KUBECONFIG nor a pod's environment, the error says how to name a cluster", () => {
  assert.throws(
    () => loadKubeConfig(undefined, undefined, {}),
    /^Error: no cluster to talk to: .*give --kubeconfig=<file> \(or set KUBECONFIG\) or --master=<url>$/,
  );
  assert.throws(
    () => loadKubeConfig(undefined, undefined, { KUBECONFIG: "/nonexistent" }),
    /KUBECONFIG=\/nonexistent: no such file/,
  );
});
