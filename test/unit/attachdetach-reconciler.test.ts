import assert from "node:assert/strict";
import { describe, test } from "node:test";
import type { V1Node } from "@kubernetes/client-node";
import { DEFAULT_TIMER_CONFIG } from "../../src/attachdetach/attach-detach-controller.js";
import { ActualStateOfWorld, type AttachState } from "../../src/attachdetach/cache/actual-state-of-world.js";
import { DesiredStateOfWorld } from "../../src/attachdetach/cache/desired-state-of-world.js";
import { OperationExecutor } from "../../src/attachdetach/operation-executor.js";
import {
  nodeHealthFrom,
  passDue,
  Reconciler,
  TAINT_NODE_OUT_OF_SERVICE,
  type ForceDetachReason,
} from "../../src/attachdetach/reconciler.js";
import { APINodeStatusUpdater } from "../../src/attachdetach/statusupdater/node-status-updater.js";
import { FakeClock } from "../../src/runtime/clock.js";
import type { EventSubject } from "../../src/runtime/events/reference.js";
import { silentLogger, type LogSink } from "../../src/runtime/logger.js";
import {
  specFromPersistentVolume,
  type AttachableVolumePlugin,
  type VolumeSpec,
} from "../../src/volume/plugin.js";
import { VolumePluginManager } from "../../src/volume/plugin-manager.js";
import { fakeCsiPlugin, newPod, testUniqueName } from "./attachdetach-fixtures.js";

// The special nodes of upstream's fake volume plugin (pkg/volume/testing).
/** Attach fails the first time but the volume ends up attached; the retry succeeds. */
const UNCERTAIN_ATTACH_NODE = "uncertain-attach-node";
/** Attach always fails with a timeout, though the volume ends up attached. */
const TIMEOUT_ATTACH_NODE = "timeout-attach-node";
/** Detach always fails. */
const FAIL_DETACH_NODE = "fail-detach-node";
/** A volume attached here may be attached to other nodes too. */
const MULTI_ATTACH_NODE = "multi-attach-node";

/** upstream's reconciler test timings: a 10 ms loop and a 50 ms wait for unmount. */
const LOOP_MS = 10;
const MAX_WAIT_MS = 50;

/** upstream FakeVolume's attach bookkeeping, counting the calls the reconciler tests assert on. */
function fakeAttachablePlugin() {
  const attached = new Map<string, Set<string>>();
  const calls = { newAttacher: 0, newDetacher: 0, attach: 0, detach: 0 };
  const base = fakeCsiPlugin();
  const plugin: AttachableVolumePlugin = {
    ...base,
    newAttacher() {
      calls.newAttacher++;
      return {
        attach(spec, nodeName) {
          calls.attach++;
          const name = base.getVolumeName(spec);
          const nodes = attached.get(name);
          if (nodes) {
            if (nodeName === UNCERTAIN_ATTACH_NODE) return Promise.resolve("/dev/vdb-test");
            if (nodeName === TIMEOUT_ATTACH_NODE)
              return Promise.reject(new Error(`timed out to attach volume "${name}" to node "${nodeName}"`));
            if (nodes.has(nodeName) || nodes.has(MULTI_ATTACH_NODE) || nodeName === MULTI_ATTACH_NODE) {
              nodes.add(nodeName);
              return Promise.resolve("/dev/vdb-test");
            }
            return Promise.reject(
              new Error(`volume "${name}" trying to attach to node "${nodeName}" is already attached`),
            );
          }
          attached.set(name, new Set([nodeName]));
          if (nodeName === UNCERTAIN_ATTACH_NODE || nodeName === TIMEOUT_ATTACH_NODE) {
            return Promise.reject(new Error(`timed out to attach volume "${name}" to node "${nodeName}"`));
          }
          return Promise.resolve("/dev/vdb-test");
        },
        volumesAreAttached(specs, nodeName) {
          return Promise.resolve(
            new Map(specs.map((s) => [s, attached.get(base.getVolumeName(s))?.has(nodeName) ?? false])),
          );
        },
      };
    },
    newDetacher() {
      calls.newDetacher++;
      return {
        detach(name, nodeName) {
          calls.detach++;
          if (nodeName === FAIL_DETACH_NODE)
            return Promise.reject(new Error(`fail to detach volume "${name}" to node "${nodeName}"`));
          const nodes = attached.get(name);
          nodes?.delete(nodeName);
          if (nodes?.size === 0) attached.delete(name);
          return Promise.resolve();
        },
      };
    },
  };
  return { plugin, calls, attached };
}

type AccessMode = "ReadWriteOnce" | "ReadWriteMany";

interface HarnessOptions {
  /** The operation executor's logger. */
  log?: LogSink;
  maxWaitForUnmountMs?: number;
  disableForceDetachOnTimeout?: boolean;
  syncPeriodMs?: number;
  /**
   * updateNodeStatuses takes the reports it writes off the ASW, as the real updater does (a failure
   * flags them again); without it (upstream's fake) the flags stay for the test to read, so the
   * world never goes idle and every tick passes.
   */
  writeStatuses?: boolean;
}

