import assert from "node:assert/strict";
import { X509Certificate } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { createServer } from "node:https";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, test } from "node:test";
import { once } from "node:events";
import { connect as netConnect, type Socket } from "node:net";
import { connect } from "node:tls";
import { Registry } from "prom-client";
import type { V1SubjectAccessReview, V1TokenReview } from "@kubernetes/client-node";
import { probe } from "../../src/controlplane/https-probe.js";
import { withFlagNames } from "../../src/app/flag-types.js";
import { RUN_FLAGS, toRunConfig } from "../../src/app/options.js";
import { ANONYMOUS, bearerToken, DelegatingAuthenticator } from "../../src/runtime/auth/authentication.js";
import { alwaysAllowPaths, DelegatingAuthorizer } from "../../src/runtime/auth/authorization.js";
import { ReviewCache } from "../../src/runtime/auth/review-cache.js";
import { FakeClock } from "../../src/runtime/clock.js";
import { requestURL, serve } from "../../src/runtime/server.js";
import { PAIR_NAME, selfSignedCertKey, servingCert } from "../../src/runtime/serving-cert.js";
import { silentLogger } from "../../src/runtime/logger.js";
import { waitFor } from "../../src/util/wait.js";

describe("--authorization-always-allow-paths as upstream's path authorizer", () => {
  test("whole paths, with or without the leading slash; a trailing * is a prefix", () => {
    const allowed = alwaysAllowPaths(["/healthz", "readyz", "/debug/*"]);
    assert.ok(allowed("/healthz"));
    assert.ok(allowed("/readyz"));
    assert.ok(allowed("/debug/pprof/heap"));
    assert.ok(!allowed("/healthz/ping"), "no prefix without *");
    assert.ok(!allowed("/metrics"));
    assert.ok(!allowed("/"));
  });
  test("an empty entry is /; a * anywhere but last is refused", () => {
    assert.ok(alwaysAllowPaths(["/"])("/"));
    assert.ok(!alwaysAllowPaths([])("/healthz"));
    assert.throws(() => alwaysAllowPaths(["/a*/b"]), /only trailing \* allowed in "\/a\*\/b"/);
  });
});

describe("ReviewCache", () => {
  test("keeps each result for its own TTL; 0 keeps nothing", async () => {
    const clock = new FakeClock(1_000);
    const cache = new ReviewCache<{ ok: boolean }>({ ttlMs: (r) => (r.ok ? 10_000 : 0), clock });
    let reviews = 0;
    const review = (ok: boolean) => () => Promise.resolve({ ok: (++reviews, ok) });
    await cache.get("a", review(true));
    await cache.get("a", review(true));
    assert.equal(reviews, 1, "cached");
    clock.advance(9_999);
    await cache.get("a", review(true));
    assert.equal(reviews, 1, "still within the TTL");
    clock.advance(2);
    await cache.get("a", review(true));
    assert.equal(reviews, 2, "expired");
    await cache.get("b", review(false));
    await cache.get("b", review(false));
    assert.equal(reviews, 4, "a TTL of 0 is not cached");
  });
  test("bounded: the least recently used result goes first", async () => {
    const cache = new ReviewCache<{ key: string }>({ ttlMs: () => 60_000, max: 2 });
    const asked: string[] = [];
    const get = (key: string) => cache.get(key, () => (asked.push(key), Promise.resolve({ key })));
    for (const key of ["a", "b", "a", "c", "a", "b"]) await get(key);
    assert.deepEqual(asked, ["a", "b", "c", "b"]);
    assert.equal(cache.size, 2);
  });
  test("concurrent requests for a key share one review; a failed review is not kept", async () => {
    const cache = new ReviewCache<{ n: number }>({ ttlMs: () => 60_000 });
    let reviews = 0;
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const slow = async () => {
      reviews++;
      await gate;
      return { n: reviews };
    };
    const both = Promise.all([cache.get("k", slow), cache.get("k", slow)]);
    release();
    assert.deepEqual(await both, [{ n: 1 }, { n: 1 }]);
    assert.equal(reviews, 1);
    await assert.rejects(cache.get("x", () => Promise.reject(new Error("apiserver down"))));
    assert.deepEqual(await cache.get("x", () => Promise.resolve({ n: 9 })), { n: 9 });
  });
});

