import { generateKeyPairSync, randomBytes } from "node:crypto";
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { KubeConfig } from "@kubernetes/client-node";
import { buildControlPlane, ensureBinaries, type Binaries } from "./binaries.js";
import { probe } from "./https-probe.js";
import { freePort } from "./ports.js";
import { ManagedProcess, onProcessExit } from "./process.js";
import { abortedWhen, waitFor } from "../util/wait.js";

const DIR_PREFIX = "kvc-cp-";
const READY_TIMEOUT_MS = 120_000;

export interface ControlPlaneOptions {
  binaries?: Binaries;
  /** Build progress and start-up steps, for people watching. */
  onProgress?: (line: string) => void;
  /** Extra kube-apiserver flags, appended after ours (later flags win). */
  apiserverArgs?: readonly string[];
  /**
   * Have the apiserver write an audit log (JSON lines at `auditLogPath`): every request but get, list
   * and watch, at Metadata level (user, userAgent, verb, object, response code, timestamps), once
   * answered. Tests ask it who wrote what (test/support/audit.ts).
   */
  audit?: boolean;
}

export interface KubeControllerManagerOptions {
  /** KCM's --controllers list, e.g. ["persistentvolume-binder-controller"]. */
  controllers: readonly string[];
  qps?: number;
  burst?: number;
  /** Extra flags, appended after ours. */
  args?: readonly string[];
  /** --secure-port; default: a free one. */
  securePort?: number;
}

/** How long each part took to become ready, in milliseconds. */
export interface StartupTimes {
  etcdMs: number;
  apiserverMs: number;
}

/**
 * A real etcd + kube-apiserver on free loopback ports in a private temporary directory, with a
 * self-signed serving certificate, an EC service-account key, an admin token and RBAC. It can restart
 * the apiserver on the same etcd and start upstream kube-controller-manager beside it. stop() (or this
 * process exiting or being interrupted) removes every process and file it made.
 */
export class LocalControlPlane {
  readonly #kcms = new Set<ManagedProcess>();
  #apiserver: ManagedProcess | undefined;
  #etcd: ManagedProcess;
  #stopped = false;

  private constructor(
    readonly binaries: Binaries,
    readonly dir: string,
    readonly token: string,
    readonly apiserverPort: number,
    readonly etcdPort: number,
    readonly etcdPeerPort: number,
    etcd: ManagedProcess,
    readonly startup: StartupTimes,
    readonly apiserverArgs: readonly string[],
    private readonly removeDirAtExit: () => void,
  ) {
    this.#etcd = etcd;
  }

  static async start(opts: ControlPlaneOptions = {}): Promise<LocalControlPlane> {
    const progress = opts.onProgress ?? (() => {});
    const binaries = opts.binaries ?? (await ensureBinaries(progress));
    removeStaleDirs();
    const dir = mkdtempSync(join(tmpdir(), `${DIR_PREFIX}${process.pid}-`));
    const removeDirAtExit = onProcessExit(() => {
      rmSync(dir, { recursive: true, force: true });
    });
    let etcd: ManagedProcess | undefined;
    let cp: LocalControlPlane | undefined;
    try {
      for (const sub of ["logs", "certs", "etcd"]) mkdirSync(join(dir, sub));
      const token = randomBytes(24).toString("hex");
      writeFileSync(join(dir, "tokens.csv"), `${token},admin,admin-uid,"system:masters"\n`, { mode: 0o600 });
      const { privateKey } = generateKeyPairSync("ec", {
        namedCurve: "prime256v1",
        privateKeyEncoding: { type: "sec1", format: "pem" },
        publicKeyEncoding: { type: "spki", format: "pem" },
      });
      writeFileSync(join(dir, "sa.key"), privateKey, { mode: 0o600 });

      const [etcdPort, peerPort, apiserverPort] = await distinctFreePorts();
      progress(`starting etcd on 127.0.0.1:${etcdPort}`);
      let t0 = performance.now();
      etcd = new ManagedProcess(
        "etcd",
        binaries.etcd,
        etcdArgs(dir, etcdPort, peerPort),
        join(dir, "logs", "etcd.log"),
      );
      await waitEtcdReady(etcd, etcdPort);
      const startup = { etcdMs: performance.now() - t0, apiserverMs: 0 };

      const args = [
        ...apiserverFlags(dir, etcdPort, apiserverPort),
        ...(opts.audit ? auditFlags(dir) : []),
        ...(opts.apiserverArgs ?? []),
      ];
      cp = new LocalControlPlane(
        binaries,
        dir,
        token,
        apiserverPort,
        etcdPort,
        peerPort,
        etcd,
        startup,
        args,
        removeDirAtExit,
      );
      progress(`starting kube-apiserver on 127.0.0.1:${apiserverPort}`);
      t0 = performance.now();
      await cp.#startApiServer();
      startup.apiserverMs = performance.now() - t0;
      cp.#writeKubeconfig();
      return cp;
    } catch (err) {
      if (cp) await cp.stop();
      else {
        await etcd?.stop();
        rmSync(dir, { recursive: true, force: true });
        removeDirAtExit();
      }
      throw err;
    }
  }

