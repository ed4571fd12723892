import assert from "node:assert/strict";
import { execFile, spawn } from "node:child_process";
import { once } from "node:events";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { CoreV1Api, KubeConfig } from "@kubernetes/client-node";
import { freePort } from "../../src/controlplane/ports.js";
import { waitFor } from "../../src/util/wait.js";

const root = fileURLToPath(new URL("../..", import.meta.url));

/** Processes whose command line mentions `text` (the control plane's directory is in every server's). */
function processesMentioning(text: string): string[] {
  const found: string[] = [];
  for (const pid of readdirSync("/proc").filter((p) => /^\d+$/.test(p))) {
    try {
      const cmdline = readFileSync(join("/proc", pid, "cmdline"), "utf8").replaceAll("\0", " ");
      if (cmdline.includes(text) && Number(pid) !== process.pid) found.push(`${pid}: ${cmdline}`);
    } catch {
      // exited meanwhile
    }
  }
  return found;
}

test("the README's run command in a terminal: the demo settles on the live table, Ctrl-C removes everything", async () => {
  const port = await freePort();
  // `script` gives the command a pseudo-terminal (util-linux, like the setpriv the control plane uses):
  // the table is drawn for a person, and Ctrl-C is a byte typed into the terminal, not a signal we send.
  const child = spawn("script", ["-qfec", `npm start -- --secure-port=${port}`, "/dev/null"], {
    cwd: root,
    stdio: ["pipe", "pipe", "pipe"],
    env: { ...process.env, TERM: "xterm" },
  });
  let screen = "";
  child.stdout.on("data", (c: Buffer) => (screen += c.toString()));
  child.stderr.on("data", (c: Buffer) => (screen += c.toString()));
  const exited = once(child, "exit") as Promise<[number | null]>;
  try {
    const kubeconfig = await waitFor(() => /export KUBECONFIG=(\S+)/.exec(screen)?.[1], {
      timeoutMs: 120_000,
      what: "the KUBECONFIG line",
    });
    await waitFor(() => screen.includes("— settled"), {
      timeoutMs: 120_000,
      what: `the demo to settle; the terminal shows:\n${screen.slice(-2000)}`,
    });
    // The last table drawn: every demo claim Bound, both pods' volumes attached.
    const table = screen.slice(screen.lastIndexOf("CLAIM"));
    assert.match(table, /7\/7 claims Bound, 2\/2 volumes attached — settled/);
    assert.match(table, /^static-large\s+demo-static\s+Bound\s+demo-static-5\s*$/m, "smallest fitting PV");
    assert.match(table, /^dynamic-a\s+demo-hostpath\s+Bound\s+pvc-[0-9a-f-]{36}\s*$/m, "provisioned");
    assert.equal((table.match(/demo-node\s+true/g) ?? []).length, 2);
    assert.match(
      screen,
      new RegExp(String.raw`\u001b\[\d+A\u001b\[J`),
      "on a terminal the table is redrawn in place",
    );
    // kubectl's view agrees (what the printed KUBECONFIG line promises).
    const kc = new KubeConfig();
    kc.loadFromFile(kubeconfig);
    const claims = await kc
      .makeApiClient(CoreV1Api)
      .listNamespacedPersistentVolumeClaim({ namespace: "kvc-demo" });
    const phases = new Map(claims.items.map((c) => [c.metadata?.name ?? "", c.status?.phase]));
    assert.equal(phases.get("too-big"), "Pending", "the claim left Pending on purpose");
    phases.delete("too-big");
    assert.deepEqual(
      [...phases.values()],
      [...phases.values()].map(() => "Bound"),
    );
    // The printed explain line runs as printed (KUBECONFIG exported) and names the reason.
    const line = /^ {2}(kvc explain pvc \S+ -n \S+)/m.exec(screen)?.[1];
    assert.ok(line, `the explain line is printed:\n${screen.slice(0, 3000)}`);
    const explained = await promisify(execFile)(
      process.execPath,
      ["--import", "tsx", join(root, "src/app/cli.ts"), ...line.split(" ").slice(1), "-o", "json"],
      { cwd: root, env: { ...process.env, KUBECONFIG: kubeconfig } },
    );
    const report = JSON.parse(explained.stdout) as { conclusion: { kind: string } };
    assert.equal(report.conclusion.kind, "ClassNotFound");

    const cpDir = dirname(kubeconfig);
    assert.ok(processesMentioning(cpDir).length >= 2, "etcd and kube-apiserver run from the directory");
    child.stdin.write("\x03"); // Ctrl-C
    const [code] = await exited;
    // npm answers Ctrl-C with the shell's 130 once its child is done; kvc itself exits 0.
    assert.ok(code === 0 || code === 130, `exit code ${code}: ${screen.slice(-2000)}`);
    assert.match(screen, /kvc dev: stopping the control plane/);
    assert.doesNotMatch(screen, /kvc: error/);
    await waitFor(() => !existsSync(cpDir) && processesMentioning(cpDir).length === 0, {
      timeoutMs: 10_000,
      what: `the control plane's directory and processes to be gone: ${processesMentioning(cpDir).join("; ")}`,
    });
  } finally {
    child.kill("SIGKILL");
  }
});
