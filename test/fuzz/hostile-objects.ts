/**
 * Hostile objects: schema-shaped arbitrary PVs, claims, classes, pods, nodes, VolumeAttachments and
 * CSIDrivers (huge label sets and selectors, 10k volumes in a pod, megabyte annotations, unicode,
 * extreme quantities, null where the API sends null) and the sync functions they are fed through.
 * Shared by the unit test (fixed seeds, no crash) and `npm run fuzz` (slowest sync per function).
 */
import type {
  V1CSIDriver,
  V1LabelSelector,
  V1Node,
  V1PersistentVolume,
  V1PersistentVolumeClaim,
  V1Pod,
  V1StorageClass,
  V1Volume,
  V1VolumeAttachment,
} from "@kubernetes/client-node";
import fc from "fast-check";
import { ActualStateOfWorld } from "../../src/attachdetach/cache/actual-state-of-world.js";
import { DesiredStateOfWorld } from "../../src/attachdetach/cache/desired-state-of-world.js";
import { DesiredStateOfWorldPopulator } from "../../src/attachdetach/populator/desired-state-of-world-populator.js";
import {
  populateActualStateOfWorld,
  populateDesiredStateOfWorld,
} from "../../src/attachdetach/state-recovery.js";
import { processPodVolumes, type VolumeLookups } from "../../src/attachdetach/util.js";
import { VolumeIndex } from "../../src/persistentvolume/volume-index.js";
import { podUsesPVCForDeletion, podUsesPVCForUnusedSince } from "../../src/protection/pod-usage.js";
import { isVolumeBound } from "../../src/protection/pv-protection-controller.js";
import { FakeClock } from "../../src/runtime/clock.js";
import { podPVCKeys } from "../../src/volume/common/common.js";
import { silentLogger } from "../../src/runtime/logger.js";
import { TEST_DRIVER, testPluginManager } from "../unit/attachdetach-fixtures.js";
import { Harness, NAMESPACE } from "../unit/pv-binder-framework.js";

/** The generated shapes are the API's, with undefined where JSON would omit a field. */
const shaped = <T>(arbitrary: fc.Arbitrary<unknown>): fc.Arbitrary<T> => arbitrary as fc.Arbitrary<T>;

const MEGABYTE = "x".repeat(1 << 20);
const NAMES = ["a", "b", "pv-1", "claim-1", "node-1", "", "ünï", "🙂"];

/** Mostly plausible strings, sometimes unicode, empty or a megabyte. */
const text = fc.oneof(
  { arbitrary: fc.constantFrom(...NAMES), weight: 6 },
  { arbitrary: fc.string({ unit: "grapheme", maxLength: 20 }), weight: 2 },
  { arbitrary: fc.constant(MEGABYTE), weight: 1 },
);
const name = fc.constantFrom(...NAMES);
const quantity = fc.oneof(
  fc.constantFrom("1Gi", "10Gi", "1", "0", "-1Gi", "1e30000000", "1e-30000000", "9Ei", "1e2147483647"),
  fc.constantFrom("1.5e-2147483648", "Ki", ".", "+", "bogus", "1 Gi", ""),
  fc.constant(`1${"0".repeat(100_000)}`),
  fc.string({ unit: fc.constantFrom(..."0123456789.+-eEKMGTPik"), maxLength: 12 }),
);
/** A label set of 0–3 entries, or thousands. */
const labels: fc.Arbitrary<Record<string, string> | undefined> = fc.oneof(
  fc.constant(undefined),
  fc.dictionary(text, text, { maxKeys: 3 }),
  fc
    .integer({ min: 1000, max: 10_000 })
    .map((n) => Object.fromEntries(Array.from({ length: n }, (_, i) => [`k${i}`, `v${i}`]))),
);
const selector: fc.Arbitrary<V1LabelSelector | undefined> = shaped(
  fc.oneof(
    fc.constant(undefined),
    fc.record(
      {
        matchLabels: labels,
        matchExpressions: fc.array(
          fc.record({
            key: text,
            operator: fc.constantFrom("In", "NotIn", "Exists", "DoesNotExist", "Gt", "bogus", ""),
            values: fc.oneof(
              fc.array(text, { maxLength: 3 }),
              fc.constant(Array.from({ length: 10_000 }, (_, i) => `v${i}`)),
            ),
          }),
          { maxLength: 3 },
        ),
      },
      { requiredKeys: [] },
    ),
  ),
);
const accessModes = fc.array(
  fc.constantFrom("ReadWriteOnce", "ReadOnlyMany", "ReadWriteMany", "ReadWriteOncePod", "Bogus"),
  {
    maxLength: 4,
  },
);
const metadata = (namespaced: boolean) =>
  fc.record(
    {
      name,
      namespace: namespaced ? fc.constantFrom(NAMESPACE, "other", "") : fc.constant(undefined),
      uid: fc.constantFrom("uid-1", "uid-2", ""),
      resourceVersion: fc.constantFrom("1", "", "999999999999999999999"),
      labels,
      annotations: fc.oneof(
        fc.constant(undefined),
        fc.dictionary(
          fc.constantFrom(
            "pv.kubernetes.io/bind-completed",
            "pv.kubernetes.io/bound-by-controller",
            "pv.kubernetes.io/provisioned-by",
            "volume.kubernetes.io/storage-provisioner",
            "volume.kubernetes.io/selected-node",
            "volume.beta.kubernetes.io/storage-class",
            "pv.kubernetes.io/migrated-to",
            "big",
          ),
          text,
          { maxKeys: 4 },
        ),
      ),
      finalizers: fc.array(text, { maxLength: 3 }),
      deletionTimestamp: fc.constantFrom(undefined, new Date(0)),
    },
    { requiredKeys: ["name"] },
  );