  get server(): string {
    return `https://127.0.0.1:${this.apiserverPort}`;
  }

  /** The apiserver's self-signed serving certificate and its CA (written by the apiserver). */
  get caFile(): string {
    return join(this.dir, "certs", "apiserver.crt");
  }

  /** The apiserver's audit log, when started with `audit` (it survives restartApiServer: appended). */
  get auditLogPath(): string {
    return join(this.dir, "logs", "audit.log");
  }

  /** An admin kubeconfig usable by client-node, kubectl and kube-controller-manager alike. */
  get kubeconfigPath(): string {
    return join(this.dir, "kubeconfig");
  }

  kubeConfig(): KubeConfig {
    const kc = new KubeConfig();
    kc.loadFromFile(this.kubeconfigPath);
    return kc;
  }

  /** Stops the apiserver process and starts a new one on the same etcd, port and certificate. */
  async restartApiServer(): Promise<void> {
    await this.#apiserver?.stop();
    await this.#startApiServer();
  }

  /** The apiserver process (a new one after restartApiServer). */
  get apiserver(): ManagedProcess | undefined {
    return this.#apiserver;
  }

  /** The etcd process (a new one after restartEtcd). */
  get etcd(): ManagedProcess {
    return this.#etcd;
  }

  /**
   * Stops etcd and starts a new one on the same data directory and ports: the apiserver keeps
   * running, its requests fail until etcd is back, and its watches are cut (chaos tests).
   */
  async restartEtcd(): Promise<void> {
    await this.#etcd.stop();
    this.#etcd = new ManagedProcess(
      "etcd",
      this.binaries.etcd,
      etcdArgs(this.dir, this.etcdPort, this.etcdPeerPort),
      join(this.dir, "logs", "etcd.log"),
    );
    await waitEtcdReady(this.#etcd, this.etcdPort);
  }