function harness(options: HarnessOptions = {}) {
  const clock = new FakeClock();
  const fake = fakeAttachablePlugin();
  const plugins = new VolumePluginManager(silentLogger);
  plugins.register([fake.plugin]);
  const dsw = new DesiredStateOfWorld(plugins);
  const asw = new ActualStateOfWorld(plugins, clock);
  const nodes = new Map<string, V1Node>();
  const events: string[] = [];
  const sink = {
    event(subject: EventSubject, type: string, reason: string, message: string) {
      events.push(`${type} ${reason} ${message}`);
      assert.equal("kind" in subject ? subject.kind : undefined, "Pod");
    },
  };
  /**
   * `during` runs inside updateNodeStatusForNode: what happens while the patch is in flight; `passes`
   * counts updateNodeStatuses, which every pass calls.
   */
  const status = {
    fail: false,
    forNode: [] as string[],
    during: undefined as (() => void) | undefined,
    passes: 0,
  };
  const forced: Record<ForceDetachReason, number> = { timeout: 0, "out-of-service": 0 };
  const executor = new OperationExecutor({
    plugins,
    asw,
    nodes: { getNode: (name) => Promise.resolve(nodes.get(name)) },
    events: sink,
    clock,
    log: options.log ?? silentLogger,
  });
  const reconciler = new Reconciler({
    dsw,
    asw,
    executor,
    nodeStatusUpdater: {
      updateNodeStatusForNode(nodeName) {
        status.forNode.push(nodeName);
        status.during?.();
        return status.fail
          ? Promise.reject(new Error("fake error on update node status"))
          : Promise.resolve();
      },
      updateNodeStatuses: () => {
        status.passes++;
        if (!options.writeStatuses) {
          return status.fail ? Promise.reject(new Error("fake error")) : Promise.resolve();
        }
        const written = [...asw.getVolumesToReportAttached().keys()];
        if (!status.fail || written.length === 0) return Promise.resolve();
        for (const n of written) asw.setNodeStatusUpdateNeeded(n);
        return Promise.reject(new Error("fake error"));
      },
    },
    nodes: nodeHealthFrom((name) => nodes.get(name)),
    events: sink,
    clock,
    log: silentLogger,
    metrics: {
      forcedDetach(reason) {
        forced[reason]++;
      },
    },
    maxWaitForUnmountMs: options.maxWaitForUnmountMs ?? MAX_WAIT_MS,
    ...(options.syncPeriodMs === undefined ? {} : { syncPeriodMs: options.syncPeriodMs }),
    ...(options.disableForceDetachOnTimeout === undefined
      ? {}
      : { disableForceDetachOnTimeout: options.disableForceDetachOnTimeout }),
  });
  /**
   * Ticks every LOOP_MS for `ms` of fake time, as run() does (a pass only when one is due), each
   * followed by the operations it started.
   */
  const run = async (ms: number) => {
    for (let t = 0; t < ms; t += LOOP_MS) {
      await reconciler.tick();
      await executor.waitForCompletion();
      clock.advance(LOOP_MS);
    }
  };
  return { clock, fake, dsw, asw, nodes, events, status, forced, executor, reconciler, run };
}

type Harness = ReturnType<typeof harness>;

const VOLUME = testUniqueName("volume-name");

function volumeSpec(accessModes: AccessMode[] = ["ReadWriteOnce"]): VolumeSpec {
  return specFromPersistentVolume({
    metadata: { name: "volume-name" },
    spec: { accessModes, csi: { driver: "test.csi.example.com", volumeHandle: "volume-name" } },
  });
}

function node(
  name: string,
  { ready, outOfService = false }: { ready?: boolean; outOfService?: boolean },
): V1Node {
  return {
    metadata: { name },
    ...(outOfService ? { spec: { taints: [{ key: TAINT_NODE_OUT_OF_SERVICE, effect: "NoExecute" }] } } : {}),
    ...(ready === undefined
      ? {}
      : { status: { conditions: [{ type: "Ready", status: ready ? "True" : "False" }] } }),
  };
}

/** Whether the volume is in the node's status report (not consuming the update flag). */
function reported(h: Harness, nodeName: string): boolean {
  return h.asw.getNodesToUpdateStatusFor().get(nodeName)?.volumesToReportAsAttached.has(VOLUME) ?? false;
}

/** upstream verifyVolumeNoStatusUpdateNeeded: reads (and clears) the pending status updates. */
function statusUpdateNeeded(h: Harness, nodeName: string): boolean {
  return (
    h.asw
      .getVolumesToReportAttached()
      .get(nodeName)
      ?.some((v) => v.name === VOLUME) ?? false
  );
}

type Step =
  | { addNode: string }
  | { addPod: string; on: string; accessModes?: AccessMode[] }
  | { deletePod: string; on: string }
  /** The node reports no volume in use (status.volumesInUse empty). */
  | { unmount: string }
  | { setNode: V1Node }
  | { statusFails: boolean }
  /** Run the loop for this much fake time. */
  | { runMs: number }
  /** Let this much fake time pass without a loop (a long wait in few steps). */
  | { advanceMs: number }
  | { expect: Expectation };

interface Expectation {
  calls?: Partial<ReturnType<typeof fakeAttachablePlugin>["calls"]>;
  state?: Record<string, AttachState>;
  reported?: Record<string, boolean>;
  statusUpdateNeeded?: Record<string, boolean>;
  forced?: Partial<Record<ForceDetachReason, number>>;
  multiAttachErrorReported?: Record<string, boolean>;
}

async function play(h: Harness, steps: readonly Step[]): Promise<void> {
  for (const [i, step] of steps.entries()) {
    const at = `step ${i}: ${JSON.stringify(step)}`;
    if ("addNode" in step) h.dsw.addNode(step.addNode);
    else if ("addPod" in step) {
      h.dsw.addNode(step.on);
      const name = h.dsw.addPod(step.addPod, newPod(step.addPod), volumeSpec(step.accessModes), step.on);
      assert.equal(name, VOLUME);
    } else if ("deletePod" in step) {
      h.dsw.deletePod(step.deletePod, VOLUME, step.on);
    } else if ("unmount" in step) h.asw.setVolumesMountedByNode([], step.unmount);
    else if ("setNode" in step) h.nodes.set(step.setNode.metadata?.name ?? "", step.setNode);
    else if ("statusFails" in step) h.status.fail = step.statusFails;
    else if ("runMs" in step) await h.run(step.runMs);
    else if ("advanceMs" in step) h.clock.advance(step.advanceMs);
    else {
      const e = step.expect;
      if (e.calls) {
        const actual = Object.fromEntries(
          Object.keys(e.calls).map((k) => [k, h.fake.calls[k as keyof typeof h.fake.calls]]),
        );
        assert.deepEqual(actual, e.calls, at);
      }
      for (const [n, state] of Object.entries(e.state ?? {}))
        assert.equal(h.asw.getAttachState(VOLUME, n), state, `${at} ${n}`);
      for (const [n, want] of Object.entries(e.reported ?? {}))
        assert.equal(reported(h, n), want, `${at} ${n}`);
      for (const [n, want] of Object.entries(e.statusUpdateNeeded ?? {}))
        assert.equal(statusUpdateNeeded(h, n), want, `${at} ${n}`);
      for (const [reason, count] of Object.entries(e.forced ?? {}))
        assert.equal(h.forced[reason as ForceDetachReason], count, `${at} ${reason}`);
      for (const [n, want] of Object.entries(e.multiAttachErrorReported ?? {})) {
        const entry = h.dsw.getVolumesToAttach().find((v) => v.nodeName === n);
        assert.equal(entry?.multiAttachErrorReported, want, `${at} ${n}`);
      }
    }
  }
}

