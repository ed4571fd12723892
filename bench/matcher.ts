/**
 * Claim-matching benchmark on 1k, 10k and 100k Available PVs with realistic spreads: VolumeIndex
 * against upstream's own FindMatchingVolume (Go, k8s.io/component-helpers at the pinned release,
 * called through the controller's access-mode index: test/control-plane/bench/matcher) on the same
 * data set, and against our linear TypeScript port of it (the unit tests' oracle). Prints a markdown
 * table; asserts nothing. Needs Go (the module's dependencies come from the control-plane build).
 *
 * Then the goal mode (issue 30 goal 3): 1,000,000 PVs of a large cluster's mix (bench/matcher-mix.ts:
 * every phase, classes with WaitForFirstConsumer and node affinity, selectors, pre-bound volumes):
 * the index's build time, findBestMatch p50/p99/max over many claims of the same mix, heap and RSS
 * per PV, and the linear port on a sample of the claims (every answer must be the same PV).
 *   npm run bench:matcher [-- --quick] [-- --only=compare|goal] [-- --goal-pvs=1000000]
 * --quick: 1k and 10k PVs, and the goal mode at 20,000 PVs (CI-sized).
 */
import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import type { V1PersistentVolume, V1PersistentVolumeClaim } from "@kubernetes/client-node";
import { VolumeIndex } from "../src/persistentvolume/volume-index.js";
import { bucketByAccessModes, findBestMatchLinear } from "../test/unit/matcher-reference.js";
import { mulberry32, weightedPick } from "../test/support/random.js";
import { goalMix, WAIT_FOR_FIRST_CONSUMER_CLASS } from "./matcher-mix.js";
import { checkNodeAffinity } from "../src/persistentvolume/pv-helpers.js";

const { values: args } = parseArgs({
  options: {
    quick: { type: "boolean", default: false },
    only: { type: "string" },
    "goal-pvs": { type: "string" },
    "goal-claims": { type: "string" },
    "goal-sample": { type: "string" },
  },
});
if (args.only !== undefined && args.only !== "compare" && args.only !== "goal") {
  throw new Error(`--only: compare or goal, not ${args.only}`);
}
const SIZES = args.quick ? [1_000, 10_000] : [1_000, 10_000, 100_000];
const GOAL_PVS = Number(args["goal-pvs"] ?? (args.quick ? 20_000 : 1_000_000));
const GOAL_CLAIMS = Number(args["goal-claims"] ?? (args.quick ? 10_000 : 100_000));
/** The linear port scans every PV: at 1M PVs, about a second a claim on a loaded machine. */
const GOAL_SAMPLE = Number(args["goal-sample"] ?? (args.quick ? 200 : 100));
const INDEX_LOOKUPS = 20_000;
/** The linear matchers scan every PV, so they get a fixed time budget's worth of lookups. */
const LINEAR_LOOKUPS = (pvs: number): number => Math.max(50, Math.min(2_000, 2e7 / pvs));

// Deterministic runs.
let random = mulberry32(42);
function oneOf<T>(values: readonly T[]): T {
  return values[Math.floor(random() * values.length)]!;
}
function pick<T>(weighted: readonly (readonly [T, number])[]): T {
  return weightedPick(random, weighted);
}

const CLASSES = [
  ["standard", 5],
  ["fast", 3],
  ["archive", 1],
  ["local", 1],
] as const;
const RWO = "ReadWriteOnce";
const MODES: readonly (readonly [readonly string[], number])[] = [
  [[RWO], 5],
  [[RWO, "ReadOnlyMany"], 2.5],
  [["ReadWriteMany"], 1],
  [[RWO, "ReadOnlyMany", "ReadWriteMany"], 1],
  [["ReadWriteOncePod"], 0.5],
];
const COMMON_GI = [8, 10, 20, 50, 100, 500];

/** 1Gi–1Ti log-uniform in whole Gi (so many equal sizes), a third snapped to common sizes. */
function sizeGi(): number {
  if (random() < 0.3) return oneOf(COMMON_GI);
  return Math.max(1, Math.round(2 ** (random() * 10)));
}

function makeVolume(i: number): V1PersistentVolume {
  const labels: Record<string, string> = {};
  if (random() < 0.3) labels.zone = oneOf(["a", "b", "c"]);
  if (random() < 0.1) labels.tier = "gold";
  return {
    metadata: { name: `pv-${String(i).padStart(6, "0")}`, labels },
    spec: {
      capacity: { storage: `${sizeGi()}Gi` },
      accessModes: [...pick(MODES)],
      storageClassName: pick(CLASSES),
      volumeMode: random() < 0.9 ? "Filesystem" : "Block",
      persistentVolumeReclaimPolicy: "Retain",
    },
    status: { phase: "Available" },
  };
}

