import "fake-indexeddb/auto";
import { createStore, keys } from "idb-keyval";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { type SessionEvent, SessionmuxError } from "../../protocol/index.js";
import { applyEvents, emptyTranscript, type TranscriptState } from "../../protocol/transcript.js";
import { createNodeClient, type SessionmuxClient } from "../../src/client/node.js";
import { ConsoleLink } from "../../web/src/console-link.js";
import { type CacheStores, SessionCache } from "../../web/src/session-cache.js";
import { SessionModel } from "../../web/src/session-model.js";
import { ADMIN_TOKEN, startTestHost, type TestHost } from "../support/host.js";
import { startTcpProxy } from "../support/tcp-proxy.js";
import { useTestHost } from "../support/use-test-host.js";
import { assistantText, readLog, turnEnds } from "./host-log.js";

let stores = 0;
/** A cache over fresh IndexedDB stores (fake-indexeddb: the same API as the browser's, in memory). */
function freshCache(): { cache: SessionCache; stores: CacheStores } {
  stores += 1;
  const pair = {
    data: createStore(`model-test-${stores}`, "entries"),
    usage: createStore(`model-test-usage-${stores}`, "usage"),
  };
  return { cache: new SessionCache("partition", pair), stores: pair };
}

/**
 * A session model over a client of its own that reaches the host through a TCP proxy the test can
 * cut, with every mode it takes recorded in order.
 */
async function modelBehindProxy(host: TestHost, sessionId: string) {
  const proxy = await startTcpProxy(host.port);
  const cut = createNodeClient({
    url: `ws://127.0.0.1:${proxy.port}/api/remote.mux`,
    token: ADMIN_TOKEN,
    backoff: { baseMs: 20, capMs: 100 },
  });
  const modes: string[] = [];
  const model: SessionModel = new SessionModel(
    sessionId,
    new ConsoleLink(() => cut, ADMIN_TOKEN),
    freshCache().cache,
    () => modes.push(model.mode),
  );
  return { proxy, cut, modes, model };
}

