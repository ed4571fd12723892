import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";
import { ManagedProcess } from "../../src/controlplane/process.js";
import { waitFor } from "../../src/util/wait.js";

const dir = mkdtempSync(join(tmpdir(), "kvc-process-test-"));
after(() => {
  rmSync(dir, { recursive: true, force: true });
});

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

test("stop() ends the process and logs go to the log file", async () => {
  const p = new ManagedProcess("sh", "/bin/sh", ["-c", "echo hello; exec sleep 60"], join(dir, "sh.log"));
  await waitFor(() => readFileSync(p.logFile, "utf8").includes("hello"), {
    timeoutMs: 10_000,
    what: "output",
  });
  assert.equal(p.running, true);
  await p.stop();
  assert.equal(p.running, false);
  assert.equal(p.logTail(), "hello");
});

test("stop() escalates to SIGKILL when SIGTERM is ignored", async () => {
  const p = new ManagedProcess(
    "stubborn",
    "/bin/sh",
    ["-c", "trap '' TERM; echo up; while :; do sleep 0.1; done"],
    join(dir, "stubborn.log"),
  );
  await waitFor(() => readFileSync(p.logFile, "utf8").includes("up"), {
    timeoutMs: 10_000,
    what: "trap installed",
  });
  await p.stop(200);
  assert.equal(p.running, false);
});

test(
  "children die with their owner even when the owner is SIGKILLed",
  { skip: process.platform !== "linux" },
  async () => {
    // A separate Node process starts a child, prints the child's pid, and is then killed outright.
    const script = `
    import { ManagedProcess } from ${JSON.stringify(new URL("../../src/controlplane/process.ts", import.meta.url).href)};
    const p = new ManagedProcess("sleep", "/bin/sleep", ["60"], ${JSON.stringify(join(dir, "orphan.log"))});
    console.log(p.pid);
    setInterval(() => {}, 1000);
  `;
    const owner = spawn(process.execPath, ["--import", "tsx", "--input-type=module", "-e", script], {
      stdio: ["ignore", "pipe", "inherit"],
    });
    let out = "";
    owner.stdout.on("data", (c: Buffer) => (out += c.toString()));
    const childPid = await waitFor(() => Number(out.trim()) || undefined, {
      timeoutMs: 30_000,
      what: "child pid",
    });
    // setpriv execs the real program, so the pid printed is the sleep itself once exec has happened.
    await waitFor(() => readFileSync(`/proc/${childPid}/cmdline`, "utf8").startsWith("/bin/sleep"), {
      timeoutMs: 10_000,
      what: "setpriv to exec sleep",
    });
    owner.kill("SIGKILL");
    await waitFor(() => !alive(childPid), {
      timeoutMs: 10_000,
      what: `pid ${childPid} to die with its owner`,
    });
  },
);
