import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { loadAllYaml, type KubernetesObject } from "@kubernetes/client-node";

export const MANIFESTS_DIR = fileURLToPath(new URL("../../manifests/", import.meta.url));

/** Every object in manifests/*.yaml (not the kustomization), namespaces first (as kubectl apply -f needs them). */
export function manifestObjects(): KubernetesObject[] {
  const objects = readdirSync(MANIFESTS_DIR)
    .filter((f) => f.endsWith(".yaml") && f !== "kustomization.yaml")
    .sort()
    .flatMap((f) => loadAllYaml(readFileSync(join(MANIFESTS_DIR, f), "utf8")) as KubernetesObject[])
    .filter(Boolean);
  return [...objects.filter((o) => o.kind === "Namespace"), ...objects.filter((o) => o.kind !== "Namespace")];
}