describe("console session model against a real host", () => {
  const testHost = useTestHost();
  let link: ConsoleLink;
  let sessionId: string;

  beforeAll(async () => {
    const { client } = testHost;
    link = new ConsoleLink(() => client, ADMIN_TOKEN);
    const { header } = await client.call("session.create", { title: "model" });
    sessionId = header.sessionId;
    await client.prompt({ sessionId, text: "/stream 30 1" });
    await vi.waitFor(async () => expect(turnEnds(await readLog(client, sessionId))).toBe(1), {
      timeout: 20_000,
    });
  });

  it("rebuilds a session missing from the cache through the shared reducer, caches it, and resumes from the cache", async () => {
    const { client } = testHost;
    const { cache } = freshCache();
    const expected = assistantText(await readLog(client, sessionId));
    const model = new SessionModel(sessionId, link, cache, () => {});
    model.start();
    await expect.poll(() => model.mode, { timeout: 10_000 }).toBe("live");
    expect(model.transcript.messages.find((m) => m.role === "assistant")?.text).toBe(expected);
    model.dispose();
    await cache.settled();
    const cached = await cache.load(sessionId);
    expect(cached?.events.length).toBe(model.transcript.lastSeq);

    // A second visit paints from the cache before any answer from the host arrives.
    const painted: { mode: string; lastSeq: number }[] = [];
    const again: SessionModel = new SessionModel(sessionId, link, cache, () =>
      painted.push({ mode: again.mode, lastSeq: again.transcript.lastSeq }),
    );
    again.start();
    await expect.poll(() => again.mode, { timeout: 10_000 }).toBe("live");
    expect(painted[0]).toEqual({ mode: "replaying", lastSeq: cached?.events.length });
    again.dispose();
  });

  it("discards a rebuild that returns after the session was deleted locally: nothing painted, nothing cached", async () => {
    const { cache, stores } = freshCache();
    let changes = 0;
    const model = new SessionModel(sessionId, link, cache, () => changes++);
    model.start(); // the rebuild's `session.page` is now in flight
    model.deleted();
    // A later call on the same socket is answered after the rebuild's read.
    await link.page(sessionId, { afterSeq: 0 }, 1);
    await link.page(sessionId, { afterSeq: 0 }, 1);
    expect(model.transcript.messages).toEqual([]);
    expect(model.mode).toBe("gone");
    expect(changes).toBe(0);
    await cache.settled();
    expect(await cache.load(sessionId)).toBeUndefined();
    expect(await keys(stores.data)).toEqual([]);
  });

  it("restarts a rebuild superseded by an edit, and ends with the host's log", async () => {
    const { client } = testHost;
    const { cache } = freshCache();
    const model = new SessionModel(sessionId, link, cache, () => {});
    model.start();
    model.touch(); // as the composer does on send
    await client.prompt({ sessionId, text: "after the edit" });
    await expect.poll(async () => turnEnds(await readLog(client, sessionId)), { timeout: 20_000 }).toBe(2);
    const log = await readLog(client, sessionId);
    await expect.poll(() => model.transcript.lastSeq, { timeout: 10_000 }).toBe(log.length);
    const texts = model.transcript.messages.filter((m) => m.role === "user").map((m) => m.text);
    expect(texts).toEqual(["/stream 30 1", "after the edit"]);
    model.dispose();
  });
  it("stops saying live the moment its stream is lost, and says it again only once caught up", async () => {
    const { host } = testHost;
    const { proxy, cut, modes, model } = await modelBehindProxy(host, sessionId);
    try {
      model.start();
      await expect.poll(() => model.mode, { timeout: 10_000 }).toBe("live");
      const before = modes.length;
      expect(proxy.cutAll()).toBeGreaterThan(0);
      // no longer live once the loss is known, and live again only after the new stream caught up
      await expect.poll(() => modes.slice(before), { timeout: 10_000 }).toContain("replaying");
      await expect.poll(() => model.mode, { timeout: 10_000 }).toBe("live");
      expect(modes.slice(before).at(-1)).toBe("live");
    } finally {
      model.dispose();
      await cut.close();
      await proxy.stop();
    }
  });
  it("says replaying, never stopped, while the host retries an open the store failed, and live once it opened", async () => {
    const { host, client } = testHost;
    const { proxy, cut, modes, model } = await modelBehindProxy(host, sessionId);
    const openRead = vi.spyOn(host.host, "openRead");
    try {
      model.start();
      await expect.poll(() => model.mode, { timeout: 10_000 }).toBe("live");
      // the stream opened again on the next socket cannot read the session, once: the host tries
      // again after its wait, and the stream stays open meanwhile
      openRead.mockRejectedValueOnce(new SessionmuxError("persistence_failure", "the database is away"));
      const calls = openRead.mock.calls.length;
      const before = modes.length;
      expect(proxy.cutAll()).toBeGreaterThan(0);
      await expect.poll(() => openRead.mock.calls.length, { timeout: 10_000 }).toBeGreaterThan(calls);
      const { seq } = await client.call("session.rename", { sessionId, title: "while the open waits" });
      await expect.poll(() => model.transcript.lastSeq, { timeout: 10_000 }).toBe(seq);
      await expect.poll(() => model.mode, { timeout: 10_000 }).toBe("live");
      expect(model.error).toBeUndefined();
      // the same stream, opened by the host's second try: the model never opened another
      expect(openRead.mock.calls.length).toBe(calls + 2);
      const after = modes.slice(before);
      expect(after).toContain("replaying");
      expect(after).not.toContain("stopped");
    } finally {
      openRead.mockRestore();
      model.dispose();
      await cut.close();
      await proxy.stop();
    }
  });
  it("says stopped, never live, when the host ends its follow stream with an error, and follows again by itself", async () => {
    const { host, client } = testHost;
    const { proxy, cut, modes, model } = await modelBehindProxy(host, sessionId);
    const openRead = vi.spyOn(host.host, "openRead");
    try {
      model.start();
      await expect.poll(() => model.mode, { timeout: 10_000 }).toBe("live");
      // the stream opened again on the next socket fails with an error the host does not retry
      openRead.mockRejectedValueOnce(new Error("a fault of the host"));
      const before = modes.length;
      expect(proxy.cutAll()).toBeGreaterThan(0);
      await expect.poll(() => model.mode, { timeout: 10_000 }).toBe("stopped");
      expect(model.error).toBe("internal_error");
      // opened again after its wait, from the last seq applied: live, and what came meanwhile is there
      const { seq } = await client.call("session.rename", { sessionId, title: "while stopped" });
      await expect.poll(() => model.mode, { timeout: 10_000 }).toBe("live");
      await expect.poll(() => model.transcript.lastSeq, { timeout: 10_000 }).toBe(seq);
      expect(model.error).toBeUndefined();
      // from the loss to the failure nothing said live; the next live came after it
      const after = modes.slice(before);
      const stopped = after.indexOf("stopped");
      expect(after.slice(0, stopped)).not.toContain("live");
      expect(after.indexOf("live")).toBeGreaterThan(stopped);
      expect(after).not.toContain("gone");
    } finally {
      openRead.mockRestore();
      model.dispose();
      await cut.close();
      await proxy.stop();
    }
  });
});

