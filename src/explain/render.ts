import { styleText } from "node:util";
import { dump } from "js-yaml";
import type { ClaimExplanation, VolumeVerdict } from "./claim.js";
import type { PodExplanation } from "./pod.js";
import type { VolumeExplanation } from "./volume.js";

export const OUTPUT_FORMATS = ["human", "json", "yaml"] as const;
export type OutputFormat = (typeof OUTPUT_FORMATS)[number];

/** Human output lists every volume up to this many; beyond, a summary by reason and the nearest. */
export const LIST_ALL_UP_TO = 20;
const NEAREST = 10;

type Style = Parameters<typeof styleText>[0];
/** Colours only on a terminal (styleText checks the stream, NO_COLOR and FORCE_COLOR). */
export type Paint = (style: Style, text: string) => string;
export const paintFor =
  (stream: NodeJS.WriteStream): Paint =>
  (style, text) =>
    styleText(style, text, { stream });
export const noPaint: Paint = (_, text) => text;

export function render(
  report: ClaimExplanation | VolumeExplanation | PodExplanation,
  format: OutputFormat,
  paint: Paint,
): string {
  if (format === "json") return `${JSON.stringify(report, null, 2)}\n`;
  if (format === "yaml") return dump(report, { noRefs: true, lineWidth: -1 });
  switch (report.kind) {
    case "ClaimExplanation":
      return renderClaim(report, paint);
    case "VolumeExplanation":
      return renderVolume(report, paint);
    case "PodExplanation":
      return renderPod(report, paint);
  }
}

function renderPod(r: PodExplanation, paint: Paint): string {
  const p = r.pod;
  const lines = [
    `${paint("bold", `Pod ${p.namespace}/${p.name}`)}: ${p.phase}${p.terminated ? " (terminated)" : ""}`,
  ];
  const row = (indent: string, name: string, value: string) =>
    lines.push(`${indent}${`${name}:`.padEnd(22)}${value}`);
  if (r.node) {
    const n = r.node;
    const state = !n.exists
      ? paint("red", "does not exist")
      : [
          n.managed
            ? "managed by the attach/detach controller"
            : paint("yellow", "not managed (its kubelet attaches)"),
          n.ready ? "Ready" : paint("red", "not Ready"),
          ...(n.outOfService ? [paint("yellow", "out-of-service")] : []),
        ].join(", ");
    row("  ", "node", `${n.name}: ${state}`);
  } else {
    row("  ", "node", "<not scheduled>");
  }
  for (const v of r.volumes) {
    lines.push("", paint("bold", `Volume ${v.name}`) + ` (${v.source}${v.claim ? ` ${v.claim}` : ""})`);
    const put = (name: string, value: string | null | undefined) => {
      if (value !== null && value !== undefined) row("    ", name, value);
    };
    put("persistent volume", v.persistentVolume);
    put("plugin", v.plugin && (v.driver ? `${v.plugin} (driver ${v.driver})` : v.plugin));
    put("migrated from", v.migratedFrom);
    if (v.attachable !== null) {
      const required = v.attachRequired === null ? "" : `, CSIDriver attachRequired: ${v.attachRequired}`;
      put("attachable", `${v.attachable ? "yes" : "no"}${required}`);
    }
    put("unique name", v.uniqueName);
    if (v.multiAttachAllowed !== null)
      put("multi-attach", v.multiAttachAllowed ? "allowed" : "no (one node at a time)");
    if (v.attachment) put("VolumeAttachment", attachmentText(v.attachment, paint));
    if (v.nodeStatus) {
      put(
        "node status",
        `volumesAttached: ${v.nodeStatus.volumesAttached ? "yes" : "no"}, volumesInUse: ${v.nodeStatus.volumesInUse ? "yes" : "no"}`,
      );
    }
    for (const o of v.otherNodes) {
      put(
        `on node ${o.node}`,
        `${o.attached ? paint("yellow", "attached") : "not attached"}${o.attachment ? ` (${attachmentText(o.attachment, paint)})` : ""}; ${o.detach.message}`,
      );
    }
    if (v.detach) put("detach", v.detach.message);
    const ok = v.conclusion.kind === "Attached" || v.conclusion.kind === "NotAttachable";
    lines.push(`    => ${paint(ok ? "green" : "cyan", v.conclusion.kind)}: ${v.conclusion.message}`);
  }
  lines.push("", conclusionLine(r.conclusion, paint));
  return withSuggestions(lines, r.suggestions, paint);
}