interface Case {
  name: string;
  options?: HarnessOptions;
  steps: Step[];
}

const attachedOnce: Step = { expect: { calls: { attach: 1, detach: 0, newDetacher: 0 } } };

/** reconciler_test.go (upstream v1.37.2), rows 1–15 of attach-detach-cases.md. */
const cases: Case[] = [
  {
    name: "1 Test_Run_Positive_DoNothing",
    steps: [{ runMs: 100 }, { expect: { calls: { newAttacher: 0, newDetacher: 0, attach: 0, detach: 0 } } }],
  },
  {
    name: "2 Test_Run_Positive_OneDesiredVolumeAttach",
    steps: [{ addPod: "pod-uid", on: "node-name" }, { runMs: 100 }, attachedOnce],
  },
  {
    name: "3 Test_Run_Positive_OneDesiredVolumeAttachThenDetachWithUnmountedVolume",
    options: { maxWaitForUnmountMs: 4_200_000 },
    steps: [
      { addPod: "pod-uid", on: "node-name" },
      { runMs: 100 },
      attachedOnce,
      { deletePod: "pod-uid", on: "node-name" },
      { unmount: "node-name" },
      { runMs: 100 },
      {
        expect: {
          calls: { attach: 1, detach: 1 },
          state: { "node-name": "Detached" },
          forced: { timeout: 0 },
        },
      },
    ],
  },
  {
    name: "4 Test_Run_Positive_OneDesiredVolumeAttachThenDetachWithMountedVolume: unknown node, force detach on timeout",
    steps: [
      { addPod: "pod-uid", on: "node-name" },
      { runMs: 100 },
      attachedOnce,
      { deletePod: "pod-uid", on: "node-name" },
      { runMs: MAX_WAIT_MS },
      { expect: { calls: { detach: 0 } } },
      { runMs: 2 * LOOP_MS },
      { expect: { calls: { attach: 1, detach: 1 }, forced: { timeout: 1, "out-of-service": 0 } } },
    ],
  },
  {
    name: "5 Test_Run_Negative_OneDesiredVolumeAttachThenDetachWithUnmountedVolumeUpdateStatusFail",
    steps: [
      { statusFails: true },
      { addPod: "pod-uid", on: "node-name" },
      { runMs: 100 },
      attachedOnce,
      { deletePod: "pod-uid", on: "node-name" },
      { unmount: "node-name" },
      { runMs: 500 },
      { expect: { calls: { attach: 1, detach: 0, newDetacher: 0 }, reported: { "node-name": true } } },
    ],
  },
  {
    name: "6 Test_Run_OneVolumeAttachAndDetachMultipleNodesWithReadWriteMany",
    steps: [
      { addPod: "pod-uid1", on: "node-name1", accessModes: ["ReadWriteMany"] },
      { addPod: "pod-uid2", on: MULTI_ATTACH_NODE, accessModes: ["ReadWriteMany"] },
      { runMs: 100 },
      {
        expect: {
          calls: { attach: 2, detach: 0 },
          state: { "node-name1": "Attached", [MULTI_ATTACH_NODE]: "Attached" },
        },
      },
      { deletePod: "pod-uid1", on: "node-name1" },
      { runMs: 200 },
      { expect: { calls: { attach: 2, detach: 1 }, state: { "node-name1": "Detached" } } },
      { deletePod: "pod-uid2", on: MULTI_ATTACH_NODE },
      { runMs: 200 },
      { expect: { calls: { attach: 2, detach: 2 }, state: { [MULTI_ATTACH_NODE]: "Detached" } } },
    ],
  },
  {
    name: "7 Test_Run_OneVolumeAttachAndDetachMultipleNodesWithReadWriteOnce",
    steps: [
      { addPod: "pod-uid1", on: "node-name1" },
      { addPod: "pod-uid2", on: "node-name2" },
      { runMs: 100 },
      {
        expect: {
          calls: { attach: 1, detach: 0 },
          state: { "node-name1": "Attached", "node-name2": "Detached" },
          multiAttachErrorReported: { "node-name2": true },
        },
      },
      { deletePod: "pod-uid1", on: "node-name1" },
      { runMs: 200 },
      {
        expect: {
          calls: { attach: 2, detach: 1 },
          state: { "node-name1": "Detached", "node-name2": "Attached" },
        },
      },
    ],
  },
  {
    name: "8 Test_Run_OneVolumeAttachAndDetachUncertainNodesWithReadWriteOnce",
    steps: [
      { addNode: "node-name2" },
      { addPod: "pod-uid1", on: UNCERTAIN_ATTACH_NODE },
      { runMs: LOOP_MS },
      {
        expect: {
          state: { [UNCERTAIN_ATTACH_NODE]: "Uncertain" },
          reported: { [UNCERTAIN_ATTACH_NODE]: false },
        },
      },
      { runMs: 1000 }, // the retry after the 500 ms backoff succeeds
      {
        expect: {
          state: { [UNCERTAIN_ATTACH_NODE]: "Attached" },
          reported: { [UNCERTAIN_ATTACH_NODE]: true },
        },
      },
      { unmount: UNCERTAIN_ATTACH_NODE },
      { deletePod: "pod-uid1", on: UNCERTAIN_ATTACH_NODE },
      { runMs: 100 },
      { expect: { state: { [UNCERTAIN_ATTACH_NODE]: "Detached" } } },
      { addPod: "pod-uid2", on: "node-name2" },
      { runMs: 100 },
      { expect: { state: { "node-name2": "Attached" } } },
    ],
  },
  {
    name: "9 Test_Run_OneVolumeAttachAndDetachTimeoutNodesWithReadWriteOnce",
    steps: [
      { addNode: "node-name2" },
      { addPod: "pod-uid1", on: TIMEOUT_ATTACH_NODE },
      { runMs: 1000 },
      {
        expect: { state: { [TIMEOUT_ATTACH_NODE]: "Uncertain" }, reported: { [TIMEOUT_ATTACH_NODE]: false } },
      },
      { unmount: TIMEOUT_ATTACH_NODE },
      { deletePod: "pod-uid1", on: TIMEOUT_ATTACH_NODE },
      { runMs: 5000 }, // the detach waits out the failed attach's backoff
      { expect: { state: { [TIMEOUT_ATTACH_NODE]: "Detached" } } },
      { addPod: "pod-uid2", on: "node-name2" },
      { runMs: 100 },
      { expect: { state: { "node-name2": "Attached" } } },
    ],
  },
  {
    name: "10 Test_Run_UpdateNodeStatusFailBeforeOneVolumeDetachNodeWithReadWriteOnce",
    steps: [
      { addPod: "pod-uid1", on: "node-name1" },
      { runMs: LOOP_MS },
      { expect: { state: { "node-name1": "Attached" }, reported: { "node-name1": true } } },
      { deletePod: "pod-uid1", on: "node-name1" },
      { statusFails: true },
      { runMs: 100 + LOOP_MS },
      {
        expect: {
          calls: { detach: 0 },
          state: { "node-name1": "Attached" },
          reported: { "node-name1": true },
        },
      },
    ],
  },
  {
    name: "11 Test_Run_OneVolumeDetachFailNodeWithReadWriteOnce",
    steps: [
      { addNode: "node-name2" },
      { addPod: "pod-uid1", on: FAIL_DETACH_NODE },
      { runMs: 100 },
      { expect: { state: { [FAIL_DETACH_NODE]: "Attached" }, reported: { [FAIL_DETACH_NODE]: true } } },
      { deletePod: "pod-uid1", on: FAIL_DETACH_NODE },
      { runMs: 100 },
      { expect: { state: { [FAIL_DETACH_NODE]: "Uncertain" }, reported: { [FAIL_DETACH_NODE]: false } } },
      { addPod: "pod-uid2", on: FAIL_DETACH_NODE },
      { runMs: 1000 },
      {
        expect: {
          state: { [FAIL_DETACH_NODE]: "Attached" },
          statusUpdateNeeded: { [FAIL_DETACH_NODE]: true },
        },
      },
      { addPod: "pod-uid3", on: "node-name2" },
      { runMs: 100 },
      {
        expect: {
          state: { [FAIL_DETACH_NODE]: "Attached", "node-name2": "Detached" },
          statusUpdateNeeded: { [FAIL_DETACH_NODE]: false, "node-name2": false },
        },
      },
    ],
  },
  {
    name: "12 Test_Run_OneVolumeDetachOnOutOfServiceTaintedNode",
    options: { maxWaitForUnmountMs: 4_200_000 },
    steps: [
      { setNode: node("worker-0", { outOfService: true }) },
      { addPod: "pod-uid1", on: "worker-0" },
      { runMs: 100 },
      attachedOnce,
      { deletePod: "pod-uid1", on: "worker-0" },
      { runMs: LOOP_MS },
      { expect: { calls: { attach: 1, detach: 1 }, forced: { "out-of-service": 1, timeout: 0 } } },
    ],
  },
  {
    name: "13 Test_Run_OneVolumeDetachOnNoOutOfServiceTaintedNode",
    options: { maxWaitForUnmountMs: 4_200_000 },
    steps: [
      { setNode: node("worker-0", {}) },
      { addPod: "pod-uid1", on: "worker-0" },
      { runMs: 100 },
      attachedOnce,
      { deletePod: "pod-uid1", on: "worker-0" },
      { runMs: 1000 },
      { expect: { calls: { attach: 1, detach: 0, newDetacher: 0 } } },
    ],
  },
  {
    name: "14 Test_Run_OneVolumeDetachOnUnhealthyNode",
    steps: [
      { setNode: node("worker-0", { ready: true }) },
      { addPod: "pod-uid1", on: "worker-0" },
      { runMs: 100 },
      attachedOnce,
      { deletePod: "pod-uid1", on: "worker-0" },
      { runMs: 5 * MAX_WAIT_MS },
      { expect: { calls: { attach: 1, detach: 0, newDetacher: 0 } } },
      { setNode: node("worker-0", { ready: false }) },
      { runMs: LOOP_MS },
      { expect: { calls: { attach: 1, detach: 1 }, forced: { timeout: 1 } } },
    ],
  },
  {
    name: "15 Test_Run_OneVolumeDetachOnUnhealthyNodeWithForceDetachOnUnmountDisabled",
    options: { disableForceDetachOnTimeout: true },
    steps: [
      { setNode: node("worker-0", { ready: true }) },
      { addPod: "pod-uid1", on: "worker-0" },
      { runMs: 100 },
      attachedOnce,
      { deletePod: "pod-uid1", on: "worker-0" },
      { runMs: 5 * MAX_WAIT_MS },
      { expect: { calls: { detach: 0 } } },
      { setNode: node("worker-0", { ready: false }) },
      { runMs: 5 * MAX_WAIT_MS },
      {
        expect: {
          calls: { attach: 1, detach: 0, newDetacher: 0 },
          forced: { timeout: 0, "out-of-service": 0 },
        },
      },
      { setNode: node("worker-0", { ready: false, outOfService: true }) },
      { runMs: LOOP_MS },
      { expect: { calls: { attach: 1, detach: 1 }, forced: { timeout: 0, "out-of-service": 1 } } },
    ],
  },
];

