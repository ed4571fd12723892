import assert from "node:assert/strict";
import { describe, test } from "node:test";
import type {
  V1Node,
  V1PersistentVolume,
  V1PersistentVolumeClaim,
  V1VolumeAttachment,
} from "@kubernetes/client-node";
import { FakeClock } from "../../src/runtime/clock.js";
import { Comparator, type Comparison } from "../../src/shadow/comparator.js";
import { claimDecisions, recyclerPodDecisions, volumeDecisions } from "../../src/shadow/decisions.js";
import { equalChoices, mergePatch, recordWrite, type CurrentObjects } from "../../src/shadow/recorder.js";

function pv(name: string, size: string, extra: Partial<V1PersistentVolume["spec"]> = {}): V1PersistentVolume {
  return {
    metadata: { name, resourceVersion: "5" },
    spec: { capacity: { storage: size }, accessModes: ["ReadWriteOnce"], ...extra },
    status: { phase: extra?.claimRef ? "Bound" : "Available" },
  };
}

const claim: V1PersistentVolumeClaim = {
  metadata: { name: "data", namespace: "ns", resourceVersion: "7" },
  spec: { accessModes: ["ReadWriteOnce"], resources: { requests: { storage: "1Gi" } } },
  status: { phase: "Pending" },
};

function objects(volumes: V1PersistentVolume[], more: { node?: V1Node; va?: V1VolumeAttachment } = {}) {
  return {
    volume: (name) => volumes.find((v) => v.metadata?.name === name),
    volumes: () => volumes,
    claim: (namespace, name) => (namespace === "ns" && name === "data" ? claim : undefined),
    node: (name) => (more.node?.metadata?.name === name ? more.node : undefined),
    volumeAttachment: (name) => (more.va?.metadata?.name === name ? more.va : undefined),
  } satisfies CurrentObjects;
}

const va: V1VolumeAttachment = {
  metadata: { name: "csi-123" },
  spec: { attacher: "hostpath.csi.k8s.io", nodeName: "node-1", source: { persistentVolumeName: "pv-1" } },
};

const put = (path: string, body: unknown) => ({ method: "PUT", path, body: JSON.stringify(body) });

