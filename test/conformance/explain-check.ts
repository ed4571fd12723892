import {
  CoreV1Api,
  KubeConfig,
  StorageV1Api,
  type CoreV1Event,
  type KubernetesObject,
  type V1Node,
  type V1PersistentVolumeClaim,
  type V1Pod,
  type V1VolumeAttachment,
} from "@kubernetes/client-node";
import { explainClaim, type ClaimInputs, type ClaimExplanation } from "../../src/explain/claim.js";
import { ClusterReader } from "../../src/explain/cluster.js";
import { explainPod, type PodInputs, type PodVolumeExplanation } from "../../src/explain/pod.js";
import { ANN_BIND_COMPLETED, ANN_STORAGE_PROVISIONER } from "../../src/persistentvolume/annotations.js";
import type { Snapshot } from "./runner.js";

/**
 * `kvc explain` against the controller it explains (issue 14): for every claim and pod a scenario
 * creates, explain's verdict is computed (explainClaim, explainPod: the CLI's own reading code and
 * decisions) from the settled state just before the objects were created plus the objects as created,
 * and after the step settles it is compared with what the controller running on that side (KCM or
 * kvc) did: "would bind X", "would provision through P", "waits for the first consumer", "stays
 * Pending"; for each pod volume "would attach to node N", "waits for detach", "nothing to attach".
 */

/** What the controller did, read after a settle. */
interface Outcome {
  claims: Map<string, V1PersistentVolumeClaim>;
  attachments: V1VolumeAttachment[];
  nodes: Map<string, V1Node>;
  events: CoreV1Event[];
}

/** One prediction: its line, explain's message, and what the controller did instead (undefined: as predicted). */
interface Expectation {
  line: string;
  message: string;
  differs(outcome: Outcome): string | undefined;
}

/** The snapshot's "Explain" entry of one side. */
export interface ExplainResult {
  /** Every prediction checked, "PVC c: Bind a" / "Pod p volume v: Attach n1" (the same on both sides). */
  predictions: string[];
  /** Verdicts explain cannot give (a FlexVolume driver it cannot see; two nodes racing for one volume). */
  undecided: string[];
  mismatches: string[];
}

export class ExplainCheck {
  readonly #ns: string;
  readonly #reader: ClusterReader;
  readonly #core: CoreV1Api;
  readonly #storage: StorageV1Api;
  #claimContext: Omit<ClaimInputs, "claim" | "selectedNode" | "now"> | undefined;
  #podContext: Omit<PodInputs, "pod" | "now"> | undefined;
  #pending: Expectation[] = [];
  readonly #result: ExplainResult = { predictions: [], undecided: [], mismatches: [] };

  constructor(kubeconfigPath: string, ns: string) {
    this.#ns = ns;
    this.#reader = new ClusterReader({ kubeconfig: kubeconfigPath, namespace: ns });
    const kc = new KubeConfig();
    kc.loadFromFile(kubeconfigPath);
    this.#core = kc.makeApiClient(CoreV1Api);
    this.#storage = kc.makeApiClient(StorageV1Api);
  }

  /** Before objects are created (in a settled state): reads what explain reads, if claims or pods come. */
  async before(objects: readonly KubernetesObject[]): Promise<void> {
    const kinds = new Set(objects.map((o) => o.kind));
    this.#claimContext = kinds.has("PersistentVolumeClaim") ? await this.#reader.claimContext() : undefined;
    this.#podContext = kinds.has("Pod") ? await this.#reader.podContext() : undefined;
  }

  /** Explain's verdict for each claim and pod just created, from the state read before them. */
  predict(created: readonly KubernetesObject[]): void {
    const now = new Date();
    const pods = created.filter((o): o is V1Pod => o.kind === "Pod");
    const claimContext = this.#claimContext;
    const claims = claimContext
      ? created
          .filter((o): o is V1PersistentVolumeClaim => o.kind === "PersistentVolumeClaim")
          .map((claim) => ({ claim, explanation: explainClaim({ ...claimContext, claim, now }) }))
      : [];
    // Claims created together that explain sends to one volume compete for it: which one the
    // controller's workers (or informer order) let win, explain cannot tell.
    const wanted = (e: ClaimExplanation) => (e.conclusion.kind === "Bind" ? e.conclusion.volume : undefined);
    const contested = new Set(
      claims
        .map(({ explanation }) => wanted(explanation))
        .filter((v, i, all) => v !== undefined && all.indexOf(v) !== i),
    );
    for (const o of created) {
      if (o.kind === "PersistentVolumeClaim") {
        const { claim, explanation } = claims.find((c) => c.claim === o) ?? {};
        if (!claim || !explanation) continue;
        const volume = wanted(explanation);
        if (volume !== undefined && contested.has(volume))
          this.#result.undecided.push(
            `PVC ${claim.metadata?.name ?? ""}: Bind ${volume}: contested by claims created with it`,
          );
        else this.#expectClaim(claim, explanation);
      } else if (o.kind === "Pod" && this.#podContext) {
        const pod = o as V1Pod;
        // The pods created together are all there for each: which nodes want a volume.
        const context = { ...this.#podContext, pods: [...this.#podContext.pods, ...pods] };
        for (const v of explainPod({ ...context, pod, now }).volumes) this.#expectPodVolume(pod, v);
      }
    }
  }