describe("attach/detach reconciler: the max-wait-for-unmount timer", () => {
  const mountedOnUnknownNode: Step[] = [
    { addPod: "pod-uid", on: "node-name" },
    { runMs: 100 },
    attachedOnce,
    { deletePod: "pod-uid", on: "node-name" },
  ];

  for (const writeStatuses of [false, true]) {
    const idle = writeStatuses ? ", the idle ticks skipped" : "";
    test(`the controller's default: a mounted volume on an unknown node is force-detached after 6 minutes${idle}`, () =>
      play(harness({ maxWaitForUnmountMs: DEFAULT_TIMER_CONFIG.maxWaitForUnmountMs, writeStatuses }), [
        ...mountedOnUnknownNode,
        { runMs: LOOP_MS }, // the detach request time is set
        { advanceMs: 6 * 60_000 - 1000 },
        { runMs: LOOP_MS },
        { expect: { calls: { detach: 0 }, forced: { timeout: 0 } } },
        { advanceMs: 1000 },
        { runMs: 2 * LOOP_MS },
        { expect: { calls: { detach: 1 }, forced: { timeout: 1 } } },
      ]));

    test(`a volume wanted again restarts the timer: the next detach waits the whole time again${idle}`, () =>
      play(harness({ writeStatuses }), [
        ...mountedOnUnknownNode,
        { runMs: 3 * LOOP_MS },
        { addPod: "pod-uid", on: "node-name" },
        { runMs: 3 * LOOP_MS }, // more than MAX_WAIT_MS since the first detach request
        { deletePod: "pod-uid", on: "node-name" },
        { runMs: 3 * LOOP_MS },
        { expect: { calls: { attach: 1, detach: 0 }, forced: { timeout: 0 } } },
        { runMs: MAX_WAIT_MS },
        { expect: { calls: { attach: 1, detach: 1 }, forced: { timeout: 1 } } },
      ]));
  }
});

