import type { VersionInfo } from "../runtime/server-version.js";

/** The apiserver minors kvc is tested against: the pinned release and the one before it. */
export const OLDEST_SUPPORTED_MINOR = 36;
export const NEWEST_SUPPORTED_MINOR = 37;

/**
 * Below this, an API kvc's informers list is not served: storage.k8s.io/v1 CSIDriver is GA from
 * v1.18 (VolumeAttachment v1 from v1.13, CSINode v1 from v1.17). Its caches would never sync and kvc
 * would wait forever without saying why, so it refuses instead.
 */
export const OLDEST_SERVING_MINOR = 18;

export type VersionSkew =
  | { verdict: "supported"; version: string }
  /** Run, with a warning: untested, or not understood. */
  | { verdict: "newer" | "older" | "unknown"; version: string; reason: string }
  /** Refuse to start. */
  | { verdict: "refused"; version: string; reason: string };

const SUPPORTED = `v1.${OLDEST_SUPPORTED_MINOR} and v1.${NEWEST_SUPPORTED_MINOR}`;

/**
 * Whether kvc supports the kube-apiserver it talks to, judged from its /version. kvc runs
 * kube-controller-manager v1.37's volume loops; upstream's version skew policy never runs a controller
 * manager newer than its apiserver, so kvc states its own range, each end proven by an integration run
 * (docs/operations.md "Supported versions"). Outside it kvc warns, and refuses only where it could not
 * work at all.
 */
export function versionSkew(info: VersionInfo): VersionSkew {
  const served = servedVersion(info);
  const binary = info.gitVersion || `v${info.major}.${info.minor}`;
  if (!served) {
    return {
      verdict: "unknown",
      version: binary,
      reason:
        `kube-apiserver reports a version kvc cannot read (gitVersion "${info.gitVersion}", major ` +
        `"${info.major}", minor "${info.minor}"); kvc supports ${SUPPORTED}: going on unchecked`,
    };
  }
  const { major, minor } = served;
  // With --emulated-version, the APIs and defaults are the emulated release's, not the binary's.
  const version = served.emulated ? `${binary} emulating v${major}.${minor}` : binary;
  if (major === 1 && minor >= OLDEST_SUPPORTED_MINOR && minor <= NEWEST_SUPPORTED_MINOR) {
    return { verdict: "supported", version };
  }
  if (major > 1 || minor > NEWEST_SUPPORTED_MINOR) {
    return {
      verdict: "newer",
      version,
      reason:
        `kube-apiserver ${version} is newer than kvc is tested against (${SUPPORTED}): kvc runs ` +
        `kube-controller-manager v1.${NEWEST_SUPPORTED_MINOR}'s volume loops, which know nothing of ` +
        `later fields, conditions and feature-gate defaults; upgrade kvc to a release that supports it`,
    };
  }
  if (minor < OLDEST_SERVING_MINOR) {
    return {
      verdict: "refused",
      version,
      reason:
        `kube-apiserver ${version} is too old for kvc (it supports ${SUPPORTED}): it does not serve ` +
        `storage.k8s.io/v1 CSIDrivers (from v1.${OLDEST_SERVING_MINOR}), which kvc's informers list, ` +
        `so kvc would never start its loops`,
    };
  }
  return {
    verdict: "older",
    version,
    reason:
      `kube-apiserver ${version} is older than kvc supports (${SUPPORTED}) and untested: kvc runs ` +
      `kube-controller-manager v1.${NEWEST_SUPPORTED_MINOR}'s volume loops with its feature-gate ` +
      `defaults, and upstream never runs a controller manager newer than its apiserver; run the ` +
      `kube-controller-manager of the cluster's own version until the control plane is upgraded`,
  };
}

/** An apiserver that refuses /version (a 4xx answer, not 429): it will keep refusing. */
export function versionRefused(code: number): VersionSkew {
  return {
    verdict: "unknown",
    version: "",
    reason:
      `kube-apiserver answered /version with ${code}, so kvc cannot tell its version; kvc supports ` +
      `${SUPPORTED}: going on unchecked`,
  };
}

/**
 * [major, minor] of the APIs served: the emulated version when it differs from the binary's (an
 * apiserver from v1.31 on reports one always, its own unless --emulated-version is set).
 */
function servedVersion(info: VersionInfo): { major: number; minor: number; emulated: boolean } | undefined {
  // gitVersion first: distributions append to minor ("37+") and to gitVersion ("v1.37.2-eks-…") alike.
  const git = /^v(\d+)\.(\d+)\./.exec(info.gitVersion);
  const binary = git ? pair(git[1], git[2]) : pair(info.major, info.minor.replace(/\+$/, ""));
  const emulated = pair(info.emulationMajor, info.emulationMinor);
  if (emulated && (emulated[0] !== binary?.[0] || emulated[1] !== binary[1])) {
    return { major: emulated[0], minor: emulated[1], emulated: true };
  }
  return binary && { major: binary[0], minor: binary[1], emulated: false };
}

function pair(major: string | undefined, minor: string | undefined): [number, number] | undefined {
  if (!major || !minor || !/^\d+$/.test(major) || !/^\d+$/.test(minor)) return undefined;
  return Number(major) >= 1 ? [Number(major), Number(minor)] : undefined;
}
