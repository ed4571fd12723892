import type { AuthorizationV1Api, V1SubjectAccessReviewSpec } from "@kubernetes/client-node";
import { abortableRequest } from "../client.js";
import { deadline, realClock, type Clock } from "../clock.js";
import type { UserInfo } from "./authentication.js";
import { ReviewCache } from "./review-cache.js";
import { withWebhookBackoff } from "./webhook-retry.js";

/** Upstream's timeout for one SubjectAccessReview request of the delegating authorizer (ClientTimeout), each attempt. */
const REVIEW_TIMEOUT_MS = 10_000;

/** Groups allowed everything without asking the apiserver (upstream's AlwaysAllowGroups default). */
const ALWAYS_ALLOW_GROUPS = ["system:masters"];

/**
 * --authorization-always-allow-paths as upstream's authorization/path authorizer reads it: each entry
 * is a whole path or, ending in `*`, a prefix; the leading `/` is optional. Throws on a `*` elsewhere.
 */
export function alwaysAllowPaths(paths: readonly string[]): (path: string) => boolean {
  const exact = new Set<string>();
  const prefixes: string[] = [];
  for (const raw of paths) {
    const p = raw.startsWith("/") ? raw.slice(1) : raw;
    if (p.slice(0, -1).includes("*")) throw new Error(`only trailing * allowed in "${raw}"`);
    if (p.endsWith("*")) prefixes.push(p.slice(0, -1));
    else exact.add(p);
  }
  return (path) => {
    const p = path.startsWith("/") ? path.slice(1) : path;
    return exact.has(p) || prefixes.some((prefix) => p.startsWith(prefix));
  };
}

export interface Decision {
  allowed: boolean;
  reason: string;
}

export interface DelegatingAuthorizerOptions {
  alwaysAllowPaths: readonly string[];
  allowCacheTtlMs: number;
  denyCacheTtlMs: number;
  clock?: Clock;
  max?: number;
  random?: () => number;
}

/**
 * Delegated authorization as kube-controller-manager's (apiserver DelegatingAuthorizationOptions), for
 * non-resource requests: system:masters and the always-allowed paths are allowed at once; anything
 * else is a SubjectAccessReview, allowed and denied decisions cached for their own TTLs. Without a
 * SubjectAccessReview client (no --authorization-kubeconfig and not in a cluster) everything else is
 * forbidden, as upstream. A review is retried as upstream's webhook; one that still fails is an
 * error (500), not a decision.
 */
export class DelegatingAuthorizer {
  readonly #api: Pick<AuthorizationV1Api, "createSubjectAccessReview"> | undefined;
  readonly #alwaysAllowed: (path: string) => boolean;
  readonly #cache: ReviewCache<Decision>;
  readonly #clock: Clock;
  readonly #random: (() => number) | undefined;

  constructor(
    api: Pick<AuthorizationV1Api, "createSubjectAccessReview"> | undefined,
    opts: DelegatingAuthorizerOptions,
  ) {
    this.#api = api;
    this.#alwaysAllowed = alwaysAllowPaths(opts.alwaysAllowPaths);
    this.#clock = opts.clock ?? realClock;
    this.#random = opts.random;
    this.#cache = new ReviewCache<Decision>({
      ttlMs: (d) => (d.allowed ? opts.allowCacheTtlMs : opts.denyCacheTtlMs),
      clock: opts.clock,
      max: opts.max,
    });
  }

  /** May `user` use `verb` (the lowercased HTTP method) on the non-resource URL `path`? */
  async authorize(user: UserInfo, verb: string, path: string): Promise<Decision> {
    if (user.groups.some((g) => ALWAYS_ALLOW_GROUPS.includes(g))) return { allowed: true, reason: "" };
    if (this.#alwaysAllowed(path)) return { allowed: true, reason: "" };
    const api = this.#api;
    if (!api) return { allowed: false, reason: "" };
    const spec: V1SubjectAccessReviewSpec = {
      user: user.username,
      groups: user.groups,
      nonResourceAttributes: { path, verb },
      ...(user.uid !== undefined && { uid: user.uid }),
      ...(user.extra !== undefined && { extra: user.extra }),
    };
    return this.#cache.get(JSON.stringify(spec), async () => {
      const res = await withWebhookBackoff(
        async () => {
          const timeout = deadline(
            this.#clock,
            REVIEW_TIMEOUT_MS,
            () => new Error(`SubjectAccessReview: no answer within ${REVIEW_TIMEOUT_MS} ms`),
          );
          try {
            return await api.createSubjectAccessReview(
              { body: { apiVersion: "authorization.k8s.io/v1", kind: "SubjectAccessReview", spec } },
              abortableRequest(timeout.signal),
            );
          } finally {
            timeout.cancel();
          }
        },
        { clock: this.#clock, ...(this.#random && { random: this.#random }) },
      );
      return { allowed: res.status?.allowed === true, reason: res.status?.reason ?? "" };
    });
  }
}