function makeClaim(i: number): V1PersistentVolumeClaim {
  const claim: V1PersistentVolumeClaim = {
    metadata: { name: `claim-${i}`, namespace: "bench", uid: `uid-${i}` },
    spec: {
      accessModes: [
        pick<string>([
          [RWO, 6],
          ["ReadOnlyMany", 1],
          ["ReadWriteMany", 2],
          ["ReadWriteOncePod", 1],
        ]),
      ],
      resources: { requests: { storage: random() < 0.02 ? "2Ti" : `${sizeGi()}Gi` } },
      storageClassName: pick(CLASSES),
      volumeMode: random() < 0.9 ? "Filesystem" : "Block",
    },
  };
  const r = random();
  if (r < 0.15) claim.spec!.selector = { matchLabels: { zone: "a" } };
  else if (r < 0.2)
    claim.spec!.selector = { matchExpressions: [{ key: "tier", operator: "In", values: ["gold"] }] };
  return claim;
}

// npm run bench:matcher passes --expose-gc; under plain tsx, expose it late.
if (typeof globalThis.gc !== "function") setFlagsFromString("--expose-gc");
const gc = (globalThis.gc ?? runInNewContext("gc")) as () => void;
function heapMB(): number {
  gc();
  return process.memoryUsage().heapUsed / 2 ** 20;
}

const work = mkdtempSync(join(tmpdir(), "kvc-bench-matcher-"));
process.on("exit", () => {
  rmSync(work, { recursive: true, force: true });
});
const controlPlaneModule = fileURLToPath(new URL("../test/control-plane", import.meta.url));
const goMatcher = join(work, "matcher");
/** Built once with the control-plane module's pinned go.mod (read-only: the build stamp hashes it). */
function buildGoMatcher(): void {
  execFileSync("go", ["build", "-mod=readonly", "-o", goMatcher, "./bench/matcher"], {
    cwd: controlPlaneModule,
    stdio: ["ignore", "inherit", "inherit"],
    env: { ...process.env, CGO_ENABLED: "0" },
  });
}

/** What test/control-plane/bench/matcher prints. */
interface GoReport {
  goVersion: string;
  buildMs: number;
  heapMB: number;
  totalMs: number;
  micros: number[];
  results: string[];
}

function runGoMatcher(
  volumes: readonly V1PersistentVolume[],
  claims: readonly V1PersistentVolumeClaim[],
  lookups: number,
): GoReport {
  const file = join(work, "dataset.json");
  writeFileSync(file, JSON.stringify({ volumes, claims, warmup: Math.min(lookups, 200), lookups }));
  return JSON.parse(execFileSync(goMatcher, [file], { maxBuffer: 1 << 28 }).toString()) as GoReport;
}

/**
 * Same answer, or an equally good one: upstream returns the first smallest fit in the indexer's
 * (map) order, VolumeIndex the first by name, so a different PV of the same size is a tie, not a
 * disagreement.
 */
function sameOrTie(a: V1PersistentVolume | undefined, b: V1PersistentVolume | undefined): boolean {
  if (!a || !b) return a === b;
  return a === b || a.spec?.capacity?.storage === b.spec?.capacity?.storage;
}

interface Row {
  impl: string;
  pvs: number;
  buildMs: number;
  heapMB: number;
  lookups: number;
  perSecond: number;
  p50: number;
  p99: number;
  mean: number;
  matched: number;
  agree?: string;
}

function timeLookups(
  claims: readonly V1PersistentVolumeClaim[],
  find: (claim: V1PersistentVolumeClaim) => V1PersistentVolume | undefined,
): { micros: number[]; totalMs: number; results: (V1PersistentVolume | undefined)[] } {
  for (const claim of claims.slice(0, 5_000)) find(claim); // let the JIT reach its optimizing tiers first
  const micros: number[] = [];
  const results: (V1PersistentVolume | undefined)[] = [];
  const start = performance.now();
  for (const claim of claims) {
    const t = process.hrtime.bigint();
    results.push(find(claim));
    micros.push(Number(process.hrtime.bigint() - t) / 1000);
  }
  return { micros, totalMs: performance.now() - start, results };
}

function percentile(sorted: readonly number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? NaN;
}

function row(
  impl: string,
  pvs: number,
  buildMs: number,
  heap: number,
  timed: ReturnType<typeof timeLookups>,
): Row {
  const sorted = [...timed.micros].sort((a, b) => a - b);
  return {
    impl,
    pvs,
    buildMs,
    heapMB: heap,
    lookups: sorted.length,
    perSecond: (sorted.length / timed.totalMs) * 1000,
    p50: percentile(sorted, 50),
    p99: percentile(sorted, 99),
    mean: timed.micros.reduce((a, b) => a + b, 0) / sorted.length,
    matched: timed.results.filter(Boolean).length / sorted.length,
  };
}

