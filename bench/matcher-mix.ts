/**
 * The data set of bench/matcher.ts's goal mode (issue 30 goal 3): PVs and claims as a large cluster
 * holds them. Deterministic for a seed; PVs come out in name order (the tie rule of the linear port).
 *
 * - PVs: 72% Available and unbound, 22% Bound to other claims, 2% Released, 1.5% Pending, 0.5%
 *   Available but being deleted, 2% Available and pre-bound to one of the lookup claims.
 * - Classes: standard, fast, archive (Immediate), local (WaitForFirstConsumer, every PV with node
 *   affinity to one of 1,000 nodes) and none; 10% Block; 3% with a VolumeAttributesClass.
 * - Sizes from 100Mi to 16Ti, log-uniform, in Mi, Gi, G and Ti, a third at common sizes.
 * - Labels: zone (30%), tier=gold (10%), app=<one of 200> (5%).
 * - Claims of the same spreads; 20% with a selector (zone, tier, one app, In/NotIn/Exists/
 *   DoesNotExist); 2% ask for more than any PV has. A local claim carries the node the scheduler
 *   chose, and its pre-bound PV (the scheduler's choice) has node affinity that admits that node.
 */
import type {
  V1PersistentVolume,
  V1PersistentVolumeClaim,
  V1VolumeNodeAffinity,
} from "@kubernetes/client-node";
import { mulberry32, weightedPick } from "../test/support/random.js";

export const WAIT_FOR_FIRST_CONSUMER_CLASS = "local";
export const SELECTED_NODE = "volume.kubernetes.io/selected-node";
const HOSTNAME = "kubernetes.io/hostname";
const NODES = 1_000;
const RWO = "ReadWriteOnce";

export interface Mix {
  volumes: V1PersistentVolume[];
  claims: V1PersistentVolumeClaim[];
  /** The labels of the node each local claim was scheduled to, by node name. */
  nodeLabels: ReadonlyMap<string, Record<string, string>>;
}