  /** After a settle: each prediction against what the controller did. */
  async verify(): Promise<void> {
    if (this.#pending.length === 0) return;
    const [claims, attachments, nodes, events] = await Promise.all([
      this.#core.listNamespacedPersistentVolumeClaim({ namespace: this.#ns }),
      this.#storage.listVolumeAttachment(),
      this.#core.listNode(),
      this.#core.listNamespacedEvent({ namespace: this.#ns }),
    ]);
    const outcome: Outcome = {
      claims: new Map(claims.items.map((c) => [c.metadata?.name ?? "", c])),
      attachments: attachments.items,
      nodes: new Map(nodes.items.map((n) => [n.metadata?.name ?? "", n])),
      events: events.items,
    };
    for (const e of this.#pending) {
      this.#result.predictions.push(e.line);
      const did = e.differs(outcome);
      if (did !== undefined) this.#result.mismatches.push(`${e.line} (explain: ${e.message}), but ${did}`);
    }
    this.#pending = [];
  }

  result(): ExplainResult {
    return this.#result;
  }

  #expectClaim(created: V1PersistentVolumeClaim, explanation: ClaimExplanation): void {
    const name = created.metadata?.name ?? "";
    const uid = created.metadata?.uid ?? "";
    const { kind, volume, provisioner, message } = explanation.conclusion;
    const pending = (event?: (e: CoreV1Event) => boolean, annotation?: string) => (o: Outcome) => {
      const claim = o.claims.get(name);
      const phase = claim?.status?.phase ?? "Pending";
      const annotations = claim?.metadata?.annotations ?? {};
      if (phase !== "Pending" || annotations[ANN_BIND_COMPLETED] !== undefined)
        return `the controller: ${describeClaim(claim)}`;
      if (!created.spec?.volumeName && claim?.spec?.volumeName)
        return `the controller: ${describeClaim(claim)}`;
      if (annotations[ANN_STORAGE_PROVISIONER] !== annotation)
        return `the controller: ${describeClaim(claim)}, provisioner annotation ${annotations[ANN_STORAGE_PROVISIONER] ?? "none"}`;
      if (event && !eventsOf(o, uid).some(event))
        return `the controller: Pending with events [${eventsOf(o, uid).map(eventText).join("; ")}]`;
      return undefined;
    };
    const bound = (pv: string, annotation?: string) => (o: Outcome) => {
      const claim = o.claims.get(name);
      const ok =
        claim?.status?.phase === "Bound" &&
        claim.spec?.volumeName === pv &&
        (annotation === undefined || claim.metadata?.annotations?.[ANN_STORAGE_PROVISIONER] === annotation);
      return ok ? undefined : `the controller: ${describeClaim(claim)}`;
    };
    const reason =
      (...reasons: string[]) =>
      (e: CoreV1Event) =>
        reasons.includes(e.reason ?? "");
    let differs: Expectation["differs"];
    switch (kind) {
      case "Bind":
      case "BindRequested":
      case "Bound":
        differs = bound(volume ?? "");
        break;
      case "Provision":
        // In-tree: provisioned here and bound; external: handed over by the annotation, Pending.
        differs =
          provisioner?.kind === "in-tree"
            ? bound(`pvc-${uid}`, provisioner.name)
            : provisioner?.kind === "external"
              ? pending(undefined, provisioner.name)
              : pending(reason("ProvisioningFailed"));
        break;
      case "WaitForFirstConsumer":
        differs = pending(reason("WaitForFirstConsumer", "WaitForPodScheduled"));
        break;
      case "NoMatchNoClass":
        differs = pending(reason("FailedBinding"));
        break;
      case "WaitForVolumeAvailable":
        // Bound to the volume once it turns Available; Pending without the event while it has not.
        differs = (o) => (bound(volume ?? "")(o) === undefined ? undefined : pending()(o));
        break;
      case "ClassNotFound":
        differs = pending(reason("ProvisioningFailed"));
        break;
      case "WaitForRequestedVolume":
      case "Invalid":
        differs = pending();
        break;
      case "Lost":
        differs = (o) => {
          const claim = o.claims.get(name);
          return claim?.status?.phase === "Lost" ? undefined : `the controller: ${describeClaim(claim)}`;
        };
        break;
    }
    const what = volume ? `${kind} ${volume}` : provisioner ? `${kind} ${provisioner.name}` : kind;
    this.#pending.push({ line: `PVC ${name}: ${what}`, message: this.#normalise(message), differs });
  }

