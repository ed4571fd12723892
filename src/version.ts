import pkg from "../package.json" with { type: "json" };

export function versionInfo(): string {
  return `kube-volume-controller v${pkg.version} (node ${process.version}, ${process.platform}/${process.arch})`;
}