describe("DelegatingAuthenticator", () => {
  const reviewer = (valid: Record<string, string>) => {
    const seen: string[] = [];
    return {
      seen,
      api: {
        createTokenReview: ({ body }: { body: V1TokenReview }): Promise<V1TokenReview> => {
          const token = body.spec.token ?? "";
          seen.push(token);
          const username = valid[token];
          return Promise.resolve({
            spec: body.spec,
            status: username
              ? { authenticated: true, user: { username, groups: ["team"] } }
              : { authenticated: false },
          });
        },
      },
    };
  };

  test("the Authorization header as upstream's bearer token authenticator reads it", () => {
    assert.equal(bearerToken(undefined), "none");
    assert.equal(bearerToken("Basic abc"), "none");
    assert.equal(bearerToken("Bearer"), "none");
    assert.deepEqual(bearerToken("bearer abc"), { token: "abc" });
    assert.deepEqual(bearerToken("  Bearer abc extra "), { token: "abc" });
    assert.equal(bearerToken("Bearer  abc"), "invalid");
  });
  test("no token: anonymous; a token the TokenReview rejects: unauthorized; a valid one: its user, cached", async () => {
    const { api, seen } = reviewer({ good: "alice" });
    const authn = new DelegatingAuthenticator(api, { cacheTtlMs: 10_000 });
    assert.deepEqual(await authn.authenticate(undefined), ANONYMOUS);
    assert.equal(await authn.authenticate("Bearer bad"), undefined);
    assert.deepEqual(await authn.authenticate("Bearer good"), {
      username: "alice",
      uid: undefined,
      groups: ["team", "system:authenticated"],
      extra: undefined,
    });
    await authn.authenticate("Bearer good");
    await authn.authenticate("Bearer bad");
    assert.deepEqual(seen, ["bad", "good"], "both outcomes are cached");
  });
  test("a failing TokenReview is unauthorized; without a client every request is anonymous, as upstream", async () => {
    const failing = new DelegatingAuthenticator(
      { createTokenReview: () => Promise.reject(new Error("connection refused")) },
      { cacheTtlMs: 10_000 },
    );
    assert.equal(await failing.authenticate("Bearer x"), undefined);
    const none = new DelegatingAuthenticator(undefined, { cacheTtlMs: 10_000 });
    assert.deepEqual(await none.authenticate("Bearer x"), ANONYMOUS);
  });
});

describe("DelegatingAuthorizer", () => {
  const opts = {
    alwaysAllowPaths: ["/healthz", "/readyz", "/livez"],
    allowCacheTtlMs: 10_000,
    denyCacheTtlMs: 10_000,
  };
  const alice = { username: "alice", uid: "u1", groups: ["system:authenticated"] };

  test("asks a SubjectAccessReview for the non-resource URL and verb, and caches the decision", async () => {
    const specs: unknown[] = [];
    const authz = new DelegatingAuthorizer(
      {
        createSubjectAccessReview: ({ body }: { body: V1SubjectAccessReview }) => {
          specs.push(body.spec);
          return Promise.resolve({ spec: body.spec, status: { allowed: false, reason: "no binding" } });
        },
      },
      opts,
    );
    assert.deepEqual(await authz.authorize(alice, "get", "/metrics"), {
      allowed: false,
      reason: "no binding",
    });
    await authz.authorize(alice, "get", "/metrics");
    assert.deepEqual(specs, [
      {
        user: "alice",
        uid: "u1",
        groups: ["system:authenticated"],
        nonResourceAttributes: { path: "/metrics", verb: "get" },
      },
    ]);
    assert.deepEqual(await authz.authorize(ANONYMOUS, "get", "/livez"), { allowed: true, reason: "" });
    const master = { username: "admin", groups: ["system:masters"] };
    assert.equal((await authz.authorize(master, "post", "/anything")).allowed, true);
    assert.equal(specs.length, 1, "always-allowed paths and system:masters need no review");
  });
  test("without a client only the always-allowed paths and system:masters are allowed, as upstream", async () => {
    const authz = new DelegatingAuthorizer(undefined, opts);
    assert.equal((await authz.authorize(alice, "get", "/metrics")).allowed, false);
    assert.equal((await authz.authorize(ANONYMOUS, "get", "/healthz")).allowed, true);
  });
});

test("requestURL: targets Node's parser accepts but URL does not are undefined (a 400)", () => {
  assert.equal(requestURL("//["), undefined);
  assert.equal(requestURL("http://a:b@c:99999/"), undefined);
  assert.equal(requestURL("/metrics?x=1")?.pathname, "/metrics");
  assert.equal(requestURL("/healthz?verbose")?.searchParams.has("verbose"), true);
});

