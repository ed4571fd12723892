import assert from "node:assert/strict";
import { describe, test } from "node:test";
import type { V1PersistentVolumeClaim, V1VolumeAttachment } from "@kubernetes/client-node";
import { DEMO, DEMO_NODE, isSettled, renderDemoTable } from "../../src/dev/demo.js";

const bound = (c: V1PersistentVolumeClaim, volumeName: string): V1PersistentVolumeClaim => ({
  ...c,
  spec: { ...c.spec, volumeName },
  status: { phase: "Bound" },
});

const va = (pv: string, attached: boolean): V1VolumeAttachment => ({
  metadata: { name: `csi-${pv.padEnd(64, "0")}` },
  spec: { attacher: "demo.csi.kvc.dev", nodeName: DEMO_NODE, source: { persistentVolumeName: pv } },
  status: { attached },
});

describe("kvc dev demo table", () => {
  test("an empty cluster shows every claim pending and no attachment", () => {
    const table = renderDemoTable({ claims: [], attachments: [] });
    for (const c of DEMO.claims) assert.match(table, new RegExp(`^${c.metadata?.name}\\s+\\S+\\s+-$`, "m"));
    assert.match(table, /\(none yet\)/);
    assert.match(table, /^0\/7 claims Bound, 0\/2 volumes attached$/m);
    assert.equal(isSettled({ claims: [], attachments: [] }), false);
  });

  test("settles only when every claim is Bound and every pod's volume attached", () => {
    const claims = DEMO.claims.map((c, i) => bound(c, `pv-${i}`));
    const half = { claims, attachments: [va("demo-csi-1", true), va("demo-csi-2", false)] };
    assert.equal(isSettled(half), false);
    assert.match(renderDemoTable(half), /^7\/7 claims Bound, 1\/2 volumes attached$/m);
    const done = { claims, attachments: [va("demo-csi-2", true), va("demo-csi-1", true)] };
    assert.equal(isSettled(done), true);
    const table = renderDemoTable(done);
    assert.match(table, /7\/7 claims Bound, 2\/2 volumes attached — settled$/);
    assert.ok(table.indexOf("demo-csi-1") < table.indexOf("demo-csi-2"), "attachments sorted by volume");
    assert.match(table, /^static-small\s+demo-static\s+Bound\s+pv-0$/m);
  });
});