export const volumeArbitrary: fc.Arbitrary<V1PersistentVolume> = shaped(
  fc.record(
    {
      metadata: metadata(false),
      spec: fc.record(
        {
          capacity: fc.oneof(fc.constant(undefined), fc.record({ storage: quantity }, { requiredKeys: [] })),
          accessModes,
          storageClassName: fc.oneof(fc.constant(undefined), text),
          volumeMode: fc.constantFrom(undefined, "Filesystem", "Block", "Bogus"),
          persistentVolumeReclaimPolicy: fc.constantFrom(undefined, "Retain", "Delete", "Recycle", "Bogus"),
          volumeAttributesClassName: fc.constantFrom(undefined, "", "gold"),
          claimRef: fc.oneof(
            fc.constant(undefined),
            fc.record(
              { name, namespace: fc.constantFrom(NAMESPACE, ""), uid: fc.constantFrom("uid-1", "") },
              { requiredKeys: [] },
            ),
          ),
          csi: fc.oneof(
            fc.constant(undefined),
            fc.record({ driver: fc.constantFrom(TEST_DRIVER, "", "other"), volumeHandle: text }),
          ),
          nodeAffinity: fc.constantFrom(undefined, {
            required: {
              nodeSelectorTerms: [{ matchExpressions: [{ key: "k0", operator: "In", values: ["v0"] }] }],
            },
          }),
        },
        { requiredKeys: [] },
      ),
      status: fc.record(
        { phase: fc.constantFrom(undefined, "Pending", "Available", "Bound", "Released", "Failed", "Bogus") },
        { requiredKeys: [] },
      ),
    },
    { requiredKeys: ["metadata"] },
  ),
);

export const claimArbitrary: fc.Arbitrary<V1PersistentVolumeClaim> = shaped(
  fc.record(
    {
      metadata: metadata(true),
      spec: fc.record(
        {
          accessModes,
          resources: fc.record(
            { requests: fc.record({ storage: quantity }, { requiredKeys: [] }) },
            { requiredKeys: [] },
          ),
          selector,
          storageClassName: fc.oneof(fc.constant(undefined), text),
          volumeName: fc.oneof(fc.constant(undefined), name),
          volumeMode: fc.constantFrom(undefined, "Filesystem", "Block", "Bogus"),
          volumeAttributesClassName: fc.constantFrom(undefined, "", "gold"),
          dataSource: fc.constantFrom(undefined, {
            kind: "VolumeSnapshot",
            name: "s",
            apiGroup: "snapshot.storage.k8s.io",
          }),
        },
        { requiredKeys: [] },
      ),
      status: fc.record(
        {
          phase: fc.constantFrom(undefined, "Pending", "Bound", "Lost", "Bogus"),
          capacity: fc.option(fc.record({ storage: quantity }), { nil: undefined }),
        },
        { requiredKeys: [] },
      ),
    },
    { requiredKeys: ["metadata"] },
  ),
);