describe("shadow recordWrite", () => {
  test("binding a PV: the decision, with the equal-size volumes as ties, and the object as written", () => {
    const volumes = [
      pv("pv-1", "1Gi"),
      pv("pv-2", "1Gi"),
      pv("pv-big", "2Gi"),
      pv("pv-rwx", "1Gi", { accessModes: ["ReadWriteMany"] }),
    ];
    const bound = {
      ...pv("pv-1", "1Gi"),
      spec: { ...volumes[0]?.spec, claimRef: { namespace: "ns", name: "data" } },
    };
    const { decisions, response } = recordWrite(
      put("/api/v1/persistentvolumes/pv-1", bound),
      objects(volumes),
    );
    assert.deepEqual(decisions, [
      {
        controller: "persistentvolume-binder-controller",
        kind: "binding",
        key: "binding pvc ns/data",
        value: "pv-1",
        equivalents: ["pv-2"],
      },
    ]);
    assert.deepEqual(response, { status: 200, body: bound });
  });

  test("a tie only where both volumes pass every rule of the matcher for the claim", () => {
    const gold = { tier: "gold" };
    const labelled = (name: string, labels: Record<string, string>, extra = {}) => {
      const v = pv(name, "1Gi", extra);
      return { ...v, metadata: { ...v.metadata, labels } };
    };
    const picky: V1PersistentVolumeClaim = {
      ...claim,
      spec: { ...claim.spec, selector: { matchLabels: gold }, volumeAttributesClassName: "fast" },
    };
    const chosen = labelled("pv-chosen", gold, { volumeAttributesClassName: "fast" });
    const volumes = [
      chosen,
      labelled("pv-fits", gold, { volumeAttributesClassName: "fast" }),
      labelled("pv-unlabelled", {}, { volumeAttributesClassName: "fast" }),
      labelled("pv-no-vac", gold),
      labelled("pv-other-class", gold, { volumeAttributesClassName: "fast", storageClassName: "x" }),
      labelled("pv-block", gold, { volumeAttributesClassName: "fast", volumeMode: "Block" }),
      labelled("pv-rwx", gold, { volumeAttributesClassName: "fast", accessModes: ["ReadWriteMany"] }),
      // Upstream's choice, already bound to the claim in the cache: judged as it was before, not as
      // pre-bound (which would skip the selector and class).
      labelled(
        "pv-bound-here",
        {},
        {
          volumeAttributesClassName: "fast",
          claimRef: { namespace: "ns", name: "data" },
        },
      ),
      labelled("pv-bound-here-fits", gold, {
        volumeAttributesClassName: "fast",
        claimRef: { namespace: "ns", name: "data" },
      }),
      labelled("pv-bound-elsewhere", gold, {
        volumeAttributesClassName: "fast",
        claimRef: { namespace: "ns", name: "other" },
      }),
    ];
    assert.deepEqual(equalChoices(picky, chosen, volumes), ["pv-fits", "pv-bound-here-fits"]);
    // kvc's own choice breaks a rule: nothing is as good as a mistake.
    const wrong = volumes[2] as V1PersistentVolume;
    assert.deepEqual(equalChoices(picky, wrong, volumes), []);
  });

  test("phase changes of PV and claim through their status", () => {
    const volumes = [pv("pv-1", "1Gi")];
    const released = { ...volumes[0], status: { phase: "Released" } };
    const r1 = recordWrite(put("/api/v1/persistentvolumes/pv-1/status", released), objects(volumes));
    assert.deepEqual(
      r1.decisions.map((d) => `${d.key}=${d.value}`),
      ["phase pv pv-1=Released"],
    );
    const boundClaim = { ...claim, status: { phase: "Bound" } };
    const r2 = recordWrite(
      put("/api/v1/namespaces/ns/persistentvolumeclaims/data/status", boundClaim),
      objects(volumes),
    );
    assert.deepEqual(
      r2.decisions.map((d) => `${d.key}=${d.value}`),
      ["phase pvc ns/data=Bound"],
    );
  });

  test("a finalizer removed by merge patch: the patched object is the answer", () => {
    const protectedPV = {
      ...pv("pv-1", "1Gi"),
      metadata: {
        name: "pv-1",
        finalizers: ["kubernetes.io/pv-protection"],
        deletionTimestamp: new Date("2026-01-01T00:00:00Z"),
      },
    };
    const { decisions, response } = recordWrite(
      {
        method: "PATCH",
        path: "/api/v1/persistentvolumes/pv-1",
        body: JSON.stringify({ metadata: { finalizers: null } }),
      },
      objects([protectedPV]),
    );
    assert.deepEqual(
      decisions.map((d) => [d.controller, d.key, d.value]),
      [
        [
          "persistentvolume-protection-controller",
          "finalizer-removal pv pv-1 kubernetes.io/pv-protection",
          "removed",
        ],
      ],
    );
    assert.deepEqual((response.body as V1PersistentVolume).metadata, {
      name: "pv-1",
      deletionTimestamp: new Date("2026-01-01T00:00:00Z"),
    });
  });

  test("VolumeAttachments created and deleted, node volumesAttached", () => {
    const created = recordWrite(
      { method: "POST", path: "/apis/storage.k8s.io/v1/volumeattachments", body: JSON.stringify(va) },
      objects([]),
    );
    assert.deepEqual(
      created.decisions.map((d) => `${d.key}=${d.value}`),
      ["volume-attachment csi-123=created hostpath.csi.k8s.io pv-1 on node-1"],
    );
    assert.equal(created.response.status, 201);
    assert.equal((created.response.body as V1VolumeAttachment).metadata?.name, "csi-123");
    const deleted = recordWrite(
      { method: "DELETE", path: "/apis/storage.k8s.io/v1/volumeattachments/csi-123", body: undefined },
      objects([], { va }),
    );
    assert.deepEqual(
      deleted.decisions.map((d) => `${d.key}=${d.value}`),
      ["volume-attachment csi-123=deleted"],
    );
    const node: V1Node = {
      metadata: { name: "node-1" },
      status: { volumesAttached: [{ name: "c", devicePath: "" }] },
    };
    const patched = recordWrite(
      {
        method: "PATCH",
        path: "/api/v1/nodes/node-1/status",
        body: JSON.stringify({
          status: {
            volumesAttached: [
              { name: "b", devicePath: "" },
              { name: "a", devicePath: "" },
            ],
          },
        }),
      },
      objects([], { node }),
    );
    assert.deepEqual(
      patched.decisions.map((d) => `${d.key}=${d.value}`),
      // Per volume, whatever order the list has: a and b attached, c detached.
      [
        "volumes-attached node node-1 a=attached",
        "volumes-attached node node-1 b=attached",
        "volumes-attached node node-1 c=detached",
      ],
    );
  });

  test("events: the creation's reason counts, a repeat's patch does not; other components are not ours", () => {
    const event = {
      metadata: { generateName: "data." },
      involvedObject: { kind: "PersistentVolumeClaim", namespace: "ns", name: "data" },
      reason: "ProvisioningFailed",
      type: "Warning",
      source: { component: "persistentvolume-controller" },
    };
    const r = recordWrite(
      { method: "POST", path: "/api/v1/namespaces/ns/events", body: JSON.stringify(event) },
      objects([]),
    );
    assert.deepEqual(
      r.decisions.map((d) => `${d.key}=${d.value}`),
      ["event PersistentVolumeClaim ns/data ProvisioningFailed=Warning ProvisioningFailed"],
    );
    assert.match((r.response.body as { metadata: { name: string } }).metadata.name, /^data\.[0-9a-f]{6}$/);
    const repeat = recordWrite(
      { method: "PATCH", path: "/api/v1/namespaces/ns/events/data.abc", body: JSON.stringify({ count: 2 }) },
      objects([]),
    );
    assert.deepEqual(repeat.decisions, []);
    const other = recordWrite(
      {
        method: "POST",
        path: "/api/v1/namespaces/ns/events",
        body: JSON.stringify({ ...event, source: { component: "kubelet" } }),
      },
      objects([]),
    );
    assert.deepEqual(other.decisions, []);
  });

  test("a PUT from an older version than the informers hold succeeds, and what it states only confirms", () => {
    // KCM made pv-1 Available (resourceVersion 9) before kvc synced the version it acted on (5).
    const current = { ...pv("pv-1", "1Gi"), metadata: { name: "pv-1", resourceVersion: "9" } };
    const acted = pv("pv-1", "1Gi");
    delete acted.status;
    const stale = (phase: string, earlier?: CurrentObjects["earlier"]) =>
      recordWrite(put("/api/v1/persistentvolumes/pv-1/status", { ...acted, status: { phase } }), {
        ...objects([current]),
        ...(earlier && { earlier }),
      });
    // The version it was made from no longer remembered: what it changes is unknown, it confirms nothing.
    assert.deepEqual(stale("Available").confirmations, []);
    const same = stale("Available", (_resource, _key, version) => (version === "5" ? acted : undefined));
    assert.equal(same.response.status, 200);
    assert.equal((same.response.body as V1PersistentVolume).status?.phase, "Available");
    assert.deepEqual(same.decisions, []);
    assert.deepEqual(
      same.confirmations.map((d) => `${d.key}=${d.value}`),
      ["phase pv pv-1=Available"],
    );
    // The same version as held (kvc's own earlier recorded write) is a decision.
    const fresh = recordWrite(
      put("/api/v1/persistentvolumes/pv-1/status", { ...current, status: { phase: "Released" } }),
      objects([current]),
    );
    assert.equal(fresh.response.status, 200);
    assert.deepEqual(
      fresh.decisions.map((d) => `${d.key}=${d.value}`),
      ["phase pv pv-1=Released"],
    );
    // kvc completes a binding from the claim version KCM bound (volumeName, 8) before kvc's worker saw
    // the volume; KCM has written the claim since (9).
    const boundByKcm = { ...claim, metadata: { ...claim.metadata, resourceVersion: "9" } };
    const completed = {
      ...claim,
      metadata: { ...claim.metadata, resourceVersion: "8" },
      spec: { ...claim.spec, volumeName: "pv-1" },
      status: { phase: "Bound" },
    };
    const late = recordWrite(put("/api/v1/namespaces/ns/persistentvolumeclaims/data/status", completed), {
      ...objects([current]),
      claim: () => boundByKcm,
      earlier: () => ({ ...completed, status: { phase: "Pending" } }),
    });
    assert.deepEqual(late.decisions, []);
    // Only what it changes in that version: the binding was KCM's (version 8 had it), not kvc's.
    assert.deepEqual(
      late.confirmations.map((d) => `${d.key}=${d.value}`),
      ["phase pvc ns/data=Bound"],
    );
  });

  test("a write that echoes KCM's values is no decision and no confirmation: only what it changes counts", () => {
    // KCM bound pv-1 (resourceVersion 9); kvc's write from that very version changes an annotation.
    const bound = {
      ...pv("pv-1", "1Gi", { claimRef: { namespace: "ns", name: "data" } }),
      metadata: { name: "pv-1", resourceVersion: "9" },
    };
    const annotated = { ...bound, metadata: { ...bound.metadata, annotations: { a: "b" } } };
    for (const r of [
      recordWrite(put("/api/v1/persistentvolumes/pv-1", annotated), objects([bound])),
      recordWrite(
        {
          method: "PATCH",
          path: "/api/v1/persistentvolumes/pv-1",
          body: JSON.stringify({ metadata: { resourceVersion: "9" }, spec: bound.spec }),
        },
        objects([bound]),
      ),
    ]) {
      assert.deepEqual(r.decisions, []);
      assert.deepEqual(r.confirmations, []);
    }
  });

  test("a write from an older version that decides otherwise than KCM did from it differs", () => {
    const clock = new FakeClock();
    const seen: Comparison[] = [];
    const comparator = new Comparator({ clock, graceMs: 1000, onComparison: (c) => seen.push(c) });
    // KCM bound the claim (version 7) to pv-2 (version 9); kvc, from version 7, binds it to pv-1.
    const unbound = { ...claim, metadata: { ...claim.metadata, resourceVersion: "7" } };
    const byKcm = {
      ...claim,
      metadata: { ...claim.metadata, resourceVersion: "9" },
      spec: { ...claim.spec, volumeName: "pv-2" },
    };
    for (const d of claimDecisions(unbound, byKcm)) comparator.observed(d);
    const remembered = (version: string) => (version === "7" ? unbound : undefined);
    const r = recordWrite(
      put("/api/v1/namespaces/ns/persistentvolumeclaims/data", {
        ...unbound,
        spec: { ...unbound.spec, volumeName: "pv-1" },
      }),
      {
        ...objects([pv("pv-1", "1Gi"), pv("pv-2", "2Gi")]),
        claim: () => byKcm,
        earlier: (_resource, _key, version) => remembered(version),
        replacedBy: (_resource, _key, version) => (version === "7" ? { object: byKcm } : undefined),
      },
    );
    assert.deepEqual(r.decisions, []);
    for (const d of r.confirmations) comparator.confirmed(d, d.upstream);
    clock.advance(1000);
    assert.deepEqual(
      seen.map((c) => `${c.outcome} ${c.key} kvc=${c.kvc ?? "-"} upstream=${c.upstream ?? "-"}`),
      ["differ binding pvc ns/data kvc=pv-1 upstream=pv-2"],
    );
  });

  test("the race: KCM's write seen first, kvc's sync of the earlier version agrees, or differs", () => {
    const run = (kvcPhase: string) => {
      const clock = new FakeClock();
      const seen: Comparison[] = [];
      const comparator = new Comparator({ clock, graceMs: 1000, onComparison: (c) => seen.push(c) });
      const before = pv("pv-1", "1Gi");
      delete before.status;
      const after = { ...pv("pv-1", "1Gi"), metadata: { name: "pv-1", resourceVersion: "9" } };
      for (const d of volumeDecisions(before, after)) comparator.observed(d);
      const r = recordWrite(
        put("/api/v1/persistentvolumes/pv-1/status", { ...before, status: { phase: kvcPhase } }),
        {
          ...objects([after]),
          earlier: (_resource, _key, version) => (version === "5" ? before : undefined),
          replacedBy: (_resource, _key, version) => (version === "5" ? { object: after } : undefined),
        },
      );
      for (const d of r.decisions) comparator.intended(d);
      for (const d of r.confirmations) comparator.confirmed(d, d.upstream);
      clock.advance(1000);
      return seen.map((c) => `${c.outcome} ${c.key} kvc=${c.kvc ?? "-"} upstream=${c.upstream ?? "-"}`);
    };
    assert.deepEqual(run("Available"), ["agree phase pv pv-1 kvc=Available upstream=Available"]);
    // From the same version KCM made it Available: another phase differs.
    assert.deepEqual(run("Failed"), ["differ phase pv pv-1 kvc=Failed upstream=Available"]);
  });

  test("DELETE asks for the deletion: the reclaim of a released Delete volume; finalizers stay", () => {
    const released: V1PersistentVolume = {
      metadata: { name: "pv-1", resourceVersion: "5", finalizers: ["kubernetes.io/pv-protection"] },
      spec: { persistentVolumeReclaimPolicy: "Delete" },
      status: { phase: "Released" },
    };
    const del = { method: "DELETE", path: "/api/v1/persistentvolumes/pv-1", body: undefined };
    const r = recordWrite(del, objects([released]));
    assert.deepEqual(
      r.decisions.map((d) => `${d.key}=${d.value}`),
      ["reclaim pv pv-1=delete"],
    );
    // KCM asked first: kvc's request confirms it.
    const deleting = { ...released, metadata: { ...released.metadata, deletionTimestamp: new Date() } };
    const again = recordWrite(del, objects([deleting]));
    assert.deepEqual(again.decisions, []);
    assert.deepEqual(
      again.confirmations.map((d) => `${d.key}=${d.value}`),
      ["reclaim pv pv-1=delete"],
    );
  });

  test("a finalizer's owner is judged by the status kvc sent: its Released, never applied, is its view", () => {
    const finalizers = ["kubernetes.io/pv-controller", "kubernetes.io/pv-protection"];
    // The informers still have KCM's Bound volume; kvc released it (recorded) and deleted its storage.
    const bound: V1PersistentVolume = {
      metadata: { name: "pv-1", resourceVersion: "5", finalizers },
      spec: { persistentVolumeReclaimPolicy: "Delete", claimRef: { namespace: "ns", name: "gone" } },
      status: { phase: "Bound" },
    };
    const removed = {
      ...bound,
      metadata: { ...bound.metadata, finalizers: ["kubernetes.io/pv-protection"] },
      status: { phase: "Released" },
    };
    const r = recordWrite(put("/api/v1/persistentvolumes/pv-1", removed), objects([bound]));
    assert.deepEqual(
      r.decisions.map((d) => `${d.key}=${d.value}`),
      ["finalizer-removal pv pv-1 kubernetes.io/pv-controller=removed"],
    );
    // The status a PUT of the main resource carries is no phase decision: the apiserver ignores it.
    const phaseOnly = recordWrite(
      put("/api/v1/persistentvolumes/pv-1", { ...bound, status: { phase: "Released" } }),
      objects([bound]),
    );
    assert.deepEqual(phaseOnly.decisions, []);
  });

  test("a recycle is its recycler pod's creation; other pods and the pod's deletion are no decision", () => {
    const post = (name: string) => ({
      method: "POST",
      path: "/api/v1/namespaces/default/pods",
      body: JSON.stringify({ metadata: { name, namespace: "default" } }),
    });
    const keys = (r: ReturnType<typeof recordWrite>) => r.decisions.map((d) => `${d.key}=${d.value}`);
    const recycle = recordWrite(post("recycler-for-pv-1"), objects([]));
    assert.equal(recycle.response.status, 201);
    assert.deepEqual(keys(recycle), ["reclaim pv pv-1=recycle"]);
    assert.deepEqual(
      recyclerPodDecisions(undefined, { metadata: { name: "recycler-for-pv-1" } }),
      recycle.decisions,
    );
    assert.deepEqual(keys(recordWrite(post("web-1"), objects([]))), []);
    const del = {
      method: "DELETE",
      path: "/api/v1/namespaces/default/pods/recycler-for-pv-1",
      body: undefined,
    };
    assert.deepEqual(keys(recordWrite(del, objects([]))), []);
  });

  test("KCM was first: a create of what exists is AlreadyExists, a delete of what is gone NotFound; both only confirm", () => {
    const create = recordWrite(
      { method: "POST", path: "/apis/storage.k8s.io/v1/volumeattachments", body: JSON.stringify(va) },
      objects([], { va }),
    );
    assert.equal(create.response.status, 409);
    assert.equal((create.response.body as { reason: string }).reason, "AlreadyExists");
    assert.deepEqual(create.decisions, []);
    assert.deepEqual(
      create.confirmations.map((d) => `${d.key}=${d.value}`),
      ["volume-attachment csi-123=created hostpath.csi.k8s.io pv-1 on node-1"],
    );
    // The reclaim's deletion of a PV KCM deleted already: confirmed from the last version seen.
    const last: V1PersistentVolume = {
      metadata: { name: "pv-1", resourceVersion: "8", deletionTimestamp: new Date() },
      spec: { persistentVolumeReclaimPolicy: "Delete" },
      status: { phase: "Released" },
    };
    const earlier = (resource: string, key: string, version: string) =>
      resource === "persistentvolumes" && key === "pv-1" && version === "deleted" ? last : undefined;
    const del = recordWrite(
      { method: "DELETE", path: "/api/v1/persistentvolumes/pv-1", body: undefined },
      { ...objects([]), earlier },
    );
    assert.equal(del.response.status, 404);
    assert.deepEqual(del.decisions, []);
    assert.deepEqual(
      del.confirmations.map((d) => `${d.key}=${d.value}`),
      ["reclaim pv pv-1=delete"],
    );
  });

  test("a user's deletion of a PV is no reclaim, whatever phase it ends in", () => {
    const volume = (phase: string, policy: string, deleting = false): V1PersistentVolume => ({
      metadata: { name: "pv-1", ...(deleting && { deletionTimestamp: new Date() }) },
      spec: { persistentVolumeReclaimPolicy: policy },
      status: { phase },
    });
    const kinds = (before: V1PersistentVolume, after: V1PersistentVolume | undefined) =>
      volumeDecisions(before, after).map((d) => `${d.kind}=${d.value}`);
    // Deleted while Bound, Released by its claim's deletion, then gone.
    assert.deepEqual(kinds(volume("Bound", "Delete"), volume("Bound", "Delete", true)), []);
    assert.deepEqual(kinds(volume("Released", "Delete", true), undefined), []);
    // A Retain volume is never the reclaim policy's to delete.
    assert.deepEqual(kinds(volume("Released", "Retain"), volume("Released", "Retain", true)), []);
    assert.deepEqual(kinds(volume("Released", "Delete"), volume("Released", "Delete", true)), [
      "reclaim=delete",
    ]);
    assert.deepEqual(kinds(volume("Failed", "Delete"), undefined), ["reclaim=delete"]);
  });

  test("a request that cannot be understood is unparsed: counted, answered as the apiserver would", () => {
    for (const [req, status] of [
      [{ method: "PUT", path: "/api/v1/persistentvolumes/pv-1", body: "{not json" }, 400],
      [{ method: "PUT", path: "/api/v1/persistentvolumes/pv-1", body: "[1,2]" }, 400],
      [{ method: "PATCH", path: "/api/v1/persistentvolumes/pv-1", body: undefined }, 400],
      [{ method: "POST", path: "/api/v1/namespaces/ns/events", body: "" }, 400],
      [{ method: "PATCH", path: "/weird/path", body: "null" }, 404],
      [{ method: "POST", path: "/api/v1/namespaces/ns/configmaps", body: "{}" }, 404],
    ] as const) {
      const r = recordWrite(req, objects([pv("pv-1", "1Gi")]));
      assert.equal(r.response.status, status, JSON.stringify(req));
      assert.equal((r.response.body as { status?: string }).status, "Failure");
      assert.ok(r.unparsed, JSON.stringify(req));
      assert.deepEqual([...r.decisions, ...r.confirmations], []);
    }
  });

  test("hostile but well-formed requests are parsed: no crash, no invented decision", () => {
    for (const req of [
      { method: "POST", path: "/apis/storage.k8s.io/v1/volumeattachments", body: '{"spec":null}' },
      {
        method: "POST",
        path: "/api/v1/namespaces/ns/events",
        body: '{"reason":"X","source":{"component":"persistentvolume-controller"}}',
      },
      { method: "DELETE", path: "/api/v1/namespaces/%zz/pods/x", body: undefined },
    ]) {
      const r = recordWrite(req, objects([pv("pv-1", "1Gi")]));
      assert.ok(r.response.status >= 200 && r.response.status < 300, JSON.stringify(req));
      assert.equal(r.unparsed, undefined);
    }
  });

  test("mergePatch follows RFC 7386", () => {
    assert.deepEqual(mergePatch({ a: 1, b: { c: 2, d: 3 }, e: [1] }, { a: null, b: { c: 4 }, e: [2] }), {
      b: { c: 4, d: 3 },
      e: [2],
    });
  });
});
