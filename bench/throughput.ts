/**
 * Binding and provisioning throughput of kvc against upstream kube-controller-manager, each on a
 * fresh embedded control plane in the same run:
 *   binding       N pre-created PV/PVC pairs, controller started, until every claim is Bound; at
 *                 KCM's default client limits (20 qps, burst 30) and unthrottled.
 *   ceiling       the same writes per pair sent by a client-go program with no controller in between
 *                 (test/control-plane/bench/ceiling: protobuf, HTTP/2), at a few concurrencies; the
 *                 best is the apiserver's ceiling on this machine.
 *   provisioning  N claims of a hostPath class (in-process provisioner), until every claim is Bound.
 * Per run: seconds from the controller's start to all Bound (and to half and 90% of them), the writes
 * the apiserver received per pair (its audit log), the controller's CPU seconds per 1,000 pairs, its
 * RSS at the end and at its peak. `--loops=binder` (default) isolates the binder on both sides;
 * `--loops=all` runs both as deployed, with all four volume loops (binder, attach/detach, PVC and PV
 * protection) and the same flags.
 * Where each binding run's time goes (issue 30 goal 4, the scale ceiling): how long creating the pairs
 * took, pairs/s to half and from half to 90%, and the CPU of the controller, the apiserver, etcd and
 * this process over the run, which names the resource that limits it; kvc's longest event-loop block
 * (KCM has none). Claims are counted Bound from a watch. `--deadline=S` (default 3600) ends a binding
 * run after S s, reporting how many were Bound: a 100,000-pair run of KCM takes hours.
 * kvc runs compiled (dist/, `npm run build`) as in the image. Prints markdown tables; asserts nothing.
 * `--repeat=N` runs each binding measurement N times, kvc and KCM alternating, and prints the median ratio.
 *   npm run bench:throughput [-- --pairs=1000 --loops=all --repeat=3 --only=unthrottled,ceiling --kvc-arg=--flag=value]
 *   npm run bench:throughput -- --pairs=100000 --loops=all --only=unthrottled --deadline=1200
 */
import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import type { V1PersistentVolumeClaim } from "@kubernetes/client-node";
import { LocalControlPlane } from "../src/controlplane/local-control-plane.js";
import { waitFor } from "../src/util/wait.js";
import { AuditLogTail, isWrite } from "../test/support/audit.js";
import { InformerFactory } from "../src/runtime/informer/index.js";
import {
  ALL_LOOPS,
  benchClients,
  cpuFromNow,
  cpuSeconds,
  createClaims,
  createPairs,
  rssMiB,
  sampleEventLoopBlock,
  startVolumeLoops,
  type Impl,
  type StartedController,
} from "./support.js";

const SECTIONS = ["throttled", "unthrottled", "ceiling", "provisioning"] as const;
type Section = (typeof SECTIONS)[number];
const { values } = parseArgs({
  options: {
    pairs: { type: "string", default: "1000" },
    only: { type: "string", default: SECTIONS.join(",") },
    "kvc-arg": { type: "string", multiple: true, default: [] },
    "ceiling-concurrency": { type: "string", default: "4,16,64" },
    loops: { type: "string", default: "binder" },
    repeat: { type: "string", default: "1" },
    deadline: { type: "string", default: "3600" },
  },
});
/** The loops both sides run: the binder alone, or all four as deployed. */
function loopsOf(name: string): string[] {
  if (name === "binder") return ["persistentvolume-binder-controller"];
  if (name === "all") return [...ALL_LOOPS];
  throw new Error(`--loops: binder or all, not ${name}`);
}
const LOOPS = loopsOf(values.loops);
const N = Number(values.pairs);
const only = new Set(values.only.split(","));
for (const s of only) if (!SECTIONS.includes(s as Section)) throw new Error(`--only: unknown section ${s}`);
const run = (s: Section) => only.has(s);
const KVC_ARGS = values["kvc-arg"];
const CEILING_CONCURRENCY = values["ceiling-concurrency"].split(",").map(Number);
// Through benchClients (one connection pool): 16 in flight created 1,300–1,500 objects/s, 64 about 1,800.
const CREATE_CONCURRENCY = 64;
const fmt = (s: number) => (Number.isFinite(s) ? s.toFixed(1) : "—");
const progress = (line: string) => process.stderr.write(`bench: ${line}\n`);
/** Binding runs per side (alternating kvc and KCM): one run's ratio varies by ±0.1 on a shared machine. */
const REPEAT = Number(values.repeat);
/** Seconds a binding run waits for all Bound; one that does not finish reports how many were. */
const DEADLINE_S = Number(values.deadline);

