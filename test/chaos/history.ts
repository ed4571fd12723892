import type {
  V1Node,
  V1PersistentVolume,
  V1PersistentVolumeClaim,
  V1Pod,
  V1VolumeAttachment,
} from "@kubernetes/client-node";
import type { AuditEvent } from "../support/audit.js";

/*
 * What a chaos run records, and what the invariants (invariants.ts) read: plain data, so a check can
 * be fed a hand-written history with a violation in it.
 */

export interface ObjectKinds {
  PersistentVolume: V1PersistentVolume;
  PersistentVolumeClaim: V1PersistentVolumeClaim;
  VolumeAttachment: V1VolumeAttachment;
  Node: V1Node;
  Pod: V1Pod;
}
export type Kind = keyof ObjectKinds;

/**
 * One state of one object as a watch delivered it. `rv` is its resourceVersion: etcd's revision, one
 * counter for all resources, so sorting by it orders observations across watch streams (their
 * arrival times do not). A deletion carries the last state seen and `deleted`.
 */
export type Observation = {
  [K in Kind]: {
    kind: K;
    rv: number;
    /** Epoch milliseconds at which the recorder received it (for time rules, never for order). */
    at: number;
    object: ObjectKinds[K];
    deleted?: boolean;
  };
}[Kind];

/** The Lease as polled: a term begins at `acquiredAt` (the holder's clock, the machine's). */
export interface LeaseTerm {
  holder: string;
  /** Epoch milliseconds (Lease spec.acquireTime). */
  acquiredAt: number;
}

export interface History {
  observations: Observation[];
  /** The apiserver's audit log: writes only (test/support/audit.ts). */
  audit: AuditEvent[];
  /** One entry per term, oldest first. */
  terms: LeaseTerm[];
}

/** The state of every object of each kind at one point of a replay. */
export type World = { [K in Kind]: Map<string, ObjectKinds[K]> };

export function emptyWorld(): World {
  return {
    PersistentVolume: new Map(),
    PersistentVolumeClaim: new Map(),
    VolumeAttachment: new Map(),
    Node: new Map(),
    Pod: new Map(),
  };
}

export function keyOf(o: { metadata?: { namespace?: string; name?: string } }): string {
  const { namespace, name = "" } = o.metadata ?? {};
  return namespace ? `${namespace}/${name}` : name;
}

/**
 * Replays `observations` in etcd order, calling `visit` before each is applied (with the world as it
 * was just before it). A deletion sorts after the last state it carries.
 */
export function replay(
  observations: readonly Observation[],
  visit: (o: Observation, before: World) => void,
): World {
  const order = (o: Observation) => o.rv + (o.deleted ? 0.5 : 0);
  const sorted = [...observations].sort((a, b) => order(a) - order(b));
  const world = emptyWorld();
  for (const o of sorted) {
    visit(o, world);
    const map = world[o.kind] as Map<string, unknown>;
    if (o.deleted) map.delete(keyOf(o.object));
    else map.set(keyOf(o.object), o.object);
  }
  return world;
}

/**
 * A kvc replica's identity, from its User-Agent: src/app/run.ts ends it with the identity, then
 * "/leader-election" or a loop's client name (e.g. "/persistent-volume-binder") where one is added.
 */
export function replicaOf(userAgent: string | undefined): string | undefined {
  if (!userAgent?.startsWith("kube-volume-controller/")) return undefined;
  const last = userAgent.split(" ").at(-1) ?? "";
  return last.split("/", 1)[0];
}

export function isLeaderElectionWrite(e: AuditEvent): boolean {
  return (e.userAgent ?? "").endsWith("/leader-election");
}
