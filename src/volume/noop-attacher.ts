import type { Attacher, Detacher, VolumeSpec } from "./plugin.js";

/**
 * The controller side of plugins whose node attaches the volume itself (upstream iscsi and fc
 * attachers): attach and detach do nothing and every attachment is still there. The controller
 * registers them only so that the kubelet finds the volume in node.status.volumesAttached, and so
 * that the multi-attach rules of the attach/detach controller apply.
 */
export const NOOP_ATTACHER: Attacher & Detacher = {
  attach: () => Promise.resolve(""),
  volumesAreAttached: (specs: readonly VolumeSpec[]) =>
    Promise.resolve(new Map(specs.map((spec) => [spec, true]))),
  detach: () => Promise.resolve(),
};
