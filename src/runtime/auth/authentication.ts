import { createHash } from "node:crypto";
import type { AuthenticationV1Api, V1UserInfo } from "@kubernetes/client-node";
import { abortableRequest } from "../client.js";
import type { Clock } from "../clock.js";
import { ReviewCache } from "./review-cache.js";

/** The user a request acts as, as the apiserver's user.Info. */
export interface UserInfo {
  username: string;
  uid?: string | undefined;
  groups: string[];
  extra?: Record<string, string[]> | undefined;
}

export const ANONYMOUS: UserInfo = { username: "system:anonymous", groups: ["system:unauthenticated"] };
const AUTHENTICATED_GROUP = "system:authenticated";

/** Upstream's TokenRequestTimeout for delegated authentication. */
const REVIEW_TIMEOUT_MS = 10_000;

/** The bearer token of an Authorization header as upstream's bearertoken authenticator reads it. */
export function bearerToken(header: string | undefined): { token: string } | "none" | "invalid" {
  const auth = (header ?? "").trim();
  if (auth === "") return "none";
  const parts = auth.split(" ");
  if (parts.length < 2 || parts[0]?.toLowerCase() !== "bearer") return "none";
  const token = parts[1] ?? "";
  // Empty bearer tokens aren't valid (e.g. "Bearer  x"); upstream splits into at most 3 parts.
  return token === "" ? "invalid" : { token };
}

type Review = { authenticated: true; user: UserInfo } | { authenticated: false };

/**
 * Delegated authentication as kube-controller-manager's (apiserver DelegatingAuthenticationOptions):
 * a bearer token is checked with a TokenReview, cached for --authentication-token-webhook-cache-ttl
 * (authenticated or not); no Authorization header makes the request anonymous; a token that does not
 * authenticate, or a review that fails, is a 401. Without a TokenReview client (no
 * --authentication-kubeconfig and not in a cluster) every request is anonymous, as upstream.
 * Client certificates and front-proxy headers are not supported.
 */
export class DelegatingAuthenticator {
  readonly #reviews:
    { api: Pick<AuthenticationV1Api, "createTokenReview">; cache: ReviewCache<Review> } | undefined;

  constructor(
    api: Pick<AuthenticationV1Api, "createTokenReview"> | undefined,
    opts: { cacheTtlMs: number; clock?: Clock; max?: number },
  ) {
    this.#reviews = api && {
      api,
      cache: new ReviewCache<Review>({ ttlMs: () => opts.cacheTtlMs, clock: opts.clock, max: opts.max }),
    };
  }

  /** The request's user, or undefined when it must be answered 401 Unauthorized. */
  async authenticate(authorization: string | undefined): Promise<UserInfo | undefined> {
    if (!this.#reviews) return ANONYMOUS;
    const { api, cache } = this.#reviews;
    const bearer = bearerToken(authorization);
    if (bearer === "none") return ANONYMOUS;
    if (bearer === "invalid") return undefined;
    // Keyed by the token's hash, as upstream's token cache, so tokens are not kept in memory.
    const key = createHash("sha256").update(bearer.token).digest("hex");
    try {
      const review = await cache.get(key, async (): Promise<Review> => {
        const res = await api.createTokenReview(
          {
            body: {
              apiVersion: "authentication.k8s.io/v1",
              kind: "TokenReview",
              spec: { token: bearer.token },
            },
          },
          abortableRequest(AbortSignal.timeout(REVIEW_TIMEOUT_MS)),
        );
        const user = res.status?.user;
        if (res.status?.authenticated !== true || !user) return { authenticated: false };
        return { authenticated: true, user: withAuthenticatedGroup(user) };
      });
      return review.authenticated ? review.user : undefined;
    } catch {
      return undefined;
    }
  }
}

/** Upstream's AuthenticatedGroupAdder: an authenticated user is also in system:authenticated. */
function withAuthenticatedGroup(user: V1UserInfo): UserInfo {
  const groups = user.groups ?? [];
  const marked = groups.includes(AUTHENTICATED_GROUP) || groups.includes("system:unauthenticated");
  return {
    username: user.username ?? "",
    uid: user.uid,
    groups: marked ? groups : [...groups, AUTHENTICATED_GROUP],
    extra: user.extra,
  };
}
