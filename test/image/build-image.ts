import { execFileSync, spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

/**
 * kvc's image as users build it: the Dockerfile, unchanged, built with podman (runc) on the stand-in
 * base that base-image.sh caches (the base cannot be pulled here), with this machine's npm registry
 * settings as build secrets. The image test and the real cluster (test/e2e/cluster) both build it so.
 *   tsx test/image/build-image.ts TAG
 */

const root = fileURLToPath(new URL("../../", import.meta.url));

export const podmanEnv = {
  ...process.env,
  CONTAINERS_CONF: process.env.CONTAINERS_CONF ?? join(root, "test/image/containers.conf"),
};

/**
 * This machine's npm registry settings as build secrets: an npmrc with the registry, its proxy and
 * the registry tokens of ~/.npmrc, and the CA bundle npm here trusts (as `cafile`: the host's path
 * is not in the build container). The npmrc holds `marker` so a test can prove it is in no layer.
 */
function registrySecrets(dir: string, marker: string): string[] {
  const get = (key: string) => {
    const value = execFileSync("npm", ["config", "get", key], { encoding: "utf8" }).trim();
    return value === "null" || value === "undefined" ? "" : value;
  };
  const lines = [`# ${marker}`, `registry=${get("registry")}`];
  for (const key of ["proxy", "https-proxy", "noproxy", "strict-ssl"]) {
    const value = get(key);
    if (value) lines.push(`${key}=${value}`);
  }
  const secrets = [];
  const caFile = get("cafile") || process.env.NODE_EXTRA_CA_CERTS;
  if (caFile) {
    lines.push("cafile=/run/secrets/npm-ca");
    secrets.push("--secret", `id=npm-ca,src=${caFile}`);
  }
  try {
    const userrc = readFileSync(join(process.env.HOME ?? "/root", ".npmrc"), "utf8");
    lines.push(...userrc.split("\n").filter((l) => /^\/\/.*:(_authToken|_auth|_password|username)=/.test(l)));
  } catch {
    // no ~/.npmrc: no tokens
  }
  writeFileSync(join(dir, "npmrc"), `${lines.join("\n")}\n`, { mode: 0o600 });
  return ["--secret", `id=npmrc,src=${join(dir, "npmrc")}`, ...secrets];
}

/** Builds the Dockerfile as `tag`; throws with the build's last output on failure. */
export function buildImage(tag: string, secretMarker = "kvc-build-secret"): void {
  execFileSync(join(root, "test/image/base-image.sh"), {
    env: podmanEnv,
    stdio: ["ignore", "inherit", "inherit"],
  });
  const secrets = mkdtempSync(join(tmpdir(), "kvc-image-secrets-"));
  try {
    const build = spawnSync(
      "podman",
      ["build", "--pull=never", "--network=host", ...registrySecrets(secrets, secretMarker), "-t", tag, "."],
      { cwd: root, env: podmanEnv, encoding: "utf8", maxBuffer: 64 << 20 },
    );
    if (build.status !== 0) {
      throw new Error(`podman build failed:\n${build.stdout.slice(-4000)}\n${build.stderr.slice(-4000)}`);
    }
  } finally {
    rmSync(secrets, { recursive: true, force: true });
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const tag = process.argv[2];
  if (!tag) throw new Error("usage: build-image.ts TAG");
  buildImage(tag);
}