  /**
   * Starts upstream kube-controller-manager against this apiserver and waits for its /healthz. It is
   * built here, on first use, so that a control plane without it never waits for its build.
   */
  async startKubeControllerManager(opts: KubeControllerManagerOptions): Promise<ManagedProcess> {
    const binary = join(await buildControlPlane(["kube-controller-manager"]), "kube-controller-manager");
    const port = opts.securePort ?? (await freePort());
    const n = this.#kcms.size + 1;
    const certDir = join(this.dir, `kcm-${n}-certs`);
    mkdirSync(certDir, { recursive: true });
    const args = [
      `--kubeconfig=${this.kubeconfigPath}`,
      "--leader-elect=false",
      `--controllers=${opts.controllers.join(",")}`,
      `--kube-api-qps=${opts.qps ?? 20}`,
      `--kube-api-burst=${opts.burst ?? 30}`,
      "--bind-address=127.0.0.1",
      `--secure-port=${port}`,
      `--cert-dir=${certDir}`,
      ...(opts.args ?? []),
    ];
    const kcm = new ManagedProcess(
      "kube-controller-manager",
      binary,
      args,
      join(this.dir, "logs", `kube-controller-manager-${n}.log`),
    );
    this.#kcms.add(kcm);
    void kcm.exited.then(() => this.#kcms.delete(kcm));
    await waitReady(kcm, async () => (await probe(`https://127.0.0.1:${port}/healthz`)).status === 200);
    return kcm;
  }

  /** Stops everything this control plane started and removes its directory. Safe to call twice. */
  async stop(): Promise<void> {
    if (this.#stopped) return;
    this.#stopped = true;
    await Promise.all([...this.#kcms].map((k) => k.stop()));
    await this.#apiserver?.stop();
    await this.#etcd.stop();
    rmSync(this.dir, { recursive: true, force: true });
    this.removeDirAtExit();
  }

  async #startApiServer(): Promise<void> {
    const apiserver = new ManagedProcess(
      "kube-apiserver",
      this.binaries.kubeApiserver,
      this.apiserverArgs,
      join(this.dir, "logs", "kube-apiserver.log"),
    );
    this.#apiserver = apiserver;
    await waitReady(apiserver, async () => {
      if (!existsSync(this.caFile)) return false;
      const res = await probe(`${this.server}/readyz`, {
        ca: readFileSync(this.caFile, "utf8"),
        token: this.token,
      });
      return res.status === 200;
    });
  }

  #writeKubeconfig(): void {
    // JSON is valid YAML, and every kubeconfig reader (client-node, client-go) accepts it.
    const config = {
      apiVersion: "v1",
      kind: "Config",
      clusters: [{ name: "local", cluster: { server: this.server, "certificate-authority": this.caFile } }],
      users: [{ name: "admin", user: { token: this.token } }],
      contexts: [{ name: "local", context: { cluster: "local", user: "admin" } }],
      "current-context": "local",
    };
    writeFileSync(this.kubeconfigPath, JSON.stringify(config, null, 2) + "\n", { mode: 0o600 });
  }
}

function etcdArgs(dir: string, clientPort: number, peerPort: number): string[] {
  const client = `http://127.0.0.1:${clientPort}`;
  const peer = `http://127.0.0.1:${peerPort}`;
  return [
    `--data-dir=${join(dir, "etcd")}`,
    `--listen-client-urls=${client}`,
    `--advertise-client-urls=${client}`,
    `--listen-peer-urls=${peer}`,
    `--initial-advertise-peer-urls=${peer}`,
    `--initial-cluster=default=${peer}`,
    "--unsafe-no-fsync",
    "--log-level=warn",
  ];
}

function apiserverFlags(dir: string, etcdPort: number, port: number): string[] {
  return [
    `--etcd-servers=http://127.0.0.1:${etcdPort}`,
    "--bind-address=127.0.0.1",
    `--secure-port=${port}`,
    "--advertise-address=127.0.0.1",
    "--endpoint-reconciler-type=none",
    `--cert-dir=${join(dir, "certs")}`,
    `--token-auth-file=${join(dir, "tokens.csv")}`,
    "--authorization-mode=RBAC",
    "--service-account-issuer=https://kubernetes.default.svc",
    `--service-account-key-file=${join(dir, "sa.key")}`,
    `--service-account-signing-key-file=${join(dir, "sa.key")}`,
    "--service-cluster-ip-range=10.0.0.0/24",
    "--disable-admission-plugins=ServiceAccount",
    "--allow-privileged=true",
  ];
}

/** Writes only (reads are most of the traffic and say nothing about who acted), at Metadata level. */
const AUDIT_POLICY = {
  apiVersion: "audit.k8s.io/v1",
  kind: "Policy",
  omitStages: ["RequestReceived"],
  rules: [{ level: "None", verbs: ["get", "list", "watch"] }, { level: "Metadata" }],
};

function auditFlags(dir: string): string[] {
  const policy = join(dir, "audit-policy.json");
  writeFileSync(policy, JSON.stringify(AUDIT_POLICY));
  return [
    `--audit-policy-file=${policy}`,
    `--audit-log-path=${join(dir, "logs", "audit.log")}`,
    "--audit-log-format=json",
    // Each event is written before the response is sent: a test that saw the answer finds the entry.
    "--audit-log-mode=blocking",
    // Never rotated (0 means lumberjack's 100 MB): AuditLogTail reads one file, and a 100,000-pair
    // benchmark writes about 1 GB.
    "--audit-log-maxsize=1000000",
  ];
}

async function waitEtcdReady(etcd: ManagedProcess, port: number): Promise<void> {
  await waitReady(etcd, async () => (await probe(`http://127.0.0.1:${port}/health`)).status === 200);
}

/** Polls `ready` until it passes; fails at once if the process exits first. */
async function waitReady(proc: ManagedProcess, ready: () => Promise<boolean>): Promise<void> {
  const exited = abortedWhen(
    proc.exited,
    (code) => new Error(`${proc.name} exited with code ${String(code)} before it was ready`),
  );
  try {
    await waitFor(ready, {
      timeoutMs: READY_TIMEOUT_MS,
      intervalMs: 100,
      what: `${proc.name} to become ready`,
      signal: exited,
    });
  } catch (err) {
    proc.killNow();
    const msg = err instanceof Error ? err.message : String(err);
    throw new Error(`${msg}\n--- last lines of ${proc.logFile} ---\n${proc.logTail()}`, { cause: err });
  }
}

async function distinctFreePorts(): Promise<[number, number, number]> {
  const ports = new Set<number>();
  while (ports.size < 3) ports.add(await freePort());
  const [a = 0, b = 0, c = 0] = ports;
  return [a, b, c];
}

/** Removes directories left by control planes whose owning process was killed outright. */
function removeStaleDirs(): void {
  for (const name of readdirSync(tmpdir())) {
    const pid = Number(/^kvc-cp-(\d+)-/.exec(name)?.[1]);
    if (pid && pid !== process.pid && !alive(pid))
      rmSync(join(tmpdir(), name), { recursive: true, force: true });
  }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "EPERM";
  }
}