describe("attach/detach reconciler (upstream reconciler_test.go)", () => {
  for (const c of cases) {
    test(c.name, () => play(harness(c.options), c.steps));
  }
});

describe("attach/detach reconciler: Multi-Attach events (upstream Test_ReportWaitingOnDetach)", () => {
  const prefix = 'Warning FailedAttachVolume Waiting for detach for volume "volume-name"';
  const table: { name: string; holders: [string, string][]; want: string }[] = [
    {
      name: "no pods use the volume",
      holders: [],
      want: `${prefix} Volume is already exclusively attached to one node, waiting on detach before it can be attached to another node`,
    },
    {
      name: "pods in the same namespace",
      holders: [["node2", "ns1/pod2"]],
      want: `${prefix} Volume is already used by pod(s) pod2`,
    },
    {
      name: "pods in another namespace",
      holders: [["node2", "ns2/pod2"]],
      want: `${prefix} Volume is already used by 1 pod(s) in different namespaces`,
    },
    {
      name: "pods in the same and another namespace",
      holders: [
        ["node2", "ns2/pod2"],
        ["node3", "ns1/pod3"],
      ],
      want: `${prefix} Volume is already used by pod(s) pod3 and 1 pod(s) in different namespaces`,
    },
  ];
  for (const { name, holders, want } of table) {
    test(name, async () => {
      // A long wait for unmount: the attachment elsewhere stays while the events are checked.
      const h = harness({ maxWaitForUnmountMs: 4_200_000 });
      const addPod = (nodeName: string, qualified: string) => {
        const [namespace = "", podName = ""] = qualified.split("/");
        h.dsw.addNode(nodeName);
        const uid = `${nodeName}-${qualified}`;
        h.dsw.addPod(uid, { metadata: { uid, name: podName, namespace } }, volumeSpec(), nodeName);
      };
      addPod("node1", "ns1/pod1");
      for (const [nodeName, pod] of holders) addPod(nodeName, pod);
      // Attached to the holders' nodes, or to a node no pod wants any more (as upstream's test passes them).
      for (const attachedTo of holders.length > 0 ? holders.map(([n]) => n) : ["node0"]) {
        h.asw.markVolumeAsAttached(VOLUME, volumeSpec(), attachedTo, "");
      }
      await h.run(LOOP_MS);
      assert.deepEqual(h.events, [want]);
      await h.run(100);
      assert.deepEqual(h.events, [want], "reported once");
    });
  }
});

