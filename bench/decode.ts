/**
 * The informers' decode of 50,000 bound PVs and 50,000 nodes as the apiserver sends them, managedFields
 * and all (kubectl's create, kvc's binder or attach/detach, kube-controller-manager's other loops):
 * cachedObjectDecoder with and without the competing-writer check (src/app/kcm-writes.ts), and as it
 * was before the check (managedFields trimmed after decoding, a Date made of each entry's time). Each
 * round JSON.parses the list page afresh, as the informer does, outside the timed part. Prints CPU ns
 * per object (the machine may be shared), the median of several rounds; asserts nothing.
 *   npm run bench:decode
 */
import type { KubernetesObject } from "@kubernetes/client-node";
import { competingWriteInspector, type CompetingWriteReport } from "../src/app/kcm-writes-warning.js";
import { cachedObjectDecoder, modelDecoder } from "../src/runtime/model-codec.js";
import { trimManagedFields } from "../src/runtime/informer/transform.js";
import { nodes, persistentVolumes, type ResourceType } from "../src/runtime/informer/resources.js";

const OBJECTS = 50_000;
const ROUNDS = 9;
// Every managedFields time is before the check's threshold (kvc's start): the common case, nothing to report.
const BEFORE = "2026-01-01T00:00:00Z";
const START = Date.parse("2026-06-01T00:00:00Z");

const entry = (manager: string, fieldsV1: object, subresource?: string) => ({
  manager,
  operation: "Update",
  apiVersion: "v1",
  time: BEFORE,
  fieldsType: "FieldsV1",
  fieldsV1,
  ...(subresource && { subresource }),
});

function volume(i: number): object {
  return {
    metadata: {
      name: `pv-${i}`,
      uid: `00000000-0000-0000-0000-${String(i).padStart(12, "0")}`,
      resourceVersion: String(1000 + i),
      creationTimestamp: BEFORE,
      annotations: { "pv.kubernetes.io/bound-by-controller": "yes" },
      finalizers: ["kubernetes.io/pv-protection"],
      managedFields: [
        entry("kubectl-create", {
          "f:spec": {
            "f:accessModes": {},
            "f:capacity": { ".": {}, "f:storage": {} },
            "f:hostPath": { ".": {}, "f:path": {}, "f:type": {} },
            "f:persistentVolumeReclaimPolicy": {},
            "f:storageClassName": {},
            "f:volumeMode": {},
          },
        }),
        entry("kube-volume-controller", {
          "f:metadata": { "f:annotations": { ".": {}, "f:pv.kubernetes.io/bound-by-controller": {} } },
          "f:spec": { "f:claimRef": { ".": {}, "f:name": {}, "f:namespace": {}, "f:uid": {} } },
        }),
        entry("kube-volume-controller", { "f:status": { "f:phase": {} } }, "status"),
      ],
    },
    spec: {
      capacity: { storage: "1Gi" },
      accessModes: ["ReadWriteOnce"],
      persistentVolumeReclaimPolicy: "Retain",
      storageClassName: "",
      volumeMode: "Filesystem",
      hostPath: { path: `/tmp/bench/${i}`, type: "" },
      claimRef: { kind: "PersistentVolumeClaim", namespace: "default", name: `pvc-${i}`, uid: "u" },
    },
    status: { phase: "Bound", lastPhaseTransitionTime: BEFORE },
  };
}

function node(i: number): object {
  const condition = (type: string) => ({
    type,
    status: "False",
    lastHeartbeatTime: BEFORE,
    lastTransitionTime: BEFORE,
    reason: type,
    message: type,
  });
  return {
    metadata: {
      name: `node-${i}`,
      uid: `n-${i}`,
      resourceVersion: String(1000 + i),
      creationTimestamp: BEFORE,
      labels: { "kubernetes.io/hostname": `node-${i}`, "kubernetes.io/os": "linux" },
      annotations: { "node.alpha.kubernetes.io/ttl": "0" },
      managedFields: [
        entry("kubelet", { "f:metadata": { "f:labels": { ".": {}, "f:kubernetes.io/hostname": {} } } }),
        entry("kube-controller-manager", {
          "f:metadata": { "f:annotations": { "f:node.alpha.kubernetes.io/ttl": {} } },
          "f:spec": { "f:podCIDR": {}, "f:podCIDRs": { ".": {}, 'v:"10.0.0.0/24"': {} } },
        }),
        entry(
          "kubelet",
          { "f:status": { "f:conditions": {}, "f:images": {}, "f:volumesInUse": {} } },
          "status",
        ),
        entry("kube-volume-controller", { "f:status": { "f:volumesAttached": {} } }, "status"),
      ],
    },
    spec: { podCIDR: "10.0.0.0/24" },
    status: {
      conditions: ["Ready", "MemoryPressure", "DiskPressure", "PIDPressure"].map(condition),
      volumesAttached: [{ name: `kubernetes.io/csi/x^v-${i}`, devicePath: "" }],
      volumesInUse: [`kubernetes.io/csi/x^v-${i}`],
    },
  };
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] ?? NaN;
}

function time(page: string, decode: ((json: unknown) => KubernetesObject) | undefined): number {
  const items = (JSON.parse(page) as { items: unknown[] }).items;
  // CPU time, not wall time: the machines these run on are shared, and a preempted round says nothing.
  const start = process.cpuUsage();
  if (decode) for (const item of items) decode(item);
  const { user, system } = process.cpuUsage(start);
  return (user + system) / 1000;
}

function bench<T extends KubernetesObject>(
  kind: string,
  resource: ResourceType<T>,
  make: (i: number) => object,
) {
  const page = JSON.stringify({ items: Array.from({ length: OBJECTS }, (_, i) => make(i)) });
  const reports: CompetingWriteReport[] = [];
  const inspect = competingWriteInspector({
    startedAtMs: START,
    now: () => START + 60_000,
    report: (r) => reports.push(r),
  });
  const decode = modelDecoder(resource);
  const check = inspect(resource.model);
  const variants = {
    // cachedObjectDecoder before the check came: managedFields trimmed after decoding.
    "decode, then trim": (json: unknown) => trimManagedFields(decode(json)),
    "trim, then decode": cachedObjectDecoder(resource),
    "decode + check": cachedObjectDecoder(resource, check),
    // The check's own cost, apart from the decode's noise.
    "check alone": (json: unknown) => {
      check?.(json);
      return json as KubernetesObject;
    },
  };
  const results: Record<string, number[]> = Object.fromEntries(Object.keys(variants).map((k) => [k, []]));
  for (let round = 0; round < ROUNDS; round++) {
    // Each round in another order, so that no variant always runs right after another's garbage.
    const order = Object.entries(variants);
    for (let k = 0; k < order.length; k++) {
      const [name, decode] = order[(round + k) % order.length]!;
      results[name]?.push(time(page, decode));
    }
  }
  for (const [name, ms] of Object.entries(results)) {
    console.log(`| ${kind} | ${name} | ${((median(ms) * 1e6) / OBJECTS).toFixed(0)} |`);
  }
  if (reports.length > 0) throw new Error(`the check reported ${reports.length} writes in a quiet cluster`);
}

console.log("| objects | variant | ns/object (median of 9) |\n|---|---|---|");
bench("PV", persistentVolumes, volume);
bench("node", nodes, node);
