/**
 * Deploys the real CSI hostpath driver from its own manifests (csi-driver-host-path's
 * deploy/kubernetes-latest, what its deploy.sh applies) and the sidecars' own RBAC, all read from the
 * source archives in ../shared/third_party/kubernetes-csi/, then waits for the driver to be ready.
 *   tsx deploy-csi-hostpath.ts --kubectl=PATH --kubeconfig=PATH
 *
 * What differs from deploy.sh, and why:
 * - deploy.sh downloads the sidecars' RBAC from GitHub; here it comes from the archives (the same
 *   files at the tags the images are built from).
 * - Images: the tags upstream e2e v1.37.2 deploys (the archives' tags, built by images.sh, which
 *   lists them) replace the manifest's older ones, as deploy.sh's <NAME>_TAG variables would.
 * - The external-health-monitor-controller sidecar is dropped: its source is not among the archives,
 *   and it only reports volume health (no part of binding, attaching or provisioning).
 * - csi-hostpath-testing.yaml (a socat pod exposing the driver's socket for csi-sanity) is not applied.
 * Two StorageClasses: the example's csi-hostpath-sc (Immediate) and csi-hostpath-wffc
 * (WaitForFirstConsumer), both reclaim Delete.
 */
import { execFileSync } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { dump, loadAll } from "js-yaml";

// As images.sh finds them.
const archives =
  process.env.KVC_CSI_SOURCES ??
  fileURLToPath(new URL("../../../../shared/third_party/kubernetes-csi/", import.meta.url));
const { values } = parseArgs({ options: { kubectl: { type: "string" }, kubeconfig: { type: "string" } } });
if (!values.kubectl || !values.kubeconfig) throw new Error("--kubectl and --kubeconfig are required");
const kubectlArgs = ["--kubeconfig", values.kubeconfig];

/** The references of the images built here, by repository name (images.sh reads the tags upstream's e2e uses). */
const BUILT = new Map(
  execFileSync(fileURLToPath(new URL("images.sh", import.meta.url)), ["list"], { encoding: "utf8" })
    .trim()
    .split("\n")
    .map((ref) => [/([^/:]+):[^:]+$/.exec(ref)?.[1] ?? "", ref] as const),
);
const DROPPED_CONTAINERS = new Set(["csi-external-health-monitor-controller"]);

interface Manifest {
  kind?: string;
  metadata?: { name?: string };
  spec?: { template?: { spec?: { containers?: { name: string; image: string }[] } } };
}

function kubectl(args: string[], input?: string): string {
  return execFileSync(values.kubectl ?? "", [...kubectlArgs, ...args], {
    encoding: "utf8",
    input,
    stdio: ["pipe", "pipe", "inherit"],
  });
}

function apply(docs: unknown[]): void {
  kubectl(["apply", "-f", "-"], docs.map((d) => dump(d)).join("---\n"));
}

function extract(archive: string, dir: string): string {
  execFileSync("tar", ["-xzf", join(archives, `${archive}.tar.gz`), "-C", dir]);
  return join(dir, archive);
}

function load(file: string): Manifest[] {
  return loadAll(readFileSync(file, "utf8")).filter((d): d is Manifest => d !== null && d !== undefined);
}

/** The manifest's image with the tag built here; an image not built here is an error, not a pull. */
function retag(image: string): string {
  const built = BUILT.get(/([^/:]+):[^:]+$/.exec(image)?.[1] ?? "");
  if (!built) throw new Error(`no image is built here for ${image}`);
  return built;
}

const work = mkdtempSync(join(tmpdir(), "kvc-csi-"));
try {
  const driver = extract("csi-driver-host-path-v1.17.1", work);
  const rbac = [
    join(extract("external-provisioner-v6.3.0", work), "deploy/kubernetes/rbac.yaml"),
    join(extract("external-attacher-v4.12.0", work), "deploy/kubernetes/rbac.yaml"),
    join(extract("external-resizer-v2.2.0", work), "deploy/kubernetes/rbac.yaml"),
  ];
  const snapshotter = extract("external-snapshotter-v8.6.0", work);
  rbac.push(join(snapshotter, "deploy/kubernetes/csi-snapshotter/rbac-csi-snapshotter.yaml"));
  // The snapshotter sidecar watches VolumeSnapshotContents: their CRDs (as a cluster with snapshot
  // support has them; no snapshot-controller runs, nothing here takes snapshots).
  const crds = join(snapshotter, "client/config/crd");
  for (const f of readdirSync(crds).filter((f) => f.startsWith("snapshot.storage") && f.endsWith(".yaml")))
    apply(load(join(crds, f)));
  kubectl([
    "wait",
    "--for=condition=Established",
    "--timeout=60s",
    "crd/volumesnapshotclasses.snapshot.storage.k8s.io",
  ]);
  for (const f of rbac) apply(load(f));

  const dir = join(driver, "deploy/kubernetes-latest/hostpath");
  for (const f of readdirSync(dir).sort()) {
    if (!f.endsWith(".yaml") || f === "csi-hostpath-testing.yaml") continue;
    const docs = load(join(dir, f));
    for (const d of docs) {
      const pod = d.spec?.template?.spec;
      if (!pod?.containers) continue;
      pod.containers = pod.containers.filter((c) => !DROPPED_CONTAINERS.has(c.name));
      for (const c of pod.containers) c.image = retag(c.image);
    }
    apply(docs);
  }
  apply([
    ...load(join(driver, "examples/csi-storageclass.yaml")),
    {
      apiVersion: "storage.k8s.io/v1",
      kind: "StorageClass",
      metadata: { name: "csi-hostpath-wffc" },
      provisioner: "hostpath.csi.k8s.io",
      reclaimPolicy: "Delete",
      volumeBindingMode: "WaitForFirstConsumer",
    },
  ]);
  kubectl(["rollout", "status", "statefulset/csi-hostpathplugin", "--timeout=180s"]);
} finally {
  rmSync(work, { recursive: true, force: true });
}