interface Limits {
  qps: number;
  burst: number;
}
const DEFAULT_LIMITS: Limits = { qps: 20, burst: 30 };
const UNTHROTTLED: Limits = { qps: 100_000, burst: 100_000 };

const ids = Array.from({ length: N }, (_, i) => String(i).padStart(6, "0"));

/**
 * The claims Bound so far, from a watch: listing every claim each poll (as this bench did) was, at
 * 100,000 claims, more load on the apiserver than the controller under test.
 */
async function watchBound(cp: LocalControlPlane, signal: AbortSignal): Promise<() => number> {
  const informers = new InformerFactory({ kubeConfig: cp.kubeConfig() });
  const bound = new Set<string>();
  const see = (c: V1PersistentVolumeClaim) => {
    if (c.status?.phase === "Bound") bound.add(c.metadata!.name!);
  };
  informers.persistentVolumeClaims({ namespace: "default" }).addEventHandler({
    onAdd: see,
    onUpdate: (_, c) => {
      see(c);
    },
  });
  void informers.start(signal);
  await informers.waitForCacheSync(signal);
  return () => bound.size;
}

function startController(cp: LocalControlPlane, impl: Impl, limits: Limits): Promise<StartedController> {
  return startVolumeLoops(cp, impl, { loops: LOOPS, ...limits, kvcArgs: KVC_ARGS });
}

interface Result {
  seconds: number;
  /** Claims Bound when the run ended: N, or fewer at the deadline. */
  bound: number;
  /** Seconds until the controller was ready (/readyz, or KCM's /healthz), then until the first, half and 90% of the claims were Bound. */
  ready: number;
  first: number;
  half: number;
  most: number;
  rss: number;
  peakRss: number;
  cpu: number;
  /** Writes the apiserver received after the start, by "verb resource[/subresource]". */
  writes: Map<string, number>;
  /** Seconds creating the objects, and the CPU seconds the apiserver, etcd and the bench spent on it. */
  created: number;
  createCpu: Record<string, number>;
  /** From the controller's start to all Bound: its CPU seconds (from its process start) and the others'. */
  controllerCpu: number;
  runCpu: Record<string, number>;
  /** kvc's longest event-loop block, seconds (KCM has no event loop). */
  block?: number;
}

/**
 * Counts the write requests appended to the audit log since the last call, by verb and resource; read
 * in pieces as the run goes (at 100,000 pairs the log outgrows the longest string Node can hold).
 */
function countWrites(tail: AuditLogTail, counts: Map<string, number>): void {
  for (const e of tail.next()) {
    if (!isWrite(e)) continue;
    const r = e.objectRef;
    // The apiserver's own identity lease; the TokenReview of sampleEventLoopBlock's scrape.
    if (r?.resource === "leases" || r?.resource === "tokenreviews") continue;
    const key = `${e.verb} ${r?.resource ?? "?"}${r?.subresource ? `/${r.subresource}` : ""}`;
    counts.set(key, (counts.get(key) ?? 0) + 1);
  }
}

