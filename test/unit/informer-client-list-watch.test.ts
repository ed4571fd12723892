import assert from "node:assert/strict";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { after, before, describe, test } from "node:test";
import { CoreV1Api, KubeConfig, StorageV1Api, type V1PersistentVolume } from "@kubernetes/client-node";
import { isGone } from "../../src/runtime/api-errors.js";
import { clientListWatch, resources, type WatchEvent } from "../../src/runtime/informer/index.js";

/** A stand-in apiserver for the wire format: one list, a watch that sends one event then goes quiet. */
describe("client-node lister-watcher", () => {
  let server: Server;
  const urls: URL[] = [];
  let kc: KubeConfig;

  before(async () => {
    server = createServer((req, res) => {
      const url = new URL(req.url ?? "/", "http://x");
      urls.push(url);
      const q = url.searchParams;
      if (q.get("labelSelector") === "hang") return; // never answers
      if (q.get("watch") !== "true") {
        res.setHeader("content-type", "application/json");
        res.end(
          JSON.stringify({
            kind: "PersistentVolumeList",
            apiVersion: "v1",
            metadata: { resourceVersion: "5", continue: "next" },
            items: [
              { metadata: { name: "a", resourceVersion: "3", creationTimestamp: "2024-01-01T00:00:00Z" } },
            ],
          }),
        );
      } else if (q.get("resourceVersion") === "1") {
        res.statusCode = 410;
        res.end(JSON.stringify({ kind: "Status", code: 410, reason: "Expired" }));
      } else {
        res.write(
          JSON.stringify({
            type: "ADDED",
            object: {
              kind: "PersistentVolume",
              apiVersion: "v1",
              metadata: { name: "b", resourceVersion: "6", creationTimestamp: "2024-01-02T00:00:00Z" },
            },
          }) + "\n",
        );
        // then silence: only the client's inactivity timeout ends this watch
      }
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    kc = new KubeConfig();
    kc.loadFromOptions({
      clusters: [
        {
          name: "c",
          server: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
          skipTLSVerify: true,
        },
      ],
      users: [{ name: "u" }],
      contexts: [{ name: "x", cluster: "c", user: "u" }],
      currentContext: "x",
    });
  });

  after(async () => {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });

  const apis = () => ({ core: kc.makeApiClient(CoreV1Api), storage: kc.makeApiClient(StorageV1Api) });
  const lw = () =>
    clientListWatch<V1PersistentVolume>(
      kc,
      apis(),
      resources.persistentVolumes,
      { labelSelector: "app=x" },
      {
        watchInactivityTimeoutMs: 300,
      },
    );

  test("lists a page with limit, continue and the scope's selector, as typed objects", async () => {
    const page = await lw().list({ limit: 2, continue: "prev" }, new AbortController().signal);
    const q = urls.at(-1)!.searchParams;
    assert.equal(urls.at(-1)!.pathname, "/api/v1/persistentvolumes");
    assert.deepEqual([q.get("limit"), q.get("continue"), q.get("labelSelector")], ["2", "prev", "app=x"]);
    assert.equal(page.resourceVersion, "5");
    assert.equal(page.continue, "next");
    assert.ok(page.items[0]?.metadata?.creationTimestamp instanceof Date);
  });

  test("decodes watch events into the same typed objects; the client's inactivity timeout is a clean end", async () => {
    const events: WatchEvent<V1PersistentVolume>[] = [];
    await lw().watch(
      { resourceVersion: "5", timeoutSeconds: 400, allowWatchBookmarks: true },
      (e) => events.push(e),
      new AbortController().signal,
    );
    const q = urls.at(-1)!.searchParams;
    assert.deepEqual(
      [q.get("watch"), q.get("resourceVersion"), q.get("timeoutSeconds"), q.get("allowWatchBookmarks")],
      ["true", "5", "400", "true"],
    );
    assert.equal(events.length, 1);
    const e = events[0]!;
    assert.ok(e.type === "ADDED" && e.object.metadata?.creationTimestamp instanceof Date);
  });

  test("a 410 answer to a watch rejects as Gone", async () => {
    await assert.rejects(
      lw().watch(
        { resourceVersion: "1", timeoutSeconds: 400, allowWatchBookmarks: true },
        () => {},
        new AbortController().signal,
      ),
      (err) => isGone(err),
    );
  });

  test("a list request is cancelled by its signal", async () => {
    const hanging = clientListWatch<V1PersistentVolume>(
      kc,
      apis(),
      resources.persistentVolumes,
      { labelSelector: "hang" },
      { watchInactivityTimeoutMs: 300 },
    );
    const ac = new AbortController();
    const listing = hanging.list({ limit: 1 }, ac.signal);
    ac.abort(new Error("stalled"));
    await assert.rejects(listing, /stalled/);
  });
});
