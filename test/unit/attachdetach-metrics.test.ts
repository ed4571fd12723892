/*
 * The attach/detach controller's gauge of the oldest VolumeAttachment waiting for its attacher (not
 * upstream): the wait starts at creation for an attach, at the deletionTimestamp for a detach.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import type { V1VolumeAttachment } from "@kubernetes/client-node";
import { Registry } from "prom-client";
import { AttachDetachMetrics } from "../../src/attachdetach/metrics.js";

function attachment(name: string, attacher: string, created: string, attached: boolean, deleted?: string) {
  const va: V1VolumeAttachment = {
    metadata: {
      name,
      creationTimestamp: new Date(created),
      ...(deleted !== undefined && { deletionTimestamp: new Date(deleted) }),
    },
    spec: { attacher, nodeName: "node1", source: { persistentVolumeName: name } },
    status: { attached },
  };
  return va;
}

test("the oldest VolumeAttachment pending attach or detach is reported per attacher", async () => {
  const registry = new Registry();
  const attachments = [
    attachment("attached", "a.csi", "2026-01-01T00:00:00Z", true),
    attachment("attaching-old", "a.csi", "2026-01-02T00:00:00Z", false),
    attachment("attaching-new", "a.csi", "2026-01-03T00:00:00Z", false),
    attachment("attaching-other", "b.csi", "2026-01-04T00:00:00Z", false),
    // Attached a year ago, detaching since its deletion.
    attachment("detaching", "a.csi", "2025-01-01T00:00:00Z", true, "2026-01-05T00:00:00Z"),
  ];
  const metrics = new AttachDetachMetrics(registry, {
    desiredVolumeSpecs: () => [],
    actualVolumeSpecs: () => [],
    podVolumes: () => [],
    findPluginBySpec: () => {
      throw new Error("no plugin");
    },
    volumeAttachments: () => attachments,
  });
  const gauge = registry.getSingleMetric("kvc_volumeattachment_oldest_pending_timestamp_seconds");
  assert.ok(gauge);
  const values = async () =>
    new Map((await gauge.get()).values.map((v) => [`${v.labels.attacher} ${v.labels.operation}`, v.value]));
  const seconds = (iso: string) => Date.parse(iso) / 1000;
  assert.deepEqual(
    await values(),
    new Map([
      ["a.csi attach", seconds("2026-01-02T00:00:00Z")],
      ["b.csi attach", seconds("2026-01-04T00:00:00Z")],
      ["a.csi detach", seconds("2026-01-05T00:00:00Z")],
    ]),
  );

  // Nothing pending: the series disappear, so an alert on them resolves.
  attachments.splice(1);
  assert.deepEqual(await values(), new Map());
  metrics.close();
});