describe("servingCert as SecureServingOptions.MaybeDefaultWithSelfSignedCerts", () => {
  const bind = { bindAddress: "0.0.0.0", certFile: "", keyFile: "" };

  test("no files: a self-signed serving certificate for localhost and 127.0.0.1 and its CA, in memory; TLS verifies with the CA", async () => {
    const cert = await servingCert({ ...bind, certDir: "" });
    assert.equal(cert.source, "generated self-signed in memory");
    const [leaf, ca] = cert.cert
      .split(/(?<=-----END CERTIFICATE-----)\n/)
      .filter((p) => p.includes("BEGIN"))
      .map((p) => new X509Certificate(p));
    assert.ok(leaf && ca);
    assert.match(leaf.subject, /^CN=localhost@\d+$/);
    assert.match(ca.subject, /^CN=localhost-ca@\d+$/);
    assert.ok(ca.ca && !leaf.ca);
    assert.ok(leaf.verify(ca.publicKey));
    assert.equal(leaf.subjectAltName, "DNS:localhost, IP Address:127.0.0.1, DNS:localhost");
    const server = createServer({ cert: cert.cert, key: cert.key }, (_req, res) => res.end("ok"));
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    try {
      const { port } = server.address() as AddressInfo;
      assert.deepEqual(await probe(`https://127.0.0.1:${port}/`, { ca: ca.toString() }), {
        status: 200,
        body: "ok",
      });
    } finally {
      server.close();
    }
  });
  test("a specific bind address is in the certificate instead of the localhost alternate", async () => {
    const cert = await servingCert({ ...bind, bindAddress: "10.1.2.3", certDir: "" });
    assert.equal(
      new X509Certificate(cert.cert).subjectAltName,
      "DNS:localhost, IP Address:127.0.0.1, IP Address:10.1.2.3",
    );
  });
  test("--cert-dir: generated once and written (key 0600), then read back; one file of the pair alone is an error", async () => {
    const dir = mkdtempSync(join(tmpdir(), "kvc-cert-"));
    try {
      const first = await servingCert({ ...bind, certDir: join(dir, "certs") });
      const crt = join(dir, "certs", `${PAIR_NAME}.crt`);
      const key = join(dir, "certs", `${PAIR_NAME}.key`);
      assert.equal(readFileSync(crt, "utf8"), first.cert);
      assert.equal(statSync(key).mode & 0o777, 0o600);
      const second = await servingCert({ ...bind, certDir: join(dir, "certs") });
      assert.equal(second.cert, first.cert);
      assert.equal(second.source, crt);
      rmSync(key);
      await assert.rejects(servingCert({ ...bind, certDir: join(dir, "certs") }), /exists but .* does not/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
  test("--tls-cert-file/--tls-private-key-file: both or neither; an unreadable file names its flag", async () => {
    const dir = mkdtempSync(join(tmpdir(), "kvc-cert-"));
    try {
      await assert.rejects(
        servingCert({ ...bind, certDir: "", certFile: "x.crt" }),
        /--tls-private-key-file: required/,
      );
      writeFileSync(join(dir, "k"), "key");
      await assert.rejects(
        servingCert({ ...bind, certDir: "", certFile: join(dir, "missing"), keyFile: join(dir, "k") }),
        /^Error: --tls-cert-file: ENOENT/,
      );
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("secure serving flags", () => {
  const NAMED_FLAGS = withFlagNames(RUN_FLAGS);
  // As yargs hands them over: each flag's value through its declared coercion.
  const coerced = (name: string, value: unknown): unknown => {
    const flag = NAMED_FLAGS[name as keyof typeof RUN_FLAGS] as { coerce?: (v: unknown) => unknown };
    return flag.coerce ? flag.coerce(value) : value;
  };
  const defaults = Object.fromEntries(
    Object.entries(RUN_FLAGS).map(([name, flag]) => [
      name,
      "default" in flag ? coerced(name, flag.default) : undefined,
    ]),
  );
  const config = (flags: Record<string, unknown>) =>
    toRunConfig({
      ...defaults,
      "leader-elect": false,
      ...Object.fromEntries(Object.entries(flags).map(([n, v]) => [n, coerced(n, v)])),
    });
  test("KCM's defaults: 10257, in-memory certificate, health paths always allowed, 10 s caches", () => {
    const c = config({});
    assert.equal(c.securePort, 10257);
    assert.equal(c.bindAddress, "0.0.0.0");
    assert.deepEqual([c.certDir, c.tlsCertFile, c.tlsPrivateKeyFile], ["", "", ""]);
    assert.equal(c.tlsMinVersion, undefined);
    assert.deepEqual(c.authentication, { kubeconfig: undefined, cacheTtlMs: 10_000 });
    assert.deepEqual(c.authorization, {
      kubeconfig: undefined,
      alwaysAllowPaths: ["/healthz", "/readyz", "/livez"],
      allowCacheTtlMs: 10_000,
      denyCacheTtlMs: 10_000,
    });
  });
  test("bad values are one sentence naming the flag", () => {
    const bad = (flag: string, value: unknown, message: RegExp) => {
      assert.throws(() => config({ [flag]: value }), message);
    };
    bad("tls-min-version", "TLS1.2", /^Error: --tls-min-version: unknown tls version "TLS1.2"/);
    bad(
      "authorization-always-allow-paths",
      "/a*/b",
      /^Error: --authorization-always-allow-paths: only trailing/,
    );
    bad(
      "authentication-kubeconfig",
      "/nonexistent",
      /^Error: --authentication-kubeconfig: \/nonexistent: no such file/,
    );
    bad(
      "authorization-webhook-cache-authorized-ttl",
      "10",
      /^Error: --authorization-webhook-cache-authorized-ttl/,
    );
    assert.equal(config({ "tls-min-version": "VersionTLS13" }).tlsMinVersion, "TLSv1.3");
    assert.deepEqual(config({ "authorization-always-allow-paths": "" }).authorization.alwaysAllowPaths, []);
  });
});

test("serve reloads rotated certificate files from the next connection on; a mismatched pair keeps the current one", async () => {
  const dir = mkdtempSync(join(tmpdir(), "kvc-cert-"));
  const files = { cert: join(dir, "tls.crt"), key: join(dir, "tls.key") };
  const write = (pair: { cert: string; key: string }) => {
    writeFileSync(files.cert, pair.cert);
    writeFileSync(files.key, pair.key);
  };
  const [a, b] = await Promise.all([
    selfSignedCertKey("localhost", { ips: [], dns: [] }),
    selfSignedCertKey("localhost", { ips: [], dns: [] }),
  ]);
  write(a);
  const warnings: string[] = [];
  const served = await serve({
    bindAddress: "127.0.0.1",
    port: 0,
    cert: await servingCert({
      bindAddress: "127.0.0.1",
      certDir: "",
      certFile: files.cert,
      keyFile: files.key,
    }),
    authenticator: new DelegatingAuthenticator(undefined, { cacheTtlMs: 0 }),
    authorizer: new DelegatingAuthorizer(undefined, {
      alwaysAllowPaths: ["/healthz"],
      allowCacheTtlMs: 0,
      denyCacheTtlMs: 0,
    }),
    registry: new Registry(),
    healthz: [],
    readyz: [],
    logger: { ...silentLogger, warn: (_o, msg) => void warnings.push(msg) },
    certReloadMs: 20,
  });
  const peer = () =>
    new Promise<string>((resolve, reject) => {
      const socket = connect({ host: "127.0.0.1", port: served.port, rejectUnauthorized: false }, () => {
        resolve(socket.getPeerCertificate().fingerprint256);
        socket.end();
      });
      socket.on("error", reject);
    });
  const fingerprint = (pem: string) => new X509Certificate(pem).fingerprint256;
  try {
    assert.equal(await peer(), fingerprint(a.cert));
    writeFileSync(files.cert, b.cert); // half-way through a rotation: b's certificate, a's key
    await waitFor(() => warnings.length > 0, { timeoutMs: 10_000, what: "the mismatch to be noticed" });
    assert.equal(await peer(), fingerprint(a.cert), "a mismatched pair is not served");
    write(b);
    await waitFor(async () => (await peer()) === fingerprint(b.cert), {
      timeoutMs: 10_000,
      what: "the rotated certificate to be served",
    });
  } finally {
    await served.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

describe("serve: connection limits near the kube-apiserver's", () => {
  const start = async (limits?: Parameters<typeof serve>[0]["limits"]) =>
    serve({
      bindAddress: "127.0.0.1",
      port: 0,
      cert: await servingCert({ bindAddress: "127.0.0.1", certDir: "", certFile: "", keyFile: "" }),
      authenticator: new DelegatingAuthenticator(undefined, { cacheTtlMs: 0 }),
      authorizer: new DelegatingAuthorizer(undefined, {
        alwaysAllowPaths: ["/healthz"],
        allowCacheTtlMs: 0,
        denyCacheTtlMs: 0,
      }),
      registry: new Registry(),
      healthz: [],
      readyz: [],
      logger: silentLogger,
      ...(limits && { limits }),
    });
  /** Resolves when the server closes `socket`, rejects after `ms`. */
  const closedWithin = (socket: Socket, ms: number) =>
    waitFor(() => socket.destroyed || socket.closed, {
      timeoutMs: ms,
      what: "the server to close the connection",
    });

  test("by default: 1,024 connections, 32 s for headers (upstream's ReadHeaderTimeout), 60 s for a request", async () => {
    const served = await start();
    try {
      assert.equal(served.server.maxConnections, 1024);
      assert.equal(served.server.headersTimeout, 32_000);
      assert.equal(served.server.requestTimeout, 60_000);
    } finally {
      await served.close();
    }
  });

  test("a connection that never starts its TLS handshake is closed after the handshake timeout", async () => {
    const served = await start({ handshakeTimeoutMs: 300 });
    const socket = netConnect(served.port, "127.0.0.1");
    socket.on("error", () => {});
    try {
      await closedWithin(socket, 5_000);
    } finally {
      socket.destroy();
      await served.close();
    }
  });

  test("a request whose headers never end is answered 408 and closed after the headers timeout", async () => {
    const served = await start({ headersTimeoutMs: 300, requestTimeoutMs: 600, checkIntervalMs: 50 });
    const socket = connect({ host: "127.0.0.1", port: served.port, rejectUnauthorized: false });
    socket.on("error", () => {});
    let answer = "";
    socket.setEncoding("utf8");
    socket.on("data", (chunk: string) => (answer += chunk));
    try {
      await once(socket, "secureConnect");
      socket.write("GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ");
      await closedWithin(socket, 5_000);
      assert.match(answer, /^HTTP\/1.1 408 /);
    } finally {
      socket.destroy();
      await served.close();
    }
  });

  test("connections beyond maxConnections are closed as they arrive; the held ones still work", async () => {
    const served = await start({ maxConnections: 2 });
    const open = () => {
      const socket = connect({ host: "127.0.0.1", port: served.port, rejectUnauthorized: false });
      socket.on("error", () => {});
      return socket;
    };
    const held = [open(), open()];
    try {
      await Promise.all(held.map((s) => once(s, "secureConnect")));
      const extra = open();
      await closedWithin(extra, 5_000);
      held[0]?.write("GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
      const [reply] = (await once(held[0]!, "data")) as [Buffer];
      assert.match(reply.toString(), /^HTTP\/1.1 200 /);
    } finally {
      for (const s of held) s.destroy();
      await served.close();
    }
  });
});

test("/readyz?verbose: a failing check's reason only to authenticated clients; anonymous ones see it withheld, as upstream", async () => {
  const served = await serve({
    bindAddress: "127.0.0.1",
    port: 0,
    cert: await servingCert({ bindAddress: "127.0.0.1", certDir: "", certFile: "", keyFile: "" }),
    authenticator: new DelegatingAuthenticator(
      {
        createTokenReview: ({ body }: { body: V1TokenReview }) =>
          Promise.resolve({
            spec: body.spec,
            status:
              body.spec.token === "operator"
                ? { authenticated: true, user: { username: "operator", groups: [] } }
                : { authenticated: false },
          }),
      },
      { cacheTtlMs: 0 },
    ),
    authorizer: new DelegatingAuthorizer(undefined, {
      alwaysAllowPaths: ["/readyz"],
      allowCacheTtlMs: 0,
      denyCacheTtlMs: 0,
    }),
    registry: new Registry(),
    healthz: [],
    readyz: [
      {
        name: "leader-election-lease",
        showReason: true,
        check: () => {
          throw new Error('leases "kvc" is forbidden: User "system:serviceaccount:ns:sa"');
        },
      },
      {
        name: "other",
        check: () => {
          throw new Error("internal detail");
        },
      },
    ],
    logger: silentLogger,
  });
  try {
    const url = `https://127.0.0.1:${served.port}/readyz?verbose`;
    const anonymous = await probe(url);
    assert.equal(anonymous.status, 500);
    assert.match(anonymous.body, /^\[-\]leader-election-lease failed: reason withheld$/m);
    assert.doesNotMatch(anonymous.body, /forbidden|serviceaccount/);
    const operator = await probe(url, { token: "operator" });
    assert.match(operator.body, /^\[-\]leader-election-lease failed: leases "kvc" is forbidden/m);
    assert.match(operator.body, /^\[-\]other failed: reason withheld$/m);
  } finally {
    await served.close();
  }
});