/** Fresh control plane, objects created, controller started; seconds until all N claims are Bound. */
async function measure(impl: Impl, limits: Limits, kind: "binding" | "provisioning"): Promise<Result> {
  const cp = await LocalControlPlane.start({ audit: true });
  const stopWatch = new AbortController();
  try {
    const clients = benchClients(cp);
    const createStarted = performance.now();
    const createCpu = cpuFromNow(cp);
    if (kind === "binding") await createPairs(clients.core, ids, CREATE_CONCURRENCY);
    else {
      await clients.storage.createStorageClass({
        body: { metadata: { name: "hp" }, provisioner: "kubernetes.io/host-path" },
      });
      await createClaims(clients.core, ids, CREATE_CONCURRENCY, "hp");
    }
    const created = (performance.now() - createStarted) / 1000;
    const createdCpu = createCpu();
    progress(`${impl}: ${N} ${kind === "binding" ? "pairs" : "claims"} created in ${fmt(created)} s`);
    const boundCount = await watchBound(cp, stopWatch.signal);
    const audit = new AuditLogTail(cp.auditLogPath, { fromEnd: true });
    const writes = new Map<string, number>();
    const started = performance.now();
    const runCpu = cpuFromNow(cp);
    const controller = await startController(cp, impl, limits);
    const cpuAtStart = cpuSeconds(controller.pid);
    const loop = controller.url === undefined ? undefined : sampleEventLoopBlock(controller, cp.token);
    const at = (): number => (performance.now() - started) / 1000;
    const ready = at();
    let first = Infinity;
    let half = Infinity;
    let most = Infinity;
    try {
      await waitFor(
        () => {
          countWrites(audit, writes);
          const bound = boundCount();
          if (bound >= 1) first = Math.min(first, at());
          if (bound >= N / 2) half = Math.min(half, at());
          if (bound >= 0.9 * N) most = Math.min(most, at());
          return bound === N || at() >= DEADLINE_S;
        },
        { timeoutMs: (DEADLINE_S + 60) * 1000, intervalMs: 250, what: `${impl}: ${N} claims Bound` },
      );
      const seconds = at();
      const bound = boundCount();
      const cpu = cpuSeconds(controller.pid) - cpuAtStart;
      const controllerCpu = cpuSeconds(controller.pid);
      const others = runCpu();
      const block = await loop?.stop();
      countWrites(audit, writes);
      progress(`${impl}: ${bound} of ${N} Bound in ${fmt(seconds)} s`);
      return {
        seconds,
        bound,
        ready,
        first,
        half,
        most,
        cpu,
        rss: rssMiB(controller.pid),
        peakRss: rssMiB(controller.pid, "peak"),
        writes,
        created,
        createCpu: createdCpu,
        controllerCpu,
        runCpu: others,
        ...(block !== undefined && { block }),
      };
    } finally {
      await controller.stop();
    }
  } finally {
    stopWatch.abort();
    await cp.stop();
  }
}

interface CeilingReport {
  concurrency: number;
  seconds: number;
  writes: number;
  cpuSeconds: number;
}

/** The client-go ceiling program, built once with the control-plane module's pinned go.mod (read-only). */
function buildCeiling(): string {
  const work = mkdtempSync(join(tmpdir(), "kvc-bench-ceiling-"));
  process.on("exit", () => {
    rmSync(work, { recursive: true, force: true });
  });
  const binary = join(work, "ceiling");
  execFileSync("go", ["build", "-mod=readonly", "-o", binary, "./bench/ceiling"], {
    cwd: fileURLToPath(new URL("../test/control-plane", import.meta.url)),
    stdio: ["ignore", "inherit", "inherit"],
    env: { ...process.env, CGO_ENABLED: "0" },
  });
  return binary;
}

/** The ceiling at one concurrency, on a fresh control plane with the pairs pre-created. */
async function ceiling(binary: string, concurrency: number): Promise<CeilingReport> {
  const cp = await LocalControlPlane.start();
  try {
    await createPairs(benchClients(cp).core, ids, CREATE_CONCURRENCY);
    const out = execFileSync(binary, [`-kubeconfig=${cp.kubeconfigPath}`, `-concurrency=${concurrency}`]);
    return JSON.parse(out.toString()) as CeilingReport;
  } finally {
    await cp.stop();
  }
}