function attachmentText(
  a: NonNullable<PodExplanation["volumes"][number]["attachment"]>,
  paint: Paint,
): string {
  if (!a.exists) return `${a.name}: none`;
  const parts = [`${a.name}: attached=${String(a.attached)}`];
  if (a.deleting) parts.push("deleting");
  if (a.attachError) parts.push(`${paint("red", "attachError")}: ${a.attachError.message}`);
  if (a.detachError) parts.push(`${paint("red", "detachError")}: ${a.detachError.message}`);
  return parts.join(", ");
}

function renderVolume(r: VolumeExplanation, paint: Paint): string {
  const v = r.volume;
  const lines = [`${paint("bold", `PersistentVolume ${v.name}`)}: ${v.phase}`];
  const row = (name: string, value: string) => lines.push(`  ${`${name}:`.padEnd(18)}${value}`);
  row("storage class", v.storageClass ?? "<none>");
  row("capacity", v.capacity ?? "<none>");
  row("reclaim policy", v.reclaimPolicy);
  row("claim", v.claimRef ?? "<none>");
  if (v.provisionedBy) row("provisioned by", v.provisionedBy);
  if (v.deletionTimestamp) row("deleting since", v.deletionTimestamp);
  for (const f of r.finalizers) row("finalizer", `${f.name}: ${f.meaning}`);
  if (r.lastWarning) {
    row("last warning", `${paint("red", r.lastWarning.reason)}: ${r.lastWarning.message}`);
  }
  lines.push("", conclusionLine(r.conclusion, paint));
  return withSuggestions(lines, r.suggestions, paint);
}

function renderClaim(r: ClaimExplanation, paint: Paint): string {
  const d = r.claim.demands;
  const lines: string[] = [];
  lines.push(
    `${paint("bold", `PersistentVolumeClaim ${r.claim.namespace}/${r.claim.name}`)}: ${r.claim.phase}`,
  );
  const klass =
    d.storageClass === null
      ? "none"
      : d.storageClassSource === "default"
        ? `${d.storageClass} (the default class, assigned by the binder)`
        : d.storageClass;
  const row = (name: string, value: string) => lines.push(`  ${`${name}:`.padEnd(26)}${value}`);
  row("storage class", klass);
  row("access modes", d.accessModes.join(", ") || "<none>");
  row("size", d.size ?? "<none>");
  row("volume mode", d.volumeMode);
  row("selector", d.selector ?? "<none>");
  row("binding mode", d.bindingMode ?? "<no class>");
  row("selected node", d.selectedNode ?? "<none>");
  row("volume attributes class", d.volumeAttributesClass ?? "<none>");
  if (r.claim.volumeName) row("volume name", r.claim.volumeName);

  const v = r.volumes;
  lines.push("", paint("bold", `Volumes: ${v.total}, ${v.matching} matching`));
  let shown: VolumeVerdict[] = v.verdicts;
  if (v.total > LIST_ALL_UP_TO) {
    for (const [code, count] of Object.entries(v.byReason).sort((a, b) => b[1] - a[1])) {
      lines.push(`  ${code.padEnd(16)}${count}`);
    }
    shown = v.verdicts.slice(0, NEAREST);
    lines.push(`  nearest ${shown.length}:`);
  }
  for (const verdict of shown) {
    const head = `  ${verdict.name} (${verdict.capacity ?? "no capacity"})`;
    if (verdict.verdict === "Match") {
      const tag = verdict.chosen ? "would bind" : verdict.preBound ? "matches (pre-bound)" : "matches";
      lines.push(`${head}: ${paint("green", tag)}`);
      continue;
    }
    lines.push(`${head}:`);
    for (const reason of verdict.reasons) {
      lines.push(
        `    ${paint("red", reason.code)}: wants ${reason.wanted || "<none>"}, has ${reason.found || "<none>"}`,
      );
    }
  }

  const c = r.conclusion;
  lines.push("", conclusionLine(c, paint));
  if (c.provisioner) {
    const state =
      c.provisioner.alive === true
        ? paint("green", "looks alive")
        : c.provisioner.alive === false
          ? paint("yellow", "no sign of it running")
          : "unknown";
    lines.push(`  provisioner ${c.provisioner.name}: ${state} (${c.provisioner.evidence})`);
  }
  return withSuggestions(lines, r.suggestions, paint);
}

function conclusionLine(c: { kind: string; message: string }, paint: Paint): string {
  return `${paint("bold", "Conclusion")}: ${paint("cyan", c.kind)}: ${c.message}`;
}

/** The explanation's lines, then what the user can change, as one text. */
function withSuggestions(lines: string[], suggestions: readonly string[], paint: Paint): string {
  if (suggestions.length) {
    lines.push("", paint("bold", "What you can change:"));
    for (const s of suggestions) lines.push(`  - ${s}`);
  }
  return `${lines.join("\n")}\n`;
}
