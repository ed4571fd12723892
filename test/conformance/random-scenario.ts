import fc from "fast-check";
import type { Ref, Scenario, Step } from "./runner.js";
import { node, pod, pv, pvc, sc } from "./scenarios.js";

/*
 * Random scenarios whose outcome is decided by the loops alone: no tie-break (PV sizes are distinct)
 * and no order (objects that could compete are never created in one step; the runner settles between
 * steps). Most claims can bind: each "targeted" claim asks for exactly one PV's size, class and access
 * modes (and maybe its label), so that PV is its unique best match, whatever the other claims do.
 */

const MODES = ["ReadWriteOnce", "ReadOnlyMany", "ReadWriteMany"];
const DRIVER = "random.csi.example.com";

const world = fc.record({
  pvs: fc.uniqueArray(
    fc.record({
      size: fc.integer({ min: 1, max: 64 }),
      cls: fc.constantFrom("", "gold", "silver"),
      modes: fc.subarray(MODES, { minLength: 1 }),
      label: fc.constantFrom(undefined, "a", "b"),
      reclaim: fc.constantFrom("Retain", "Delete", "Recycle"),
      /** A claim is made for it ... */
      claimed: fc.boolean(),
      /** ... selecting it by label (when it has one) ... */
      bySelector: fc.boolean(),
      /** ... and deleted again once bound (the PV is then reclaimed by its policy). */
      released: fc.boolean(),
      /** The PV itself is deleted at the end (bound: protection keeps it). */
      deleted: fc.boolean(),
    }),
    { minLength: 1, maxLength: 5, selector: (p) => p.size },
  ),
  /** Claims of a hostPath-provisioning class, deleted again or not. */
  provisioned: fc.array(fc.record({ retain: fc.boolean(), released: fc.boolean() }), { maxLength: 2 }),
  /** CSI volumes used by a pod on n1; with `move`, the pods are deleted and run on n2 instead. */
  csi: fc.array(fc.boolean(), { maxLength: 2 }),
  move: fc.boolean(),
  /** A claim with random wishes, created after the rest: it may bind or stay Pending. */
  stray: fc.option(
    fc.record({
      size: fc.integer({ min: 1, max: 64 }),
      cls: fc.constantFrom("", "gold", "silver"),
      modes: fc.subarray(MODES, { minLength: 1 }),
    }),
    { nil: undefined },
  ),
});

export function randomScenario(seed: number): Scenario {
  const [w] = fc.sample(world, { seed, numRuns: 1 });
  const { pvs, provisioned, csi, move, stray } = w!;
  const csiPVs = csi.map((rwx, i) =>
    pv(`csi-${i}`, {
      claim: `csi-claim-${i}`,
      modes: [rwx ? "ReadWriteMany" : "ReadWriteOnce"],
      csi: { driver: DRIVER, handle: `h${i}` },
    }),
  );
  const csiClaims = csi.map((rwx, i) =>
    pvc(`csi-claim-${i}`, { modes: [rwx ? "ReadWriteMany" : "ReadWriteOnce"], volume: `csi-${i}` }),
  );
  const podsOn = (n: string) => csi.map((_, i) => pod(`${n}-pod-${i}`, n, [`csi-claim-${i}`]));
  const claim = (i: number) => `claim-${i}`;
  const released: Ref[] = [
    ...pvs.flatMap((p, i) =>
      p.claimed && p.released ? [{ kind: "PersistentVolumeClaim", name: claim(i) }] : [],
    ),
    ...provisioned.flatMap((p, i) =>
      p.released ? [{ kind: "PersistentVolumeClaim", name: `provisioned-${i}` }] : [],
    ),
  ];
  const recycled = pvs.flatMap((p, i) =>
    p.claimed && p.released && p.reclaim === "Recycle" ? [`pv-${i}`] : [],
  );
  const deletedPVs = pvs.flatMap((p, i) =>
    p.deleted ? [{ kind: "PersistentVolume", name: `pv-${i}` }] : [],
  );

  const steps: Step[] = [
    {
      create: [
        sc("gold"),
        sc("silver"),
        sc("hp", { provisioner: "kubernetes.io/host-path" }),
        sc("hp-retain", { provisioner: "kubernetes.io/host-path", reclaim: "Retain" }),
        ...(csi.length ? [node("n1"), node("n2")] : []),
      ],
    },
    {
      create: [
        ...pvs.map((p, i) =>
          pv(`pv-${i}`, {
            size: `${p.size}Gi`,
            cls: p.cls,
            modes: p.modes,
            reclaim: p.reclaim,
            ...(p.label && { labels: { tier: p.label } }),
          }),
        ),
        ...csiPVs,
        ...pvs.flatMap((p, i) =>
          p.claimed
            ? [
                pvc(claim(i), {
                  size: `${p.size}Gi`,
                  cls: p.cls,
                  modes: p.modes,
                  ...(p.bySelector && p.label && { selector: { tier: p.label } }),
                }),
              ]
            : [],
        ),
        ...provisioned.map((p, i) =>
          pvc(`provisioned-${i}`, { size: `${i + 1}Gi`, cls: p.retain ? "hp-retain" : "hp" }),
        ),
        ...csiClaims,
      ],
    },
  ];
  // The external-attacher acts once every pod's attachment exists: none is left to come after it.
  const attachAllOn = (node: string): Step => ({
    attachAll: { pvs: csi.map((_, i) => `csi-${i}`), node },
  });
  if (csi.length) steps.push({ create: podsOn("n1") }, attachAllOn("n1"));
  const podsGone: Ref[] = move ? csi.map((_, i) => ({ kind: "Pod", name: `n1-pod-${i}` })) : [];
  if (released.length || podsGone.length) steps.push({ delete: [...released, ...podsGone] });
  // Plays the kubelet: each recycler pod runs to completion.
  for (const name of recycled)
    steps.push({
      podPhase: { name: `recycler-for-${name}`, namespace: "default", phase: "Succeeded" },
    });
  const later = [
    ...(move ? podsOn("n2") : []),
    ...(stray ? [pvc("stray", { size: `${stray.size}Gi`, cls: stray.cls, modes: stray.modes })] : []),
  ];
  if (later.length) steps.push({ create: later });
  if (move && csi.length) steps.push(attachAllOn("n2"));
  if (deletedPVs.length) steps.push({ delete: deletedPVs });
  return { name: `random seed ${seed}`, steps };
}
