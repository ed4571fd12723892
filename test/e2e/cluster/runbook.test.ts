import assert from "node:assert/strict";
import { execFile, execFileSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { after, describe, test } from "node:test";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { AppsV1Api, CoreV1Api, StorageV1Api } from "@kubernetes/client-node";
import { ManagedProcess } from "../../../src/controlplane/process.js";
import { loadKubeConfig, mergePatch } from "../../../src/runtime/client.js";
import { abortedWhen, waitFor } from "../../../src/util/wait.js";
import { helmBinary } from "../../support/chart.js";

/*
 * docs/operations.md's cutover runbook, run on the real cluster (cluster.sh: real kubelet,
 * containerd, CSI hostpath driver with attach) in its order: install kvc with no replica, KCM's loops
 * off, kvc up, verify, roll back, uninstall. Each `<!-- runbook: NAME -->` block runs as written
 * (bash -euo pipefail, kubectl and helm as a user has them), but for the kubeadm ones: KCM is a
 * process here, not a static pod, so `cluster.sh kcm-controllers` restarts it with the docs' line and
 * its log is checked as the docs check the leader's. A StatefulSet's volumes stay bound, attached and
 * mounted throughout: nothing about them may change at either switch. Prints each step's time.
 */

const here = fileURLToPath(new URL(".", import.meta.url));
const root = join(here, "..", "..", "..");
const script = join(here, "cluster.sh");
const STATE = "/tmp/kvc-cluster";
const KCM_LOG = join(STATE, "logs", "kube-controller-manager.log");
const BUSYBOX = "registry.k8s.io/e2e-test-images/busybox:1.36.1-1";
const NS = "runbook";
const LOOPS = [
  "persistentvolume-binder-controller",
  "persistentvolume-attach-detach-controller",
  "persistentvolumeclaim-protection-controller",
  "persistentvolume-protection-controller",
];

/** The runbook's named shell blocks, and KCM's --controllers line for the cutover. */
const docs = readFileSync(join(root, "docs", "operations.md"), "utf8");
const blocks = new Map(
  [...docs.matchAll(/<!-- runbook: ([a-z-]+) -->\s*```sh\n([\s\S]*?)\n\s*```/g)].map((m) => [
    m[1] ?? "",
    (m[2] ?? "").replace(/^ {2,3}/gm, ""), // a block inside a list item is indented
  ]),
);
const offLine = /^--controllers=(\S+)$/m.exec(docs)?.[1];
const onLine = /KCM's loops back on\*\*: step 3 with `--controllers=([^`]+)`/.exec(docs)?.[1];

// The binaries and images first, with no deadline: a first build takes many minutes.
execFileSync(script, ["build"], { stdio: ["ignore", "inherit", "inherit"] });
const helm = await helmBinary();
const kubectlDir =
  execFileSync(join(root, "test/control-plane/build.sh"), ["kubectl"], { encoding: "utf8" })
    .trim()
    .split("\n")
    .at(-1) ?? "";

const logs = mkdtempSync(join(tmpdir(), "kvc-runbook-test-"));
after(() => {
  rmSync(logs, { recursive: true, force: true });
});

const times: [string, number][] = [];

/** Runs a runbook block as a user's shell would, after the env block (with this cluster's image). */
async function run(name: string, replace: [string, string][] = []): Promise<string> {
  let body = blocks.get(name);
  assert.ok(body, `docs/operations.md has the runbook block "${name}"`);
  for (const [from, to] of replace) body = body.replaceAll(from, to);
  const prelude = `${blocks.get("env") ?? ""}\nexport KVC_VERSION=e2e KVC_IMAGE=docker.io/library/kube-volume-controller:e2e\n`;
  const start = performance.now();
  try {
    const { stdout } = await promisify(execFile)("bash", ["-euo", "pipefail", "-c", prelude + body], {
      cwd: root,
      env: {
        ...process.env,
        KUBECONFIG: join(STATE, "admin.kubeconfig"),
        PATH: `${kubectlDir}:${dirname(helm)}:${process.env.PATH ?? ""}`,
      },
      timeout: 600_000,
    });
    return stdout;
  } catch (err) {
    const e = err as { stdout?: string; stderr?: string; message: string };
    throw new Error(`runbook step ${name} failed: ${e.message}\n${e.stdout ?? ""}\n${e.stderr ?? ""}`, {
      cause: err,
    });
  } finally {
    times.push([name, (performance.now() - start) / 1000]);
  }
}

/** Restarts KCM with `line` and waits until its log (from the restart on) has every `expected` line. */
async function restartKcm(what: string, line: string, expected: RegExp[]): Promise<void> {
  const from = statSync(KCM_LOG).size;
  const start = performance.now();
  execFileSync(script, ["kcm-controllers", line], { stdio: "inherit" });
  await waitFor(
    () => {
      const log = readFileSync(KCM_LOG, "utf8").slice(from);
      return expected.every((re) => re.test(log));
    },
    { timeoutMs: 120_000, intervalMs: 500, what: `KCM to log ${expected.map(String).join(", ")}` },
  );
  times.push([what, (performance.now() - start) / 1000]);
}

describe("docs/operations.md's cutover runbook on the real cluster", () => {
  let cluster: ManagedProcess | undefined;
  const kc = () => loadKubeConfig(join(STATE, "admin.kubeconfig"), undefined);

  after(async () => {
    await cluster?.stop(120_000);
    assert.ok(!existsSync(STATE), `cluster.sh left ${STATE}`);
    console.log(times.map(([step, s]) => `${step.padEnd(28)} ${s.toFixed(1)} s`).join("\n"));
  });

  /** What must not change at a switch: the volumes' bindings and attachments, and the pods using them. */
  async function snapshot(): Promise<Record<string, string>> {
    const core = kc().makeApiClient(CoreV1Api);
    const storage = kc().makeApiClient(StorageV1Api);
    const out: Record<string, string> = {};
    for (const pv of (await core.listPersistentVolume()).items) {
      if (pv.spec?.claimRef?.namespace !== NS) continue;
      out[`pv/${pv.metadata?.name}`] = `${pv.spec.claimRef.uid}/${pv.status?.phase}`;
    }
    for (const va of (await storage.listVolumeAttachment()).items) {
      out[`va/${va.metadata?.name}`] = `${va.metadata?.uid}/${String(va.status?.attached)}`;
    }
    for (const node of (await core.listNode()).items) {
      const attached = (node.status?.volumesAttached ?? []).map((v) => v.name).sort();
      out[`node/${node.metadata?.name}`] = attached.join(",");
    }
    for (const pod of (await core.listNamespacedPod({ namespace: NS })).items) {
      const restarts = pod.status?.containerStatuses?.[0]?.restartCount;
      out[`pod/${pod.metadata?.name}`] = `${pod.metadata?.uid}/${pod.status?.phase}/${String(restarts)}`;
    }
    return out;
  }

  /** Each replica reads back what it wrote into its volume when it started. */
  function dataIntact(replicas: number): void {
    for (let i = 0; i < replicas; i++) {
      const who = execFileSync(
        join(kubectlDir, "kubectl"),
        ["-n", NS, "exec", `keeper-${i}`, "--", "cat", "/data/who"],
        {
          encoding: "utf8",
          env: { ...process.env, KUBECONFIG: join(STATE, "admin.kubeconfig") },
        },
      );
      assert.equal(who.trim(), `keeper-${i}`);
    }
  }

  async function keepersReady(replicas: number): Promise<void> {
    const apps = kc().makeApiClient(AppsV1Api);
    await waitFor(
      async () =>
        (await apps.readNamespacedStatefulSet({ namespace: NS, name: "keeper" })).status?.readyReplicas ===
        replicas,
      { timeoutMs: 300_000, intervalMs: 1000, what: `${replicas} keeper replicas ready` },
    );
  }

  test("the cluster comes up with KCM's loops, kvc's image imported, a StatefulSet's volumes attached", async () => {
    assert.ok(offLine && onLine, "the runbook names KCM's --controllers lines");
    cluster = new ManagedProcess(
      "cluster",
      script,
      ["up", "--impl=kcm", "--kvc-image"],
      join(logs, "cluster.log"),
    );
    const up = cluster;
    await waitFor(() => existsSync(join(STATE, "ready")), {
      timeoutMs: 900_000,
      intervalMs: 1000,
      what: `the cluster to come up (log: ${up.logFile})`,
      signal: abortedWhen(up.exited, (code) => new Error(`cluster.sh exited with ${String(code)}`)),
    }).catch((err: unknown) => {
      throw new Error(`${(err as Error).message}\n${up.logTail(60)}`, { cause: err });
    });
    const core = kc().makeApiClient(CoreV1Api);
    // The verify step's claim uses the default class, as a user's cluster has one.
    await kc()
      .makeApiClient(StorageV1Api)
      .patchStorageClass(
        {
          name: "csi-hostpath-sc",
          body: { metadata: { annotations: { "storageclass.kubernetes.io/is-default-class": "true" } } },
        },
        mergePatch,
      );
    await core.createNamespace({ body: { metadata: { name: NS } } });
    await kc()
      .makeApiClient(AppsV1Api)
      .createNamespacedStatefulSet({
        namespace: NS,
        body: {
          metadata: { name: "keeper" },
          spec: {
            serviceName: "keeper",
            replicas: 2,
            selector: { matchLabels: { app: "keeper" } },
            template: {
              metadata: { labels: { app: "keeper" } },
              spec: {
                terminationGracePeriodSeconds: 1,
                containers: [
                  {
                    name: "keeper",
                    image: BUSYBOX,
                    command: ["sh", "-c", "hostname >/data/who && exec sleep 1000000"],
                    volumeMounts: [{ name: "data", mountPath: "/data" }],
                  },
                ],
              },
            },
            volumeClaimTemplates: [
              {
                metadata: { name: "data" },
                spec: {
                  accessModes: ["ReadWriteOnce"],
                  storageClassName: "csi-hostpath-sc",
                  resources: { requests: { storage: "1Mi" } },
                },
              },
            ],
          },
        },
      });
    await keepersReady(2);
    dataIntact(2);
  });

  test("cutover: install with no replica, KCM's loops off, kvc up and verified; nothing changes", async () => {
    const before = await snapshot();
    assert.equal(Object.keys(before).filter((k) => k.startsWith("va/")).length, 2, JSON.stringify(before));
    await run("install");
    await restartKcm(
      "kcm-off (config, every node)",
      offLine ?? "",
      LOOPS.map((c) => new RegExp(`"Warning: controller is disabled" controller="${c}"`)),
    );
    assert.deepEqual(await snapshot(), before, "KCM's loops off changed nothing");
    await run("scale-up");
    assert.doesNotMatch(await run("verify-leader"), /^event/m, "no CompetingWriter event");
    await run("verify-claim");
    assert.deepEqual(await snapshot(), before, "kvc's start changed nothing");
    dataIntact(2);
  });

  test("kvc attaches a new replica's volume", async () => {
    await kc()
      .makeApiClient(AppsV1Api)
      .patchNamespacedStatefulSetScale(
        { namespace: NS, name: "keeper", body: { spec: { replicas: 3 } } },
        mergePatch,
      );
    await keepersReady(3);
    dataIntact(3);
    const vas = (await kc().makeApiClient(StorageV1Api).listVolumeAttachment()).items;
    assert.equal(vas.length, 3);
    // Who wrote each spec: KCM attached the first two replicas' volumes, kvc the new one's.
    const creators = vas
      .map(
        (va) =>
          va.metadata?.managedFields?.find(
            (f) => (f.fieldsV1 as Record<string, unknown> | undefined)?.["f:spec"],
          )?.manager,
      )
      .sort();
    assert.deepEqual(creators, [
      "kube-controller-manager",
      "kube-controller-manager",
      "kube-volume-controller",
    ]);
  });

  test("rollback: kvc to zero, KCM's loops on, KCM verified; nothing changes", async () => {
    const before = await snapshot();
    await run("rollback-kvc-off");
    await restartKcm("kcm-on (config, every node)", onLine ?? "", [
      /"Starting persistent volume controller"/,
      /"Starting attach detach controller"/,
    ]);
    await run("verify-claim", [["MANAGER=kube-volume-controller", "MANAGER=kube-controller-manager"]]);
    assert.deepEqual(await snapshot(), before, "the rollback changed nothing");
    dataIntact(3);
  });

  test("uninstall leaves nothing of kvc's, and the workload as it was", async () => {
    const before = await snapshot();
    assert.doesNotMatch(await run("uninstall"), /^clusterrole/m, "the leftover check prints nothing");
    const core = kc().makeApiClient(CoreV1Api);
    await waitFor(
      async () =>
        !(await core.listNamespace()).items.some((n) => n.metadata?.name === "kube-volume-controller"),
      { timeoutMs: 120_000, what: "kvc's namespace to be gone" },
    );
    assert.deepEqual(await snapshot(), before);
    dataIntact(3);
  });
});