describe("attach/detach reconciler: Uncertain attachments hold a single-node volume (stricter than upstream)", () => {
  const waiting =
    'Warning FailedAttachVolume Waiting for detach for volume "volume-name" Volume is already exclusively attached to one node, waiting on detach before it can be attached to another node';

  /** node1 has the volume attached, its pod gone and (per the informer) unmounted; pod2 waits on node2. */
  async function movedFromNode1(h: Harness): Promise<void> {
    h.dsw.addNode("node1");
    h.dsw.addPod("pod-uid1", newPod("pod-uid1"), volumeSpec(), "node1");
    await h.run(LOOP_MS);
    assert.equal(h.asw.getAttachState(VOLUME, "node1"), "Attached");
    h.dsw.deletePod("pod-uid1", VOLUME, "node1");
    h.asw.setVolumesMountedByNode([], "node1");
    h.dsw.addNode("node2");
    h.dsw.addPod("pod-uid2", newPod("pod-uid2"), volumeSpec(), "node2");
  }

  test("a failed detach leaves node1 Uncertain: no attach to node2 until the retried detach succeeds", async () => {
    const log = recordingLog();
    const h = harness({ maxWaitForUnmountMs: 4_200_000, log });
    await movedFromNode1(h);
    // The apiserver's node still lists the volume in use: the safe-to-detach check fails the detach.
    h.nodes.set("node1", { metadata: { name: "node1" }, status: { volumesInUse: [VOLUME] } });
    await h.run(200); // within the failed detach's 500 ms backoff
    assert.equal(h.asw.getAttachState(VOLUME, "node1"), "Uncertain");
    assert.equal(h.fake.calls.attach, 1, "no attach to node2 while node1 may still have it");
    assert.equal(h.asw.getAttachState(VOLUME, "node2"), "Detached");
    assert.deepEqual(h.events.slice(1), [waiting]);
    // The failure's log names the node it was detached from (the operation key is volume-wide).
    const failed = log.lines.find((l) => l.msg.startsWith("Operation failed"));
    assert.equal(failed?.obj.node, "node1");
    assert.equal(failed.obj.operation, "volume_detach");

    h.nodes.set("node1", { metadata: { name: "node1" }, status: { volumesInUse: [] } });
    await h.run(1000);
    assert.equal(h.fake.calls.detach, 1);
    assert.equal(h.asw.getAttachState(VOLUME, "node1"), "Detached");
    assert.equal(h.asw.getAttachState(VOLUME, "node2"), "Attached");
    assert.deepEqual([...(h.fake.attached.get(VOLUME.slice("kubernetes.io/csi/".length)) ?? [])], ["node2"]);
  });

  test("an Uncertain attachment from a timed-out attach does not block attaching there again", async () => {
    const h = harness();
    h.dsw.addNode("node2");
    h.dsw.addNode(UNCERTAIN_ATTACH_NODE);
    h.dsw.addPod("pod-uid1", newPod("pod-uid1"), volumeSpec(), UNCERTAIN_ATTACH_NODE);
    await h.run(LOOP_MS);
    assert.equal(h.asw.getAttachState(VOLUME, UNCERTAIN_ATTACH_NODE), "Uncertain");
    // A pod elsewhere waits for it rather than attaching beside the Uncertain one.
    h.dsw.addPod("pod-uid2", newPod("pod-uid2"), volumeSpec(), "node2");
    await h.run(1000);
    assert.equal(h.asw.getAttachState(VOLUME, UNCERTAIN_ATTACH_NODE), "Attached");
    assert.equal(h.asw.getAttachState(VOLUME, "node2"), "Detached");
    assert.equal(h.fake.calls.attach, 2);
  });

  test("two nodes holding Uncertain attachments both wanted (a recovered state) do not wait for each other", async () => {
    const h = harness({ maxWaitForUnmountMs: 4_200_000 });
    for (const [pod, node] of [
      ["pod-uid1", "node1"],
      ["pod-uid2", "node2"],
    ] as const) {
      h.dsw.addNode(node);
      h.dsw.addPod(pod, newPod(pod), volumeSpec(), node);
      // VolumeAttachments not attached, as processVolumeAttachments finds them after a restart.
      h.asw.markVolumeAsUncertain(VOLUME, volumeSpec(), node);
    }
    await h.run(100);
    const states = ["node1", "node2"].map((n) => h.asw.getAttachState(VOLUME, n)).sort();
    assert.deepEqual(states, ["Attached", "Uncertain"]);
    assert.equal(h.fake.calls.attach, 1, "one retried attach; the other node then waits for its detach");
  });
});