const perPair = (writes: Map<string, number>) => [...writes.values()].reduce((a, b) => a + b, 0) / N;
const breakdown = (writes: Map<string, number>) =>
  [...writes]
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([k, v]) => `${k} ${v}`)
    .join(", ");
/** Seconds to all Bound, or past the deadline how many were. */
const took = (r: Result) => (r.bound === N ? fmt(r.seconds) : `>${fmt(r.seconds)} (${r.bound} Bound)`);
/** kvc's time over KCM's: a bound when either missed the deadline. */
const ratio = (a: Result, b: Result) =>
  `${a.bound < N ? ">" : b.bound < N ? "<" : ""}${(a.seconds / b.seconds).toFixed(2)}`;
const rate = (pairs: number, s: number) => (Number.isFinite(s) ? (pairs / s).toFixed(0) : "—");
const milestones = (r: Result) => [r.ready, r.first, r.half, r.most].map(fmt).join("/");
const per1000 = (cpu: number) => ((cpu * 1000) / N).toFixed(1);

const binding = new Map<string, Result>();
const limitsRuns = [
  ...(run("throttled") ? [["20 qps / 30 burst", DEFAULT_LIMITS] as const] : []),
  ...(run("unthrottled") ? [["unthrottled", UNTHROTTLED] as const] : []),
].flatMap(([label, limits]) =>
  Array.from({ length: REPEAT }, (_, i) => [REPEAT > 1 ? `${label} #${i + 1}` : label, limits] as const),
);
for (const [label, limits] of limitsRuns) {
  binding.set(`kvc ${label}`, await measure("kvc", limits, "binding"));
  binding.set(`kcm ${label}`, await measure("kcm", limits, "binding"));
}
const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return (s[(s.length - 1) >> 1]! + s[s.length >> 1]!) / 2;
};
let best: CeilingReport | undefined;
const ceilings: CeilingReport[] = [];
if (run("ceiling")) {
  const binary = buildCeiling();
  for (const c of CEILING_CONCURRENCY) ceilings.push(await ceiling(binary, c));
  best = ceilings.reduce((a, b) => (b.seconds < a.seconds ? b : a));
}