  #expectPodVolume(pod: V1Pod, v: PodVolumeExplanation): void {
    const podName = pod.metadata?.name ?? "";
    const uid = pod.metadata?.uid ?? "";
    const node = pod.spec?.nodeName;
    const { kind, message } = v.conclusion;
    const line = (what: string) => `Pod ${podName} volume ${v.name}: ${what}`;
    // Where the volume is attached (or being attached): a VolumeAttachment, or the node's status.
    const attachedTo = (o: Outcome, n: string): boolean =>
      o.attachments.some(
        (va) =>
          va.spec.nodeName === n &&
          va.metadata?.deletionTimestamp === undefined &&
          (va.metadata?.name === v.attachment?.name ||
            (v.persistentVolume !== null && va.spec.source.persistentVolumeName === v.persistentVolume)),
      ) ||
      (v.uniqueName !== null &&
        (o.nodes.get(n)?.status?.volumesAttached ?? []).some((a) => a.name === v.uniqueName));
    const where = (o: Outcome) => {
      const on = [...o.nodes.keys()].filter((n) => attachedTo(o, n));
      return on.length ? `it is attached to ${on.join(", ")}` : "it is attached nowhere";
    };
    const attach = (n: string) => (o: Outcome) => (attachedTo(o, n) ? undefined : where(o));
    const notAttached = (n: string | undefined, event?: string) => (o: Outcome) => {
      const nodes = n ? [n] : [...o.nodes.keys()];
      if (nodes.some((x) => attachedTo(o, x))) return where(o);
      if (
        event &&
        !eventsOf(o, uid).some((e) => e.reason === "FailedAttachVolume" && e.message?.includes(event))
      )
        return `the pod's events are [${eventsOf(o, uid).map(eventText).join("; ")}]`;
      return undefined;
    };
    const push = (what: string, differs: Expectation["differs"]) =>
      this.#pending.push({ line: line(what), message: this.#normalise(message), differs });
    const undecided = (why: string) => this.#result.undecided.push(`${line(kind)}: ${why}`);

    const holder = v.otherNodes.find((o) => o.attached);
    const detachesFirst =
      holder?.detach.pending === true &&
      (holder.detach.forceDetach === "not-needed" || holder.detach.forceDetach === "now");
    switch (kind) {
      case "Attached":
      case "WaitingForAttacher":
      case "WaitingForController": {
        const racing = !v.multiAttachAllowed && v.otherNodes.some((o) => o.detach.pods.some((p) => p.active));
        if (racing) undecided("wanted on several nodes at once: whichever the controller takes first");
        else if (node) push(`Attach ${node}`, attach(node));
        break;
      }
      case "MultiAttachConflict":
        if (node && holder && detachesFirst) {
          push(`Attach ${node} after the detach from ${holder.node}`, (o) =>
            attachedTo(o, holder.node) ? where(o) : attach(node)(o),
          );
        } else if (node) {
          push(`Multi-Attach, not attached to ${node}`, notAttached(node, "Waiting for detach"));
        }
        break;
      case "PendingDetach":
        if (node && v.detach?.forceDetach !== "never" && v.detach?.forceDetach !== "timeout")
          push(`Detach from ${node}`, notAttached(node));
        else if (node) push(`stays attached to ${node} (detach waits)`, attach(node));
        break;
      case "UnknownPlugin":
        undecided("a FlexVolume driver explain cannot see");
        break;
      default:
        // Nothing to attach: observable only through a name the attachment would carry.
        if (v.attachment || v.uniqueName !== null || v.persistentVolume !== null)
          push(`${kind}, nothing attached`, notAttached(node));
        else undecided("no PV, VolumeAttachment or unique name to look for");
    }
  }

  #normalise(text: string): string {
    return text.replace(new RegExp(`\\b${this.#ns}\\b`, "g"), "NS");
  }
}

/** Each side's predictions the controller did otherwise, as "side: line" lines. */
export function explainMismatches(sides: Record<string, Snapshot>): string[] {
  return Object.entries(sides).flatMap(([side, snapshot]) =>
    ((snapshot.Explain as ExplainResult | undefined)?.mismatches ?? []).map((m) => `${side}: ${m}`),
  );
}

function eventsOf(o: Outcome, uid: string): CoreV1Event[] {
  return o.events.filter((e) => e.involvedObject.uid === uid);
}

function eventText(e: CoreV1Event): string {
  return `${e.type ?? ""} ${e.reason ?? ""}: ${e.message ?? ""}`;
}

function describeClaim(claim: V1PersistentVolumeClaim | undefined): string {
  if (!claim) return "the claim is gone";
  const volume = claim.spec?.volumeName ? ` (volume ${claim.spec.volumeName})` : "";
  return `${claim.status?.phase ?? "Pending"}${volume}`;
}