describe("attach/detach reconciler: operations (derived from upstream code)", () => {
  test("a failing attach is retried after 500 ms, doubling; events name the pods each time", async () => {
    const h = harness();
    h.dsw.addNode(TIMEOUT_ATTACH_NODE);
    h.dsw.addPod("pod-uid", newPod("pod-uid"), volumeSpec(), TIMEOUT_ATTACH_NODE);
    await h.run(4000);
    // Attempts at 0, 510, 1520 and 3530 ms: each waits until its backoff has passed.
    assert.equal(h.fake.calls.attach, 4);
    assert.equal(
      h.events[0],
      `Warning FailedAttachVolume AttachVolume.Attach failed for volume "volume-name" : timed out to attach volume "${VOLUME.slice("kubernetes.io/csi/".length)}" to node "${TIMEOUT_ATTACH_NODE}"`,
    );
    assert.equal(h.events.length, 4);
  });

  test("a successful attach emits SuccessfulAttachVolume", async () => {
    const h = harness();
    h.dsw.addNode("node-name");
    h.dsw.addPod("pod-uid", newPod("pod-uid"), volumeSpec(), "node-name");
    await h.run(LOOP_MS);
    assert.deepEqual(h.events, [
      'Normal SuccessfulAttachVolume AttachVolume.Attach succeeded for volume "volume-name" ',
    ]);
  });

  test("the safe-to-detach check refuses while node status lists the volume in use", async () => {
    const h = harness({ maxWaitForUnmountMs: 4_200_000 });
    h.dsw.addNode("node-name");
    h.dsw.addPod("pod-uid", newPod("pod-uid"), volumeSpec(), "node-name");
    await h.run(LOOP_MS);
    h.dsw.deletePod("pod-uid", VOLUME, "node-name");
    // The informer's copy says unmounted; the apiserver's node still lists it.
    h.asw.setVolumesMountedByNode([], "node-name");
    h.nodes.set("node-name", { metadata: { name: "node-name" }, status: { volumesInUse: [VOLUME] } });
    await h.run(LOOP_MS);
    assert.equal(h.fake.calls.detach, 0);
    assert.equal(h.asw.getAttachState(VOLUME, "node-name"), "Uncertain");
    assert.equal(reported(h, "node-name"), false);
    h.nodes.set("node-name", { metadata: { name: "node-name" }, status: { volumesInUse: [] } });
    await h.run(1000);
    assert.equal(h.fake.calls.detach, 1);
    assert.equal(h.asw.getAttachState(VOLUME, "node-name"), "Detached");
  });

  test("a detach keyed per node (no spec) blocks an RWO attach elsewhere (nested keys)", async () => {
    const h = harness({ maxWaitForUnmountMs: 4_200_000 });
    let release = () => {};
    const detacher = h.fake.plugin.newDetacher.bind(h.fake.plugin);
    h.fake.plugin.newDetacher = () => ({
      detach: (name, nodeName) =>
        new Promise<void>((resolve) => {
          release = () => {
            void detacher().detach(name, nodeName).then(resolve);
          };
        }),
    });
    // Known from node1's status only (no spec, so multi-attach is assumed and the key is per node).
    h.asw.markVolumeAsAttached(VOLUME, undefined, "node1", "");
    h.asw.setVolumesMountedByNode([], "node1");
    await h.reconciler.reconcile();
    assert.equal(h.executor.isOperationPending(VOLUME, "node1"), true);
    h.dsw.addNode("node2");
    h.dsw.addPod("pod-uid", newPod("pod-uid"), volumeSpec(), "node2");
    await h.reconciler.reconcile();
    assert.equal(h.fake.calls.attach, 0, "no attach while the detach runs");
    release();
    await h.executor.waitForCompletion();
    await h.run(LOOP_MS);
    assert.equal(h.fake.calls.attach, 1);
    assert.equal(h.asw.getAttachState(VOLUME, "node2"), "Attached");
  });

  test("every sync period the plugins verify the attachments; vanished ones are forgotten", async () => {
    const h = harness({ syncPeriodMs: 60_000 });
    h.dsw.addNode("node-name");
    h.dsw.addPod("pod-uid", newPod("pod-uid"), volumeSpec(), "node-name");
    await h.run(LOOP_MS);
    h.fake.attached.clear(); // detached behind the controller's back
    h.clock.advance(60_000 - LOOP_MS);
    await h.reconciler.reconcile();
    assert.equal(h.asw.getAttachState(VOLUME, "node-name"), "Attached", "not yet past the period");
    h.clock.advance(1);
    await h.reconciler.reconcile();
    await h.executor.waitForCompletion();
    assert.equal(h.asw.getAttachState(VOLUME, "node-name"), "Detached");
    await h.run(LOOP_MS);
    assert.equal(h.asw.getAttachState(VOLUME, "node-name"), "Attached", "the next pass attaches it again");
  });

  test("an attachment no plugin can detach backs off: a handful of node-status patches a minute", async () => {
    const h = harness();
    const patches: string[] = [];
    const node = { metadata: { name: "node-name" } };
    const updater = new APINodeStatusUpdater({
      core: {
        patchNodeStatus: ({ name }) => {
          patches.push(name);
          return Promise.resolve(node);
        },
      },
      getNode: () => node,
      asw: h.asw,
      log: silentLogger,
    });
    const reconciler = new Reconciler({
      dsw: h.dsw,
      asw: h.asw,
      executor: h.executor,
      nodeStatusUpdater: updater,
      nodes: nodeHealthFrom(() => node),
      events: { event: () => {} },
      clock: h.clock,
      log: silentLogger,
    });
    // Left in volumesAttached by another controller, of a plugin this one does not have.
    const unknown = "kubernetes.io/unknown-plugin/vol-1";
    h.dsw.addNode("node-name");
    h.asw.markVolumeAsAttached(unknown, undefined, "node-name", "");
    h.asw.setVolumesMountedByNode([], "node-name");
    await updater.updateNodeStatuses();
    patches.length = 0;
    for (let t = 0; t < 60_000; t += 100) {
      await reconciler.reconcile();
      await h.executor.waitForCompletion();
      h.clock.advance(100);
    }
    assert.ok(patches.length <= 3, `${patches.length} node-status patches in a simulated minute`);
    assert.equal(h.asw.getAttachState(unknown, "node-name"), "Attached", "left as it was");
    assert.deepEqual(
      h.asw.getNodesToUpdateStatusFor().get("node-name")?.volumesToReportAsAttached,
      new Set([unknown]),
      "still reported attached",
    );
    assert.equal(h.executor.isOperationSafeToRetry(unknown, "node-name", "volume_detach"), false);
  });

  test("an Uncertain attachment claimed again during the status patch is not reported attached", async () => {
    const h = harness();
    // An attach here fails and leaves the volume Uncertain.
    h.dsw.addNode(TIMEOUT_ATTACH_NODE);
    h.asw.markVolumeAsUncertain(VOLUME, volumeSpec(), TIMEOUT_ATTACH_NODE);
    h.asw.setVolumesMountedByNode([], TIMEOUT_ATTACH_NODE);
    // Unwanted, so the detach pass writes the status; a pod claims the volume while it does.
    h.status.during = () => {
      h.status.during = undefined;
      h.dsw.addPod("pod-uid", newPod("pod-uid"), volumeSpec(), TIMEOUT_ATTACH_NODE);
    };
    await h.reconciler.reconcile();
    await h.executor.waitForCompletion();
    assert.deepEqual(h.status.forNode, [TIMEOUT_ATTACH_NODE]);
    assert.equal(h.fake.calls.detach, 0);
    assert.equal(h.asw.getAttachState(VOLUME, TIMEOUT_ATTACH_NODE), "Uncertain");
    assert.equal(reported(h, TIMEOUT_ATTACH_NODE), false);
  });

  test("run() ticks every loop period until aborted; a tick passes while there is work", async () => {
    const h = harness();
    h.dsw.addNode(FAIL_DETACH_NODE);
    h.asw.markVolumeAsAttached(VOLUME, volumeSpec(), FAIL_DETACH_NODE, "");
    h.asw.setVolumesMountedByNode([], FAIL_DETACH_NODE);
    const abort = new AbortController();
    const done = h.reconciler.run(abort.signal);
    for (let i = 0; i < 30; i++) {
      await new Promise(setImmediate);
      h.clock.advance(100);
    }
    abort.abort();
    await done;
    // A detach that keeps failing, retried as its backoff allows: 500 ms, 1 s, 2 s.
    assert.equal(h.fake.calls.detach, 3);
    assert.ok(h.status.passes >= 30, `${h.status.passes} passes in 31 ticks`);
  });
});