export function goalMix(pvCount: number, claimCount: number, seed: number): Mix {
  const random = mulberry32(seed);
  const oneOf = <T>(values: readonly T[]): T => values[Math.floor(random() * values.length)]!;
  const pick = <T>(weighted: readonly (readonly [T, number])[]): T => weightedPick(random, weighted);
  const classes = [
    ["standard", 40],
    ["fast", 25],
    ["archive", 10],
    [WAIT_FOR_FIRST_CONSUMER_CLASS, 20],
    ["", 5],
  ] as const;
  const modes: readonly (readonly [readonly string[], number])[] = [
    [[RWO], 5],
    [[RWO, "ReadOnlyMany"], 2.5],
    [["ReadWriteMany"], 1],
    [[RWO, "ReadOnlyMany", "ReadWriteMany"], 1],
    [["ReadWriteOncePod"], 0.5],
  ];
  const common = ["8Gi", "10Gi", "20Gi", "50Gi", "100Gi", "500Gi", "1Ti"];
  /** 100Mi–16Ti, log-uniform, in a unit of that magnitude; a third snapped to common sizes. */
  const size = (): string => {
    if (random() < 0.3) return oneOf(common);
    const mi = 100 * 2 ** (random() * 17.4);
    if (mi < 1024) return `${Math.round(mi)}Mi`;
    if (mi >= 1024 * 1024 && random() < 0.5) return `${Math.round(mi / (1024 * 1024))}Ti`;
    const gi = Math.max(1, Math.round(mi / 1024));
    return random() < 0.1 ? `${gi}G` : `${gi}Gi`;
  };
  const volumeMode = (): string => (random() < 0.9 ? "Filesystem" : "Block");
  const vac = (): string | undefined => (random() < 0.03 ? "iops-high" : undefined);
  const node = (): string => `node-${Math.floor(random() * NODES)}`;
  const nodeLabels = new Map<string, Record<string, string>>();

  const claims: V1PersistentVolumeClaim[] = [];
  for (let i = 0; i < claimCount; i++) {
    const storageClassName = pick(classes);
    const claim: V1PersistentVolumeClaim = {
      metadata: { name: `claim-${i}`, namespace: `ns-${i % 50}`, uid: `uid-${i}` },
      spec: {
        accessModes: [
          pick<string>([
            [RWO, 6],
            ["ReadOnlyMany", 1],
            ["ReadWriteMany", 2],
            ["ReadWriteOncePod", 1],
          ]),
        ],
        resources: {
          requests: { storage: random() < 0.02 ? `${32 + Math.floor(random() * 32)}Ti` : size() },
        },
        storageClassName,
        volumeMode: volumeMode(),
      },
    };
    const spec = claim.spec!;
    const attributes = vac();
    if (attributes) spec.volumeAttributesClassName = attributes;
    if (storageClassName === WAIT_FOR_FIRST_CONSUMER_CLASS) {
      const chosen = node();
      claim.metadata!.annotations = { [SELECTED_NODE]: chosen };
      nodeLabels.set(chosen, { [HOSTNAME]: chosen, "topology.kubernetes.io/zone": `zone-${chosen.length}` });
    }
    const r = random();
    if (r < 0.08) spec.selector = { matchLabels: { zone: "a" } };
    else if (r < 0.12)
      spec.selector = { matchExpressions: [{ key: "tier", operator: "In", values: ["gold"] }] };
    else if (r < 0.15) spec.selector = { matchLabels: { app: `app-${Math.floor(random() * 200)}` } };
    else if (r < 0.17) {
      spec.selector = {
        matchExpressions: [
          { key: "zone", operator: "In", values: ["a", "b"] },
          { key: "tier", operator: "Exists" },
        ],
      };
    } else if (r < 0.19)
      spec.selector = { matchExpressions: [{ key: "zone", operator: "NotIn", values: ["c"] }] };
    else if (r < 0.2) spec.selector = { matchExpressions: [{ key: "tier", operator: "DoesNotExist" }] };
    claims.push(claim);
  }

  const volumes: V1PersistentVolume[] = [];
  for (let i = 0; i < pvCount; i++) {
    const labels: Record<string, string> = {};
    if (random() < 0.3) labels.zone = oneOf(["a", "b", "c"]);
    if (random() < 0.1) labels.tier = "gold";
    if (random() < 0.05) labels.app = `app-${Math.floor(random() * 200)}`;
    const pv: V1PersistentVolume = {
      metadata: { name: `pv-${String(i).padStart(7, "0")}`, labels },
      spec: {
        capacity: { storage: size() },
        accessModes: [...pick(modes)],
        storageClassName: pick(classes),
        volumeMode: volumeMode(),
        persistentVolumeReclaimPolicy: "Retain",
      },
      status: { phase: "Available" },
    };
    const spec = pv.spec!;
    const attributes = vac();
    if (attributes) spec.volumeAttributesClassName = attributes;
    const state = random();
    if (state < 0.22) {
      spec.claimRef = { namespace: "bound", name: `bound-${i}`, uid: `bound-uid-${i}` };
      pv.status = { phase: "Bound" };
    } else if (state < 0.24) {
      spec.claimRef = { namespace: "gone", name: `gone-${i}`, uid: `gone-uid-${i}` };
      pv.status = { phase: "Released" };
    } else if (state < 0.255) pv.status = { phase: "Pending" };
    else if (state < 0.26) pv.metadata!.deletionTimestamp = new Date(0);
    else if (state < 0.28 && claims.length) preBind(pv, oneOf(claims));
    if (spec.storageClassName === WAIT_FOR_FIRST_CONSUMER_CLASS && !spec.nodeAffinity) {
      spec.nodeAffinity = hostAffinity(node());
    }
    volumes.push(pv);
  }
  return { volumes, claims, nodeLabels };
}

/**
 * A PV pre-bound to the claim, as an admin's static PV or the scheduler's choice for a local claim:
 * it fits the claim, and for a local claim its node affinity admits the claim's selected node.
 */
function preBind(pv: V1PersistentVolume, claim: V1PersistentVolumeClaim): void {
  const spec = pv.spec!;
  const wants = claim.spec!;
  spec.claimRef = {
    namespace: claim.metadata!.namespace!,
    name: claim.metadata!.name!,
    ...(pv.metadata!.name!.endsWith("7") ? {} : { uid: claim.metadata!.uid! }),
  };
  spec.capacity = { storage: wants.resources!.requests!.storage! };
  spec.accessModes = [...new Set([...wants.accessModes!, ...(spec.accessModes ?? [])])];
  spec.volumeMode = wants.volumeMode!;
  spec.storageClassName = wants.storageClassName!;
  if (wants.volumeAttributesClassName) spec.volumeAttributesClassName = wants.volumeAttributesClassName;
  else delete spec.volumeAttributesClassName;
  const selected = claim.metadata!.annotations?.[SELECTED_NODE];
  if (selected) spec.nodeAffinity = hostAffinity(selected);
}

function hostAffinity(node: string): V1VolumeNodeAffinity {
  return {
    required: {
      nodeSelectorTerms: [{ matchExpressions: [{ key: HOSTNAME, operator: "In", values: [node] }] }],
    },
  };
}