export const classArbitrary: fc.Arbitrary<V1StorageClass> = shaped(
  fc.record(
    {
      metadata: metadata(false),
      provisioner: fc.constantFrom("kubernetes.io/mock-volume", TEST_DRIVER, "", "🙂"),
      volumeBindingMode: fc.constantFrom(undefined, "Immediate", "WaitForFirstConsumer", "Bogus"),
      reclaimPolicy: fc.constantFrom(undefined, "Delete", "Retain", "Bogus"),
      parameters: fc.oneof(fc.constant(undefined), fc.dictionary(text, text, { maxKeys: 3 })),
      allowedTopologies: fc.constantFrom(undefined, []),
    },
    { requiredKeys: ["metadata", "provisioner"] },
  ),
);

const podVolume: fc.Arbitrary<V1Volume> = shaped(
  fc.oneof(
    fc.record({ name: text, persistentVolumeClaim: fc.record({ claimName: name, readOnly: fc.boolean() }) }),
    fc.record({ name: text, ephemeral: fc.constant({ volumeClaimTemplate: { spec: {} } }) }),
    fc.record({
      name: text,
      csi: fc.record({ driver: fc.constantFrom(TEST_DRIVER, ""), volumeAttributes: labels }),
    }),
    fc.record({ name: text, emptyDir: fc.constant({}) }),
  ),
);

export const podArbitrary: fc.Arbitrary<V1Pod> = shaped(
  fc.record(
    {
      metadata: metadata(true),
      spec: fc.record(
        {
          nodeName: fc.oneof(fc.constant(undefined), name),
          containers: fc.constant([]),
          volumes: fc.oneof(
            fc.array(podVolume, { maxLength: 4 }),
            // 10k volumes in a pod, all naming claims.
            fc.constant(
              Array.from({ length: 10_000 }, (_, i) => ({
                name: `v${i}`,
                persistentVolumeClaim: { claimName: `claim-${i % 50}` },
              })),
            ),
          ),
        },
        { requiredKeys: [] },
      ),
      status: fc.record(
        { phase: fc.constantFrom(undefined, "Pending", "Running", "Succeeded", "Failed", "Bogus") },
        { requiredKeys: [] },
      ),
    },
    { requiredKeys: ["metadata"] },
  ),
);

export const nodeArbitrary: fc.Arbitrary<V1Node> = shaped(
  fc.record(
    {
      metadata: metadata(false),
      status: fc.record(
        {
          volumesAttached: fc.array(fc.record({ name: text, devicePath: text }), { maxLength: 3 }),
          volumesInUse: fc.array(text, { maxLength: 3 }),
        },
        { requiredKeys: [] },
      ),
    },
    { requiredKeys: ["metadata"] },
  ),
);

export const attachmentArbitrary: fc.Arbitrary<V1VolumeAttachment> = shaped(
  fc.record({
    metadata: metadata(false),
    spec: fc.record({
      attacher: fc.constantFrom(TEST_DRIVER, "", "other"),
      nodeName: name,
      source: fc.record({ persistentVolumeName: fc.option(name, { nil: undefined }) }, { requiredKeys: [] }),
    }),
    status: fc.option(fc.record({ attached: fc.boolean() }), { nil: undefined }),
  }),
);

export const driverArbitrary: fc.Arbitrary<V1CSIDriver> = shaped(
  fc.record({
    metadata: metadata(false),
    spec: fc.record({ attachRequired: fc.option(fc.boolean(), { nil: undefined }) }, { requiredKeys: [] }),
  }),
);

export interface World {
  volumes: V1PersistentVolume[];
  claims: V1PersistentVolumeClaim[];
  classes: V1StorageClass[];
  pods: V1Pod[];
  nodes: V1Node[];
  attachments: V1VolumeAttachment[];
  drivers: V1CSIDriver[];
}

export const worldArbitrary: fc.Arbitrary<World> = fc.record({
  volumes: fc.array(volumeArbitrary, { maxLength: 4 }),
  claims: fc.array(claimArbitrary, { maxLength: 4 }),
  classes: fc.array(classArbitrary, { maxLength: 2 }),
  pods: fc.array(podArbitrary, { maxLength: 2 }),
  nodes: fc.array(nodeArbitrary, { maxLength: 2 }),
  attachments: fc.array(attachmentArbitrary, { maxLength: 2 }),
  drivers: fc.array(driverArbitrary, { maxLength: 2 }),
});

