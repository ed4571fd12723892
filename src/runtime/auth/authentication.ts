import { createHmac, randomBytes } from "node:crypto";
import type { AuthenticationV1Api, V1UserInfo } from "@kubernetes/client-node";
import { abortableRequest } from "../client.js";
import { deadline, realClock, type Clock } from "../clock.js";
import { ReviewCache } from "./review-cache.js";
import { withWebhookBackoff } from "./webhook-retry.js";

/** The user a request acts as, as the apiserver's user.Info. */
export interface UserInfo {
  username: string;
  uid?: string | undefined;
  groups: string[];
  extra?: Record<string, string[]> | undefined;
}

export const ANONYMOUS: UserInfo = { username: "system:anonymous", groups: ["system:unauthenticated"] };
const AUTHENTICATED_GROUP = "system:authenticated";

/** Upstream's TokenRequestTimeout for delegated authentication: all attempts of one review. */
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
 * a bearer token is checked with a TokenReview (retried as upstream's webhook), cached for
 * --authentication-token-webhook-cache-ttl (authenticated or not); no Authorization header makes the
 * request anonymous; a token that does not authenticate, or a review that fails, is a 401. Without a TokenReview client (no
 * --authentication-kubeconfig and not in a cluster) every request is anonymous, as upstream.
 * Client certificates and front-proxy headers are not supported.
 */
export class DelegatingAuthenticator {
  readonly #reviews:
    { api: Pick<AuthenticationV1Api, "createTokenReview">; cache: ReviewCache<Review> } | undefined;
  readonly #clock: Clock;
  readonly #random: (() => number) | undefined;
  /** As upstream's token cache: keys are HMACs under a key of this process, so they cannot be precomputed. */
  readonly #hmacKey = randomBytes(32);

  constructor(
    api: Pick<AuthenticationV1Api, "createTokenReview"> | undefined,
    opts: { cacheTtlMs: number; clock?: Clock; max?: number; random?: () => number },
  ) {
    this.#clock = opts.clock ?? realClock;
    this.#random = opts.random;
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
    // Keyed by the token's HMAC, as upstream's token cache, so tokens are not kept in memory.
    const key = createHmac("sha256", this.#hmacKey).update(bearer.token).digest("base64");
    try {
      const review = await cache.get(key, () => this.#review(api, bearer.token));
      return review.authenticated ? review.user : undefined;
    } catch {
      return undefined;
    }
  }

  async #review(api: Pick<AuthenticationV1Api, "createTokenReview">, token: string): Promise<Review> {
    // One deadline for every attempt, as upstream's; the client's limiter refuses a wait beyond it.
    const timeout = deadline(
      this.#clock,
      REVIEW_TIMEOUT_MS,
      () => new Error(`TokenReview: no answer within ${REVIEW_TIMEOUT_MS} ms`),
    );
    try {
      const res = await withWebhookBackoff(
        () =>
          api.createTokenReview(
            { body: { apiVersion: "authentication.k8s.io/v1", kind: "TokenReview", spec: { token } } },
            abortableRequest(timeout.signal),
          ),
        { clock: this.#clock, signal: timeout.signal, ...(this.#random && { random: this.#random }) },
      );
      const user = res.status?.user;
      if (res.status?.authenticated !== true || !user) return { authenticated: false };
      return { authenticated: true, user: withAuthenticatedGroup(user) };
    } finally {
      timeout.cancel();
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