if (limitsRuns.length > 0) {
  console.log(
    `\nBinding ${N} pre-created PV/PVC pairs (from controller start to all Bound), loops: ${values.loops}${KVC_ARGS.length ? `, kvc ${KVC_ARGS.join(" ")}` : ""}\n`,
  );
  console.log(
    "| client limits | kvc s | KCM s | kvc/KCM | kvc/ceiling | KCM/ceiling | kvc ready/first/50%/90% s | KCM ready/first/50%/90% s | kvc writes/pair | KCM writes/pair | kvc CPU s/1k | KCM CPU s/1k | kvc RSS MiB (peak) | KCM RSS MiB (peak) |",
  );
  console.log(
    "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
  );
  for (const [label] of limitsRuns) {
    const a = binding.get(`kvc ${label}`)!;
    const b = binding.get(`kcm ${label}`)!;
    const vsCeiling = (s: number) => (best ? (s / best.seconds).toFixed(2) : "");
    console.log(
      `| ${label} | ${took(a)} | ${took(b)} | ${ratio(a, b)} | ${vsCeiling(a.seconds)} | ${vsCeiling(b.seconds)} | ${milestones(a)} | ${milestones(b)} | ${perPair(a.writes).toFixed(2)} | ${perPair(b.writes).toFixed(2)} | ${per1000(a.cpu)} | ${per1000(b.cpu)} | ${a.rss.toFixed(0)} (${a.peakRss.toFixed(0)}) | ${b.rss.toFixed(0)} (${b.peakRss.toFixed(0)}) |`,
    );
  }
  if (REPEAT > 1) {
    for (const [label] of limitsRuns.filter(([l]) => l.endsWith("#1"))) {
      const base = label.slice(0, -" #1".length);
      const ratios = limitsRuns
        .filter(([l]) => l.startsWith(`${base} #`))
        .map(([l]) => binding.get(`kvc ${l}`)!.seconds / binding.get(`kcm ${l}`)!.seconds);
      console.log(`| ${base}: median of ${REPEAT} | | | ${median(ratios).toFixed(2)} | | | | | | | | | | |`);
    }
  }
  console.log(
    "\nWhere the time goes: creating the pairs (cores busy: apiserver/etcd/bench), then from the controller's start to all Bound\n",
  );
  console.log(
    "| run | created s (cores) | Bound s | pairs/s to 50% / 50–90% / overall (from ready) | controller CPU s (cores) | apiserver CPU s (cores) | etcd CPU s (cores) | bench cores | longest event-loop block s |",
  );
  console.log("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
  for (const [label] of limitsRuns) {
    for (const impl of ["kvc", "kcm"]) {
      const r = binding.get(`${impl} ${label}`)!;
      const cores = (cpu: number, s: number) => `${fmt(cpu)} (${(cpu / s).toFixed(2)})`;
      const c = r.createCpu;
      console.log(
        `| ${impl} ${label} | ${fmt(r.created)} (${[c.apiserver!, c.etcd!, c.bench!].map((x) => (x / r.created).toFixed(2)).join("/")}) | ${took(r)} | ${rate(N / 2, r.half - r.ready)} / ${rate(0.4 * N, r.most - r.half)} / ${rate(r.bound, r.seconds - r.ready)} | ${cores(r.controllerCpu, r.seconds)} | ${cores(r.runCpu.apiserver!, r.seconds)} | ${cores(r.runCpu.etcd!, r.seconds)} | ${(r.runCpu.bench! / r.seconds).toFixed(2)} | ${r.block === undefined ? "n/a" : r.block.toFixed(2)} |`,
      );
    }
  }
  for (const [label] of limitsRuns) {
    for (const impl of ["kvc", "kcm"]) {
      console.log(`\n${impl} ${label} writes: ${breakdown(binding.get(`${impl} ${label}`)!.writes)}`);
    }
  }
}
if (best) {
  console.log(`\nCeiling: client-go, protobuf, the binder's writes per pair, ${N} pairs\n`);
  console.log("| concurrency | s | pairs/s | writes/pair | CPU s/1k |");
  console.log("| ---: | ---: | ---: | ---: | ---: |");
  for (const c of ceilings) {
    console.log(
      `| ${c.concurrency} | ${fmt(c.seconds)} | ${(N / c.seconds).toFixed(0)} | ${(c.writes / N).toFixed(2)} | ${per1000(c.cpuSeconds)} |`,
    );
  }
}

if (run("provisioning")) {
  const kvc = await measure("kvc", UNTHROTTLED, "provisioning");
  const kcm = await measure("kcm", UNTHROTTLED, "provisioning");
  console.log(`\nProvisioning ${N} hostPath claims, unthrottled\n`);
  console.log("| controller | s | 50%/90% s | writes/claim | CPU s/1k |");
  console.log("| --- | ---: | ---: | ---: | ---: |");
  for (const [name, r] of [
    ["kvc", kvc],
    ["kube-controller-manager", kcm],
  ] as const) {
    console.log(
      `| ${name} | ${fmt(r.seconds)} | ${fmt(r.half)}/${fmt(r.most)} | ${perPair(r.writes).toFixed(2)} | ${per1000(r.cpu)} |`,
    );
  }
  console.log(`| kvc / KCM time | ${(kvc.seconds / kcm.seconds).toFixed(2)} | | | |`);
  console.log(`\nkvc writes: ${breakdown(kvc.writes)}\nKCM writes: ${breakdown(kcm.writes)}`);
}