describe("console session model over a log longer than a page", () => {
  let host: TestHost;
  let client: SessionmuxClient;
  let link: ConsoleLink;

  beforeAll(async () => {
    host = await startTestHost();
    client = createNodeClient({ url: host.wsUrl, token: ADMIN_TOKEN });
    link = new ConsoleLink(() => client, ADMIN_TOKEN);
  });

  afterAll(async () => {
    await client?.close();
    await host?.dispose();
  });

  /** A session whose turns are `/stream` commands of these lengths, run one after another. */
  async function sessionOfTurns(...chunks: number[]): Promise<{ sessionId: string; log: SessionEvent[] }> {
    const { header } = await client.call("session.create", { title: "long turns" });
    for (const [i, count] of chunks.entries()) {
      await client.prompt({ sessionId: header.sessionId, text: `/stream ${count} 0` });
      await expect
        .poll(async () => turnEnds(await readLog(client, header.sessionId)), { timeout: 30_000 })
        .toBe(i + 1);
    }
    return { sessionId: header.sessionId, log: await readLog(client, header.sessionId) };
  }

  const shown = (state: TranscriptState) =>
    state.messages.map((m) => [m.id, m.role === "user" ? m.text : m.text]);

  it("shows the newest turns first, whole, then the older ones as the full log would", async () => {
    const { sessionId, log } = await sessionOfTurns(1500, 2);
    const { cache } = freshCache();
    const model = new SessionModel(sessionId, link, cache, () => {});
    model.start();
    await expect.poll(() => model.mode, { timeout: 10_000 }).toBe("live");
    const whole = applyEvents(emptyTranscript(), log);
    // the tail page holds the second turn from its start: it shows whole, and no more than it
    expect(model.older).toBe("more");
    expect(shown(model.transcript)).toEqual(shown(whole).slice(-2));
    expect(model.transcript.title).toBe("long turns");
    await model.loadOlder();
    expect(model.older).toBe("none");
    expect(model.transcript).toEqual(whole);
    model.dispose();
  });

  it("reads back past the tail page to the start of a turn longer than it", async () => {
    const { sessionId, log } = await sessionOfTurns(1500);
    const model = new SessionModel(sessionId, link, freshCache().cache, () => {});
    model.start();
    await expect.poll(() => model.mode, { timeout: 10_000 }).toBe("live");
    expect(model.older).toBe("none");
    expect(model.transcript).toEqual(applyEvents(emptyTranscript(), log));
    model.dispose();
  });

  it("caches the newest turns of a session past the per-session bound, opens from them, and reads the rest from the host", async () => {
    const { sessionId, log } = await sessionOfTurns(1500, 2);
    const lastTurn = log.findLastIndex((e) => e.type === "turn/start");
    const lastTurnBytes = log.slice(lastTurn).reduce((sum, e) => sum + JSON.stringify(e).length, 0);
    // room for the last turn (and the epoch's name), far from room for the long one before it
    const cache = new SessionCache("partition", freshCache().stores, {
      totalBytes: 64 * 1024 * 1024,
      sessionBytes: lastTurnBytes + 100,
    });
    const first = new SessionModel(sessionId, link, cache, () => {});
    first.start();
    await expect.poll(() => first.mode, { timeout: 10_000 }).toBe("live");
    first.dispose();
    await cache.settled();
    const cached = await cache.load(sessionId);
    expect(cached?.events.map((e) => e.seq)).toEqual(log.slice(lastTurn).map((e) => e.seq));
    expect(cached?.seed?.title).toBe("long turns");

    const again = new SessionModel(sessionId, link, cache, () => {});
    again.start();
    await expect.poll(() => again.mode, { timeout: 10_000 }).toBe("live");
    const whole = applyEvents(emptyTranscript(), log);
    expect(shown(again.transcript)).toEqual(shown(whole).slice(-2));
    while (again.older === "more") await again.loadOlder();
    expect(again.transcript).toEqual(whole);
    again.dispose();
  });

  it("keeps a window of the log in the cache, and paints from it on the next visit before reading older pages", async () => {
    const { sessionId, log } = await sessionOfTurns(1500, 2);
    const { cache } = freshCache();
    const first = new SessionModel(sessionId, link, cache, () => {});
    first.start();
    await expect.poll(() => first.mode, { timeout: 10_000 }).toBe("live");
    const window = first.transcript;
    first.dispose();
    await cache.settled();
    const cached = await cache.load(sessionId);
    expect(cached?.events.at(-1)?.seq).toBe(log.length);
    expect(cached?.events[0]?.seq).toBeGreaterThan(1);
    expect(cached?.seed?.title).toBe("long turns");

    const again = new SessionModel(sessionId, link, cache, () => {});
    again.start();
    await expect.poll(() => again.mode, { timeout: 10_000 }).toBe("live");
    expect(again.transcript).toEqual(window);
    expect(again.older).toBe("more");
    await again.loadOlder();
    expect(again.transcript).toEqual(applyEvents(emptyTranscript(), log));
    again.dispose();
  });
});