/** An exception no object may cause: a programming error, not a clean error or event. */
export function isCrash(error: unknown): boolean {
  return (
    !(error instanceof Error) ||
    error instanceof TypeError ||
    error instanceof RangeError ||
    error instanceof ReferenceError
  );
}

/** Calls `run(name, object, fn)` once per sync of every function the objects go through. */
export type Probe = (fn: string, subject: unknown, call: () => unknown) => Promise<void>;

export async function feedWorld(world: World, probe: Probe): Promise<void> {
  // PV binder: the unit framework's controller over a fake API.
  const h = new Harness(
    {
      name: "fuzz",
      initialVolumes: world.volumes,
      expectedVolumes: [],
      initialClaims: world.claims,
      expectedClaims: [],
      expectedEvents: [],
      test: () => Promise.resolve(),
    },
    { classes: world.classes, pods: world.pods, nodes: world.nodes },
  );
  for (const claim of world.claims)
    await probe("binder.syncClaim", claim, () => h.ctrl.syncClaim(structuredClone(claim)));
  for (const volume of world.volumes)
    await probe("binder.syncVolume", volume, () => h.ctrl.syncVolume(structuredClone(volume)));
  await probe("binder.operations", world, () => h.ctrl.waitForOperations());

  // The matcher.
  const index = new VolumeIndex();
  for (const volume of world.volumes) await probe("matcher.add", volume, () => index.add(volume));
  for (const claim of world.claims) {
    await probe("matcher.findBestMatch", claim, () => index.findBestMatch(claim, false));
    await probe("matcher.findBestMatch", claim, () => index.findBestMatch(claim, true));
  }

  // Attach/detach: pod processing, start-up recovery and the populator.
  const plugins = testPluginManager();
  const clock = new FakeClock();
  const dsw = new DesiredStateOfWorld(plugins);
  const asw = new ActualStateOfWorld(plugins, clock);
  const lookups: VolumeLookups = {
    getClaim: (ns, n) => world.claims.find((c) => c.metadata?.namespace === ns && c.metadata.name === n),
    getVolume: (n) => world.volumes.find((v) => v.metadata?.name === n),
  };
  for (const node of world.nodes) if (node.metadata?.name) dsw.addNode(node.metadata.name);
  const recovery = { dsw, asw, plugins, lookups, log: silentLogger };
  await probe("attachdetach.populateActualStateOfWorld", world, () => {
    populateActualStateOfWorld(world.nodes, world.attachments, recovery);
  });
  await probe("attachdetach.populateDesiredStateOfWorld", world, () => {
    populateDesiredStateOfWorld(
      world.pods,
      { get: (n) => world.nodes.find((x) => x.metadata?.name === n) },
      recovery,
    );
  });
  for (const pod of world.pods) {
    await probe("attachdetach.processPodVolumes", pod, () => {
      processPodVolumes(pod, true, recovery);
    });
    await probe("attachdetach.processPodVolumes", pod, () => {
      processPodVolumes(pod, false, recovery);
    });
  }
  const populator = new DesiredStateOfWorldPopulator({
    pods: {
      get: (k) => world.pods.find((p) => `${p.metadata?.namespace}/${p.metadata?.name}` === k),
      list: () => world.pods,
    },
    lookups,
    dsw,
    plugins,
    clock,
    log: silentLogger,
    loopPeriodMs: 60_000,
    listPodsRetryDurationMs: 180_000,
  });
  await probe("attachdetach.populator", world, () => {
    populator.populate();
  });

  // Protection: which pods use which claims, whether a PV is bound.
  for (const pod of world.pods) {
    await probe("protection.podPVCKeys", pod, () => podPVCKeys(pod));
    for (const claim of world.claims) {
      await probe("protection.podUsesPVC", pod, () => [
        podUsesPVCForDeletion(pod, claim),
        podUsesPVCForUnusedSince(pod, claim),
      ]);
    }
  }
  for (const volume of world.volumes)
    await probe("protection.isVolumeBound", volume, () => isVolumeBound(volume));
}
