import assert from "node:assert/strict";
import { once } from "node:events";
import { createServer, type IncomingMessage } from "node:http";
import { after, before, describe, test } from "node:test";
import { KubeConfig } from "@kubernetes/client-node";
import { apiStatus, isConflict } from "../../src/runtime/api-errors.js";
import { ApiClients } from "../../src/runtime/client.js";

/* ApiClients.requestJson against a local HTTP server that records each request and answers JSON. */

interface Seen {
  method: string | undefined;
  url: string | undefined;
  headers: IncomingMessage["headers"];
  body: string;
}

const seen: Seen[] = [];
const server = createServer((req, res) => {
  let body = "";
  req.on("data", (chunk: Buffer) => (body += chunk.toString()));
  req.on("end", () => {
    seen.push({ method: req.method, url: req.url, headers: req.headers, body });
    res.setHeader("Content-Type", "application/json");
    if (req.method === "PUT") {
      res.statusCode = 409;
      res.end(
        JSON.stringify({
          kind: "Status",
          code: 409,
          reason: "Conflict",
          message: "the object has been modified",
        }),
      );
    } else res.end(JSON.stringify({ items: [], metadata: { resourceVersion: "7", continue: "next" } }));
  });
});

function clients(): ApiClients {
  const { port } = server.address() as { port: number };
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: "c", server: `http://127.0.0.1:${port}`, skipTLSVerify: true }],
    users: [{ name: "u", token: "t0ken" }],
    contexts: [{ name: "x", cluster: "c", user: "u" }],
    currentContext: "x",
  });
  return new ApiClients(kc, { qps: -1, burst: 0, userAgent: "kvc-test" });
}

describe("ApiClients.requestJson", () => {
  before(async () => {
    server.listen(0, "127.0.0.1");
    await once(server, "listening");
  });
  after(() => server.close());

  test("a GET with its query, authenticated, answered with the parsed JSON", async () => {
    seen.length = 0;
    const answer = await clients().requestJson("GET", "/api/v1/persistentvolumes", {
      query: { limit: "5", continue: undefined, labelSelector: "a=b" },
    });
    assert.deepEqual(answer, { items: [], metadata: { resourceVersion: "7", continue: "next" } });
    const [req] = seen;
    assert.equal(req?.method, "GET");
    assert.equal(req.url, "/api/v1/persistentvolumes?limit=5&labelSelector=a%3Db");
    assert.equal(req.headers.authorization, "Bearer t0ken");
    assert.equal(req.headers["user-agent"], "kvc-test");
    assert.equal(req.headers.accept, "application/json");
  });

  test("a PUT sends its body as JSON; a 409 rejects as client-node's typed calls do", async () => {
    seen.length = 0;
    const body = { metadata: { name: "v", creationTimestamp: new Date("2026-12-04T10:00:00Z") }, extra: 1 };
    const put = clients().requestJson("PUT", "/api/v1/persistentvolumes/v", { body });
    await assert.rejects(put, (err: unknown) => {
      assert.ok(isConflict(err), "isConflict");
      assert.deepEqual(apiStatus(err), {
        code: 409,
        reason: "Conflict",
        message: "the object has been modified",
      });
      return true;
    });
    const [req] = seen;
    assert.equal(req?.headers["content-type"], "application/json");
    assert.deepEqual(JSON.parse(req.body), {
      metadata: { name: "v", creationTimestamp: "2026-12-04T10:00:00.000Z" },
      extra: 1,
    });
  });
});
