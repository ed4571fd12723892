import assert from "node:assert/strict";
import {
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, test } from "node:test";
import { fileURLToPath } from "node:url";
import type { V1PersistentVolume } from "@kubernetes/client-node";
import { silentLogger } from "../../src/runtime/logger.js";
import { waitFor } from "../../src/util/wait.js";
import { FlexVolumePlugin } from "../../src/volume/flexvolume/plugin.js";
import { FlexVolumeProber } from "../../src/volume/flexvolume/prober.js";
import { FakeClock } from "../../src/runtime/clock.js";
import { FencedError, WriteGate } from "../../src/runtime/write-gate.js";
import { specFromPersistentVolume, specFromVolume, type VolumeSpec } from "../../src/volume/plugin.js";
import type { ProbeEvent } from "../../src/volume/plugin-manager.js";

/*
 * The FlexVolume plugin and prober against a real driver executable: the fixture script, which logs
 * its arguments and behaves as its "mode" file says.
 */

const FIXTURE = fileURLToPath(new URL("../fixtures/flexvolume/fake-driver.sh", import.meta.url));
const dirs: string[] = [];
after(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

function pluginDir(): string {
  const d = mkdtempSync(join(tmpdir(), "kvc-flex-"));
  dirs.push(d);
  return d;
}

/** Installs the fixture as `<dir>/<vendor~driver>/<driver>`; returns its directory. */
function install(dir: string, directory = "kvc~fake", mode = "ok"): string {
  const driverDir = join(dir, directory);
  mkdirSync(driverDir, { recursive: true });
  writeFileSync(join(driverDir, ".mode"), mode);
  copyFileSync(FIXTURE, join(driverDir, directory.slice(directory.indexOf("~") + 1)));
  return driverDir;
}

/** Each logged call as its argument list. */
function calls(driverDir: string): string[][] {
  const log = join(driverDir, ".calls.log");
  if (!existsSync(log)) return [];
  return readFileSync(log, "utf8")
    .split("---\n")
    .filter((c) => c !== "")
    .map((c) => c.replace(/\n$/, "").split("\n"));
}

function flexPV(name = "pv-flex", driver = "kvc/fake"): V1PersistentVolume {
  return {
    metadata: { name },
    spec: {
      accessModes: ["ReadWriteOnce"],
      flexVolume: { driver, fsType: "ext4", options: { volumeID: "vol-1", "kubernetes.io/fsType": "xfs" } },
    },
  };
}

async function plugin(dir: string, directory = "kvc~fake", callTimeoutMs = 5_000) {
  return FlexVolumePlugin.create({ pluginDir: dir, directory, callTimeoutMs, log: silentLogger });
}

describe("FlexVolume plugin", () => {
  test("init decides attachability; the plugin is named and matched by the driver", async () => {
    const dir = pluginDir();
    const driverDir = install(dir);
    const p = await plugin(dir);
    assert.equal(p.name, "kvc/fake");
    assert.deepEqual(calls(driverDir), [["init"]]);
    assert.equal(p.canAttach(), true);
    assert.equal(p.canSupport(specFromPersistentVolume(flexPV())), true);
    assert.equal(p.canSupport(specFromPersistentVolume(flexPV("x", "other/driver"))), false);
    assert.equal(p.canSupport(specFromVolume({ name: "v", flexVolume: { driver: "kvc/fake" } })), true);
    assert.equal(p.getVolumeName(specFromPersistentVolume(flexPV())), "pv-flex");

    writeFileSync(join(driverDir, ".mode"), "noattach");
    assert.equal((await plugin(dir)).canAttach(), false);
  });

  test("attach, isattached and detach use upstream's argument order and JSON options", async () => {
    const dir = pluginDir();
    const driverDir = install(dir);
    const p = await plugin(dir);
    const spec: VolumeSpec = specFromPersistentVolume(flexPV(), true);
    assert.equal(await p.newAttacher().attach(spec, "node-1"), "/dev/fake-node-1");
    const attached = await p.newAttacher().volumesAreAttached([spec], "node-1");
    assert.equal(attached.get(spec), true);
    await p.newDetacher().detach("pv-flex", "node-1");
    const options = {
      // the source's own options win on a clash, as upstream
      "kubernetes.io/fsType": "xfs",
      "kubernetes.io/readwrite": "ro",
      "kubernetes.io/pvOrVolumeName": "pv-flex",
      volumeID: "vol-1",
    };
    const log = calls(driverDir).slice(1);
    assert.deepEqual(
      log.map((c) => c[0]),
      ["getvolumename", "attach", "isattached", "detach"],
    );
    assert.deepEqual(JSON.parse(log[0]![1]!), options);
    assert.deepEqual(JSON.parse(log[1]![1]!), options);
    assert.equal(log[1]![2], "node-1");
    assert.deepEqual(JSON.parse(log[2]![1]!), options);
    assert.equal(log[2]![2], "node-1");
    assert.deepEqual(log[3], ["detach", "pv-flex", "node-1"]);
  });

  test("in shadow mode the driver is never run: not to act, not to answer a question", async () => {
    const dir = pluginDir();
    const driverDir = install(dir, "kvc~fake", "noattach");
    const p = await FlexVolumePlugin.create({
      pluginDir: dir,
      directory: "kvc~fake",
      callTimeoutMs: 5_000,
      log: silentLogger,
      shadow: true,
    });
    assert.equal(p.canAttach(), true, "init is not asked: upstream's default capabilities");
    const spec: VolumeSpec = specFromPersistentVolume(flexPV(), true);
    assert.equal(await p.newAttacher().attach(spec, "node-1"), "");
    assert.equal(
      (await p.newAttacher().volumesAreAttached([spec], "node-1")).get(spec),
      true,
      "unverified: still attached",
    );
    await p.newDetacher().detach("pv-flex", "node-1");
    assert.deepEqual(calls(driverDir), []);
  });

  test("a leader's attach and detach run only when its write gate admits them; its questions always do", async () => {
    const dir = pluginDir();
    const driverDir = install(dir);
    const clock = new FakeClock();
    const gate = new WriteGate(clock, 10_000);
    const p = await FlexVolumePlugin.create({
      pluginDir: dir,
      directory: "kvc~fake",
      callTimeoutMs: 5_000,
      log: silentLogger,
      gate,
    });
    const spec: VolumeSpec = specFromPersistentVolume(flexPV(), true);
    const commands = () => calls(driverDir).map((c) => c[0]);
    // Not leading (yet, or any more): nothing acts.
    await assert.rejects(p.newAttacher().attach(spec, "node-1"), FencedError);
    await assert.rejects(p.newDetacher().detach("pv-flex", "node-1"), FencedError);
    assert.deepEqual(commands(), ["init", "getvolumename"]);
    assert.equal((await p.newAttacher().volumesAreAttached([spec], "node-1")).get(spec), true);

    const term = new AbortController();
    gate.renewed(clock.now());
    gate.lead(term.signal);
    assert.equal(await p.newAttacher().attach(spec, "node-1"), "/dev/fake-node-1");
    await p.newDetacher().detach("pv-flex", "node-1");
    assert.deepEqual(commands().slice(3), ["getvolumename", "attach", "detach"]);

    // Past the renew deadline (a leader paused, or cut off from the apiserver): the detach waits for a
    // renewal; the term ends instead, and the driver is never run.
    clock.advance(10_000);
    const detach = p.newDetacher().detach("pv-flex", "node-1");
    await new Promise((resolve) => setImmediate(resolve));
    term.abort(new Error("lease lost"));
    await assert.rejects(detach, /no longer leading \(lease lost\)/);
    assert.deepEqual(commands().slice(6), []);
  });

  test("a driver still attaching when the leader's renewal goes stale is killed", async () => {
    const dir = pluginDir();
    const driverDir = install(dir);
    const clock = new FakeClock();
    const gate = new WriteGate(clock, 10_000);
    gate.renewed(clock.now());
    gate.lead(new AbortController().signal);
    const p = await FlexVolumePlugin.create({
      pluginDir: dir,
      directory: "kvc~fake",
      callTimeoutMs: 60_000,
      log: silentLogger,
      gate,
    });
    writeFileSync(join(driverDir, ".mode"), "hang");
    const detach = p.newDetacher().detach("pv-flex", "node-1");
    await waitFor(() => calls(driverDir).some((c) => c[0] === "detach"), {
      timeoutMs: 10_000,
      what: "the driver to start detaching",
    });
    const started = Date.now();
    clock.advance(10_000);
    await assert.rejects(detach, /FlexVolume driver kvc\/fake: detach aborted/);
    assert.ok(Date.now() - started < 5_000, "killed at once, not at the call's timeout");
  });

  test('"Not supported" falls back to the defaults and is not asked again', async () => {
    const dir = pluginDir();
    const driverDir = install(dir);
    const p = await plugin(dir);
    writeFileSync(join(driverDir, ".mode"), "notsupported");
    const spec = specFromPersistentVolume(flexPV());
    assert.equal(await p.newAttacher().attach(spec, "n"), "");
    assert.equal(await p.newAttacher().attach(spec, "n"), "");
    assert.equal((await p.newAttacher().volumesAreAttached([spec], "n")).get(spec), true);
    await p.newDetacher().detach("pv-flex", "n");
    const commands = calls(driverDir).map((c) => c[0]);
    assert.deepEqual(commands, ["init", "getvolumename", "attach", "isattached", "detach"]);
  });

  test("a Failure reply, a crash, garbage and a hang each give a clear error", async () => {
    const dir = pluginDir();
    const driverDir = install(dir);
    const p = await plugin(dir, "kvc~fake", 500);
    const spec = specFromPersistentVolume(flexPV());
    const attach = () => p.newAttacher().attach(spec, "n");
    writeFileSync(join(driverDir, ".mode"), "fail");
    await assert.rejects(attach(), {
      message: "getvolumename command failed, status: Failure, reason: the storage said no",
    });
    writeFileSync(join(driverDir, ".mode"), "crash");
    await assert.rejects(
      attach(),
      /FlexVolume driver kvc\/fake: getvolumename exited with code 3; stderr: ""/,
    );
    writeFileSync(join(driverDir, ".mode"), "garbage");
    await assert.rejects(
      attach(),
      /FlexVolume driver kvc\/fake: getvolumename printed no JSON reply: "panic: this driver is broken"/,
    );
    writeFileSync(join(driverDir, ".mode"), "hang");
    const started = Date.now();
    await assert.rejects(attach(), /FlexVolume driver kvc\/fake: getvolumename timeout after 500 ms/);
    assert.ok(Date.now() - started < 5_000, "the hung driver's child (sleep) does not hold the call open");
  });

  test("no driver is started once the caller's signal is aborted (a leader that lost its lease)", async () => {
    const dir = pluginDir();
    const driverDir = install(dir);
    const p = await plugin(dir);
    const lost = AbortSignal.abort(new Error("lease lost"));
    const spec = specFromPersistentVolume(flexPV(), true);
    await assert.rejects(p.newAttacher().attach(spec, "node-1", lost), /getvolumename not run: aborted/);
    await assert.rejects(p.newDetacher().detach("pv-flex", "node-1", lost), /detach not run: aborted/);
    assert.deepEqual(calls(driverDir), [["init"]]);
  });

  test("an argument is passed as one argument, never through a shell", async () => {
    const dir = pluginDir();
    const driverDir = install(dir);
    const p = await plugin(dir);
    await p.newDetacher().detach("name; touch pwned $(id)", "node `x`");
    assert.deepEqual(calls(driverDir).at(-1), ["detach", "name; touch pwned $(id)", "node `x`"]);
    assert.equal(existsSync(join(process.cwd(), "pwned")), false);
  });
});

describe("FlexVolume prober", () => {
  const collect = (events: ProbeEvent[]) =>
    events.map((e) => (e.op === "remove" ? `remove ${e.pluginName}` : `${e.op} ${e.plugin.name}`));

  test("finds drivers at start, ignoring dot-directories and directories without an executable", async () => {
    const dir = pluginDir();
    install(dir, "kvc~one");
    install(dir, ".hidden~two");
    mkdirSync(join(dir, "empty~dir"));
    const prober = new FlexVolumeProber({ pluginDir: dir, log: silentLogger });
    await prober.init();
    try {
      assert.deepEqual(collect(await prober.probe()), ["add kvc/one"]);
      assert.deepEqual(await prober.probe(), [], "each change is reported once");
    } finally {
      prober.close();
    }
  });

  test("a driver dropped in at run time is added; removed, it is unregistered; a broken init is skipped", async () => {
    const dir = pluginDir();
    const prober = new FlexVolumeProber({ pluginDir: dir, log: silentLogger, callTimeoutMs: 500 });
    await prober.init();
    try {
      assert.deepEqual(await prober.probe(), []);
      install(dir, "kvc~late");
      const seen: string[] = [];
      await waitFor(
        async () => (seen.push(...collect(await prober.probe())), seen.includes("add kvc/late")),
        {
          timeoutMs: 10_000,
          what: "the new driver to be probed",
        },
      );
      rmSync(join(dir, "kvc~late"), { recursive: true });
      await waitFor(async () => collect(await prober.probe()).includes("remove kvc/late"), {
        timeoutMs: 10_000,
        what: "the removed driver to be unregistered",
      });
      install(dir, "kvc~broken", "crash");
      const after: string[] = [];
      await waitFor(
        async () => (
          after.push(...collect(await prober.probe())),
          existsSync(join(dir, "kvc~broken", ".calls.log"))
        ),
        {
          timeoutMs: 10_000,
          what: "the broken driver's init to run",
        },
      );
      assert.deepEqual(
        after.filter((e) => e.includes("broken")),
        [],
        "a driver whose init fails is not added",
      );
    } finally {
      prober.close();
    }
  });

  test("a driver directory probed before its executable arrives is watched: the executable is found", async () => {
    const dir = pluginDir();
    const prober = new FlexVolumeProber({ pluginDir: dir, log: silentLogger });
    let needed = 0;
    prober.onProbeNeeded(() => needed++);
    await prober.init();
    try {
      assert.deepEqual(await prober.probe(), []);
      mkdirSync(join(dir, "kvc~late"));
      await waitFor(() => needed > 0, { timeoutMs: 10_000, what: "the directory's event" });
      assert.deepEqual(await prober.probe(), [], "no executable yet");
      needed = 0;
      install(dir, "kvc~late");
      await waitFor(() => needed > 0, { timeoutMs: 10_000, what: "the executable's event" });
      await waitFor(async () => collect(await prober.probe()).includes("add kvc/late"), {
        timeoutMs: 10_000,
        what: "the driver to be added",
      });
    } finally {
      prober.close();
    }
  });

  test("a driver whose init fails is retried after a backoff, without a filesystem change", async () => {
    const dir = pluginDir();
    const driverDir = install(dir, "kvc~flaky", "initfailonce");
    const clock = new FakeClock();
    const prober = new FlexVolumeProber({ pluginDir: dir, log: silentLogger, clock });
    await prober.init();
    try {
      assert.deepEqual(await prober.probe(), [], "the first init fails");
      assert.deepEqual(await prober.probe(), [], "not retried within the backoff");
      assert.equal(calls(driverDir).length, 1);
      clock.advance(501);
      assert.deepEqual(collect(await prober.probe()), ["add kvc/flaky"]);
      assert.deepEqual(await prober.probe(), [], "reported once");
    } finally {
      prober.close();
    }
  });

  test("it says when a probe may find something: a watch event, a failed init's backoff ending", async () => {
    const dir = pluginDir();
    const clock = new FakeClock();
    const prober = new FlexVolumeProber({ pluginDir: dir, log: silentLogger, clock });
    let needed = 0;
    prober.onProbeNeeded(() => needed++);
    await prober.init();
    try {
      assert.deepEqual(await prober.probe(), []);
      install(dir, "kvc~flaky", "initfailonce");
      await waitFor(() => needed > 0, { timeoutMs: 10_000, what: "the watch event" });
      await waitFor(async () => (await prober.probe(), calls(join(dir, "kvc~flaky")).length === 1), {
        timeoutMs: 10_000,
        what: "the first init to run (and fail)",
      });
      needed = 0;
      clock.advance(500);
      assert.equal(needed, 0, "within the backoff");
      clock.advance(1);
      assert.equal(needed, 1, "the backoff ended");
      assert.deepEqual(collect(await prober.probe()), ["add kvc/flaky"]);
    } finally {
      prober.close();
    }
    assert.equal(clock.pendingTimers, 0, "close() cancels the retries");
  });

  test("a registered driver whose init fails once is not unloaded", async () => {
    const dir = pluginDir();
    const driverDir = install(dir, "kvc~one");
    const clock = new FakeClock();
    const prober = new FlexVolumeProber({ pluginDir: dir, log: silentLogger, clock });
    await prober.init();
    try {
      assert.deepEqual(collect(await prober.probe()), ["add kvc/one"]);
      writeFileSync(join(driverDir, ".mode"), "initfailonce");
      writeFileSync(join(driverDir, "changed"), ""); // a change that makes the prober look again
      const seen: string[] = [];
      await waitFor(
        async () => {
          seen.push(...collect(await prober.probe()));
          clock.advance(501); // each failed init's backoff passes
          return seen.includes("update kvc/one");
        },
        { timeoutMs: 10_000, what: "the driver to be initialised again" },
      );
      assert.ok(existsSync(join(driverDir, ".init-failed")), "an init failed on the way");
      assert.ok(!seen.includes("remove kvc/one"), `unloaded: ${seen.join(", ")}`);
    } finally {
      prober.close();
    }
  });

  test("a plugin directory that cannot be watched fails init (the caller runs without FlexVolume)", async () => {
    const dir = pluginDir();
    const prober = new FlexVolumeProber({
      pluginDir: dir,
      log: silentLogger,
      watch: () => {
        throw new Error("ENOSPC: System limit for number of file watchers reached");
      },
    });
    await assert.rejects(prober.init(), {
      message:
        "error adding watch on Flexvolume directory: ENOSPC: System limit for number of file watchers reached",
    });
  });

  test("in shadow mode a missing plugin directory is not created", async () => {
    const dir = join(pluginDir(), "missing");
    const prober = new FlexVolumeProber({ pluginDir: dir, log: silentLogger, shadow: true });
    await assert.rejects(prober.init());
    prober.close();
    assert.equal(existsSync(dir), false);
  });

  test("a deleted plugin directory is recreated and rescanned", async () => {
    const dir = pluginDir();
    const prober = new FlexVolumeProber({ pluginDir: dir, log: silentLogger });
    await prober.init();
    try {
      install(dir, "kvc~one");
      await waitFor(async () => collect(await prober.probe()).includes("add kvc/one"), {
        timeoutMs: 10_000,
        what: "the driver to be found",
      });
      rmSync(dir, { recursive: true });
      await waitFor(async () => collect(await prober.probe()).includes("remove kvc/one") && existsSync(dir), {
        timeoutMs: 10_000,
        what: "the directory to be recreated and the driver dropped",
      });
      install(dir, "kvc~two");
      await waitFor(async () => collect(await prober.probe()).includes("add kvc/two"), {
        timeoutMs: 10_000,
        what: "a driver in the recreated directory to be found",
      });
    } finally {
      prober.close();
    }
  });
});