const OURS = "VolumeIndex";
const LINEAR = "linear port (TypeScript)";
const UPSTREAM = "FindMatchingVolume (Go, upstream)";
/** VolumeIndex, the linear port and upstream's Go matcher on 1k, 10k, 100k Available PVs. */
function compare(): void {
  buildGoMatcher();
  let goVersion = "";
  const rows: Row[] = [];
  for (const n of SIZES) {
    random = mulberry32(n);
    const volumes = Array.from({ length: n }, (_, i) => makeVolume(i));
    const claims = Array.from({ length: INDEX_LOOKUPS }, (_, i) => makeClaim(i));

    let before = heapMB();
    let start = performance.now();
    const index = new VolumeIndex();
    for (const pv of volumes) index.add(pv);
    const indexBuild = performance.now() - start;
    const indexHeap = heapMB() - before;
    const indexed = timeLookups(claims, (claim) => index.findBestMatch(claim, false).volume);
    rows.push(row(OURS, n, indexBuild, indexHeap, indexed));

    before = heapMB();
    start = performance.now();
    const buckets = bucketByAccessModes(volumes); // names ascending: the same tie rule
    const linearBuild = performance.now() - start;
    const linearHeap = heapMB() - before;
    const sample = claims.slice(0, LINEAR_LOOKUPS(n));
    const linear = timeLookups(sample, (claim) => findBestMatchLinear(claim, buckets, false).volume);
    const same = sample.filter((_, i) => linear.results[i] === indexed.results[i]).length;
    rows.push({
      ...row(LINEAR, n, linearBuild, linearHeap, linear),
      agree: `${same}/${sample.length}`,
    });

    const go = runGoMatcher(volumes, sample, sample.length);
    const byName = new Map(volumes.map((pv) => [pv.metadata!.name!, pv]));
    const goResults = go.results.map((name) => (name ? byName.get(name) : undefined));
    const goSame = sample.filter((_, i) => sameOrTie(goResults[i], indexed.results[i])).length;
    rows.push({
      ...row(UPSTREAM, n, go.buildMs, go.heapMB, {
        micros: go.micros,
        totalMs: go.totalMs,
        results: goResults,
      }),
      agree: `${goSame}/${sample.length}`,
    });
    goVersion = go.goVersion;
  }

  const base = new Map(rows.filter((r) => r.pvs === SIZES[0]).map((r) => [r.impl, r.mean]));
  const fmt = (x: number, digits = 1): string => x.toFixed(digits);
  console.log(
    `Node ${process.version}, ${goVersion}; all PVs Available; lookups are random claims (about 20% with a ` +
      "selector); same answer: the same PV as VolumeIndex (for upstream: or one of the same size).\n",
  );
  console.log(
    "| matcher | PVs | build ms | index heap MB | lookups | lookups/s | µs p50 | µs p99 | µs mean | growth vs 1k | matched | same answer |",
  );
  console.log("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
  for (const r of rows) {
    const growth = r.mean / (base.get(r.impl) ?? r.mean);
    console.log(
      `| ${r.impl} | ${r.pvs.toLocaleString("en")} | ${fmt(r.buildMs)} | ${fmt(r.heapMB)} | ${r.lookups} | ` +
        `${Math.round(r.perSecond).toLocaleString("en")} | ${fmt(r.p50, 2)} | ${fmt(r.p99, 2)} | ${fmt(r.mean, 2)} | ` +
        `${fmt(growth, 2)}× | ${fmt(r.matched * 100, 0)}% | ${r.agree ?? ""} |`,
    );
  }
  const ratios = SIZES.map((n) => {
    const mean = (impl: string) => rows.find((r) => r.impl === impl && r.pvs === n)?.mean ?? NaN;
    return `${n.toLocaleString("en")} PVs: ${fmt(mean(UPSTREAM) / mean(OURS), 0)}× (linear port ${fmt(mean(LINEAR) / mean(OURS), 0)}×)`;
  });
  console.log(
    `\nVolumeIndex speed-up over upstream's FindMatchingVolume (mean µs per lookup) — ${ratios.join(", ")}`,
  );
}

function rssMB(): number {
  gc();
  return process.memoryUsage().rss / 2 ** 20;
}

/**
 * Issue 30 goal 3: findBestMatch p99 ≤ 20 µs with 1,000,000 PVs indexed, build ≤ 5 s, the index's
 * memory per PV. The claims' WaitForFirstConsumer ones match with delayBinding, as the binder does.
 */
function goal(): void {
  const n = GOAL_PVS;
  const mix = goalMix(n, GOAL_CLAIMS, 30);
  const delay = (claim: V1PersistentVolumeClaim): boolean =>
    claim.spec?.storageClassName === WAIT_FOR_FIRST_CONSUMER_CLASS;
  // The scheduler's choices: every PV pre-bound to a local claim admits the node it chose.
  const claimsByKey = new Map(mix.claims.map((c) => [`${c.metadata!.namespace}/${c.metadata!.name}`, c]));
  for (const pv of mix.volumes) {
    const ref = pv.spec?.claimRef;
    const claim = ref && claimsByKey.get(`${ref.namespace}/${ref.name}`);
    const node = claim?.metadata?.annotations?.["volume.kubernetes.io/selected-node"];
    if (node && checkNodeAffinity(pv, mix.nodeLabels.get(node)) !== undefined) {
      throw new Error(`${pv.metadata!.name} does not admit ${node}`);
    }
  }

  const heapBefore = heapMB();
  const rssBefore = rssMB();
  const start = performance.now();
  const cpuStart = process.cpuUsage();
  const index = new VolumeIndex();
  for (const pv of mix.volumes) index.add(pv);
  index.settle();
  const buildMs = performance.now() - start;
  // On a shared machine the process's CPU time says more than the wall clock.
  const buildCpu = process.cpuUsage(cpuStart);
  const heapPerPV = ((heapMB() - heapBefore) * 2 ** 20) / n;
  const rssPerPV = ((rssMB() - rssBefore) * 2 ** 20) / n;

  const timed = timeLookups(mix.claims, (claim) => index.findBestMatch(claim, delay(claim)).volume);
  const sorted = [...timed.micros].sort((a, b) => a - b);
  const matched = timed.results.filter(Boolean).length;
  const prebound = timed.results.filter((pv) => pv?.spec?.claimRef).length;

  // The linear port on claims spread over the whole list: every answer the same PV (names ascending).
  const step = Math.max(1, Math.floor(mix.claims.length / GOAL_SAMPLE));
  const sample = mix.claims.filter((_, i) => i % step === 0).slice(0, GOAL_SAMPLE);
  const buckets = bucketByAccessModes(mix.volumes);
  const linearMicros: number[] = [];
  let same = 0;
  for (const claim of sample) {
    const t = process.hrtime.bigint();
    const expected = findBestMatchLinear(claim, buckets, delay(claim)).volume;
    linearMicros.push(Number(process.hrtime.bigint() - t) / 1000);
    if (expected === index.findBestMatch(claim, delay(claim)).volume) same++;
    else console.error(`disagreement: ${claim.metadata?.name}`);
  }
  const linearSorted = [...linearMicros].sort((a, b) => a - b);

  const fmt = (x: number, digits = 1): string => x.toFixed(digits);
  console.log(
    `\nGoal mode: ${n.toLocaleString("en")} PVs (${index.size.toLocaleString("en")} indexed), ` +
      `${mix.claims.length.toLocaleString("en")} claims of the same mix (bench/matcher-mix.ts), Node ${process.version}.\n`,
  );
  console.log("| what | value |");
  console.log("|---|---:|");
  console.log(
    `| index build (add() × ${n.toLocaleString("en")}, settle()), wall / CPU | ${fmt(buildMs, 0)} / ${fmt((buildCpu.user + buildCpu.system) / 1000, 0)} ms |`,
  );
  console.log(`| heap growth per PV | ${fmt(heapPerPV, 0)} B |`);
  console.log(`| RSS growth per PV | ${fmt(rssPerPV, 0)} B |`);
  console.log(
    `| findBestMatch µs p50 / p99 / max | ${fmt(percentile(sorted, 50), 2)} / ${fmt(percentile(sorted, 99), 2)} / ${fmt(sorted.at(-1) ?? NaN, 0)} |`,
  );
  console.log(
    `| findBestMatch µs mean | ${fmt(timed.micros.reduce((a, b) => a + b, 0) / sorted.length, 2)} |`,
  );
  console.log(`| matched (of which pre-bound) | ${matched} (${prebound}) of ${sorted.length} |`);
  console.log(
    `| linear port µs p50 / max (${sample.length} claims) | ${fmt(percentile(linearSorted, 50), 0)} / ${fmt(linearSorted.at(-1) ?? NaN, 0)} |`,
  );
  console.log(`| same PV as the linear port | ${same}/${sample.length} |`);
}

if (args.only !== "goal") compare();
if (args.only !== "compare") goal();