describe("attach/detach reconciler: idle ticks (issue 30 goal 2)", () => {
  test("passDue: a pass unless the last ended idle, nothing changed since and no sync is due", () => {
    assert.equal(passDue(undefined, 7, false), true, "the last pass did not end idle");
    assert.equal(passDue(7, 7, false), false);
    assert.equal(passDue(7, 8, false), true, "a cache changed");
    assert.equal(passDue(7, 7, true), true, "the sync period fell due");
  });

  /** One volume attached, wanted and written to node-name's status: nothing to do. */
  async function settled(options: HarnessOptions = {}) {
    const h = harness({ syncPeriodMs: 60_000, writeStatuses: true, ...options });
    h.dsw.addNode("node-name");
    h.dsw.addPod("pod-uid", newPod("pod-uid"), volumeSpec(), "node-name");
    await h.run(3 * LOOP_MS);
    assert.equal(h.asw.getAttachState(VOLUME, "node-name"), "Attached");
    h.status.passes = 0;
    return h;
  }

  test("a settled world: ticks skip the pass until a cache changes", async () => {
    const h = await settled();
    await h.run(1000);
    assert.equal(h.status.passes, 0);
    h.asw.setVolumesMountedByNode([VOLUME], "node-name"); // as it was: no change
    await h.run(1000);
    assert.equal(h.status.passes, 0);
    h.dsw.addPod("pod-2", newPod("pod-2"), volumeSpec(), "node-name");
    await h.run(1000);
    assert.equal(h.status.passes, 1, "the tick after the change");
    h.asw.setNodeStatusUpdateNeeded("node-name"); // a node re-created
    await h.run(1000);
    assert.equal(h.status.passes, 2, "the tick after the change");
    h.status.fail = true;
    h.asw.setNodeStatusUpdateNeeded("node-name");
    await h.run(1000);
    assert.equal(h.status.passes, 102, "a failing status write is retried every tick");
    h.status.fail = false;
    await h.run(1000);
    assert.equal(h.status.passes, 103);
  });

  test("a settled world: the sync period's verification comes on the same tick as with a pass every tick", async () => {
    const h = await settled();
    h.fake.attached.clear(); // detached behind the controller's back
    // The last sync was at the harness's start (time 0): due once more than 60 s have passed.
    h.clock.advance(60_000 - h.clock.now());
    await h.reconciler.tick();
    await h.executor.waitForCompletion();
    assert.equal(h.asw.getAttachState(VOLUME, "node-name"), "Attached", "not yet past the period");
    assert.equal(h.status.passes, 0);
    h.clock.advance(1);
    await h.reconciler.tick();
    await h.executor.waitForCompletion();
    assert.equal(h.asw.getAttachState(VOLUME, "node-name"), "Detached");
    await h.run(2 * LOOP_MS);
    assert.equal(h.asw.getAttachState(VOLUME, "node-name"), "Attached", "attached again");
  });

  test("run() sleeps while idle: a cache change wakes it at once, the sync period on time", async () => {
    const h = await settled();
    const abort = new AbortController();
    const done = h.reconciler.run(abort.signal);
    const turn = () => new Promise(setImmediate);
    await turn();
    assert.equal(h.status.passes, 0, "idle since settled()");
    h.clock.advance(LOOP_MS);
    await turn();
    assert.equal(h.clock.pendingTimers, 1, "asleep: only the sync period's timer is set");
    h.clock.advance(30_000);
    await turn();
    assert.equal(h.status.passes, 0);
    h.dsw.addPod("pod-2", newPod("pod-2"), volumeSpec(), "node-name"); // no time passes
    await turn();
    assert.equal(h.status.passes, 1, "woken by the change");
    h.fake.attached.clear(); // detached behind the controller's back
    h.clock.advance(LOOP_MS);
    await turn();
    h.clock.advance(60_000 - h.clock.now());
    await turn();
    await h.executor.waitForCompletion();
    assert.equal(h.asw.getAttachState(VOLUME, "node-name"), "Attached", "not yet past the period");
    h.clock.advance(1);
    await turn();
    await h.executor.waitForCompletion();
    assert.equal(h.asw.getAttachState(VOLUME, "node-name"), "Detached", "verified on the period's tick");
    abort.abort();
    await done;
  });

  test("a detach waiting for unmount is not idle: every tick passes", async () => {
    const h = await settled({ maxWaitForUnmountMs: DEFAULT_TIMER_CONFIG.maxWaitForUnmountMs });
    h.dsw.deletePod("pod-uid", VOLUME, "node-name");
    await h.run(100 * LOOP_MS);
    assert.equal(h.status.passes, 100);
    assert.equal(h.fake.calls.detach, 0, "still mounted");
  });
});

/** A LogSink that keeps every line. */
function recordingLog(): LogSink & { lines: { level: string; obj: Record<string, unknown>; msg: string }[] } {
  const lines: { level: string; obj: Record<string, unknown>; msg: string }[] = [];
  const at =
    (level: string) =>
    (obj: object, msg: string): void => {
      lines.push({ level, obj: obj as Record<string, unknown>, msg });
    };
  return { lines, debug: at("debug"), info: at("info"), warn: at("warn"), error: at("error") };
}
