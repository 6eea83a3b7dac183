import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { createNodeClient, type SessionmuxClient } from "../../src/client/node.js";
import { ConsoleLink } from "../../web/src/console-link.js";
import { SessionCache } from "../../web/src/session-cache.js";
import { SessionModel } from "../../web/src/session-model.js";
import { ADMIN_TOKEN, startTestHost, type TestHost } from "../support/host.js";
import { assistantText, readLog, turnEnds } from "./host-log.js";

/** The Web Storage API over a Map: the shape `localStorage` has in the browser. */
class MemoryStorage implements Storage {
  private readonly map = new Map<string, string>();
  get length() {
    return this.map.size;
  }
  clear() {
    this.map.clear();
  }
  getItem(key: string) {
    return this.map.get(key) ?? null;
  }
  key(index: number) {
    return [...this.map.keys()][index] ?? null;
  }
  removeItem(key: string) {
    this.map.delete(key);
  }
  setItem(key: string, value: string) {
    this.map.set(key, value);
  }
}

describe("console session model against a real host", () => {
  let host: TestHost;
  let client: SessionmuxClient;
  let link: ConsoleLink;
  let sessionId: string;

  beforeAll(async () => {
    host = await startTestHost();
    client = createNodeClient({ url: host.wsUrl, token: ADMIN_TOKEN });
    link = new ConsoleLink(() => client, ADMIN_TOKEN);
    const { header } = await client.call("session.create", { title: "model" });
    sessionId = header.sessionId;
    await client.prompt({ sessionId, text: "/stream 30 1" });
    await vi.waitFor(async () => expect(turnEnds(await readLog(client, sessionId))).toBe(1), {
      timeout: 20_000,
    });
  });

  afterAll(async () => {
    await client?.close();
    await host?.dispose();
  });

  it("rebuilds a session missing from the cache through the shared reducer, caches it, and resumes from the cache", async () => {
    const storage = new MemoryStorage();
    const cache = new SessionCache(storage, ADMIN_TOKEN);
    const expected = assistantText(await readLog(client, sessionId));
    const model = new SessionModel(sessionId, link, cache, () => {});
    model.start();
    await expect.poll(() => model.mode, { timeout: 10_000 }).toBe("live");
    expect(model.transcript.messages.find((m) => m.role === "assistant")?.text).toBe(expected);
    model.dispose();
    const cached = cache.load(sessionId);
    expect(cached?.events.length).toBe(model.transcript.lastSeq);

    // A second visit paints from the cache before any answer from the host arrives.
    const again = new SessionModel(sessionId, link, cache, () => {});
    again.start();
    expect(again.transcript.lastSeq).toBe(cached?.events.length);
    expect(again.mode).toBe("replaying");
    await expect.poll(() => again.mode, { timeout: 10_000 }).toBe("live");
    again.dispose();
  });

  it("discards a rebuild that returns after the session was deleted locally: nothing painted, nothing cached", async () => {
    const storage = new MemoryStorage();
    const cache = new SessionCache(storage, ADMIN_TOKEN);
    let changes = 0;
    const model = new SessionModel(sessionId, link, cache, () => changes++);
    model.start(); // the rebuild's `session.page` is now in flight
    model.deleted();
    // A later call on the same socket is answered after the rebuild's read.
    await link.page(sessionId, 0, 1);
    await link.page(sessionId, 0, 1);
    expect(model.transcript.messages).toEqual([]);
    expect(model.mode).toBe("gone");
    expect(changes).toBe(0);
    expect(cache.load(sessionId)).toBeUndefined();
    expect(storage.length).toBe(0);
  });

  it("restarts a rebuild superseded by an edit, and ends with the host's log", async () => {
    const cache = new SessionCache(new MemoryStorage(), ADMIN_TOKEN);
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
});
