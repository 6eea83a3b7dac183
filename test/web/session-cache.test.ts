import "fake-indexeddb/auto";
import { createStore, get, keys, set } from "idb-keyval";
import { describe, expect, it } from "vitest";
import type { SessionEvent } from "../../protocol/index.js";
import { type CacheStores, forgetBrowser, SessionCache } from "../../web/src/session-cache.js";

let opened = 0;
function freshStores(): CacheStores {
  opened += 1;
  return {
    data: createStore(`cache-test-${opened}`, "entries"),
    usage: createStore(`cache-test-usage-${opened}`, "usage"),
  };
}

/** A contiguous log of `n` user messages, each about `size` characters when stored. */
function log(n: number, size = 100): SessionEvent[] {
  return Array.from(
    { length: n },
    (_, i) =>
      ({
        seq: i + 1,
        at: 0,
        type: "user/message",
        data: { text: "x".repeat(size) },
      }) as unknown as SessionEvent,
  );
}

/** A log of turns of `perTurn` events each (a `turn/start`, then user messages of about `size` characters). */
function turns(n: number, perTurn: number, size = 100): SessionEvent[] {
  return log(n * perTurn, size).map((e, i) =>
    i % perTurn === 0
      ? ({
          seq: e.seq,
          at: 0,
          type: "turn/start",
          data: { turnId: `t${i}`, trigger: "prompt" },
        } as SessionEvent)
      : e,
  );
}

const SEED = { title: "long", model: null, origin: null, createdAt: 1, forkOf: null };

describe("console transcript cache (IndexedDB)", () => {
  it("keeps each token's partition apart: one partition never reads another's sessions", async () => {
    const stores = freshStores();
    const mine = new SessionCache("partition-a", stores);
    const theirs = new SessionCache("partition-b", stores);
    await mine.save("s1", { epoch: "e1", events: log(3) });
    expect((await mine.load("s1"))?.events).toHaveLength(3);
    expect(await theirs.load("s1")).toBeUndefined();
    await mine.saveRows([{ sessionId: "s1" } as never]);
    expect(await theirs.loadRows()).toEqual([]);
    expect(await mine.loadRows()).toHaveLength(1);
  });

  it("keeps the newer part of a long log with what its transcript takes from the log's start, and refuses one broken or without it", async () => {
    const cache = new SessionCache("p", freshStores());
    const seed = { title: "long", model: "demo-fast", origin: null, createdAt: 1, forkOf: null };
    const later = log(10).slice(4);
    await cache.save("s1", { epoch: "e", events: later, seed });
    expect(await cache.load("s1")).toEqual({ epoch: "e", events: later, seed });
    // without its seed, or with a hole, a later part is rebuilt from the host rather than trusted
    await cache.save("s2", { epoch: "e", events: later });
    expect(await cache.load("s2")).toBeUndefined();
    await cache.save("s3", { epoch: "e", events: [...later.slice(0, 2), ...later.slice(3)], seed });
    expect(await cache.load("s3")).toBeUndefined();
    // a log from its start needs none, and keeps none
    await cache.save("s4", { epoch: "e", events: log(3), seed });
    expect(await cache.load("s4")).toEqual({ epoch: "e", events: log(3) });
  });

  it("evicts the least recently used sessions of any partition once the total passes its bound", async () => {
    const stores = freshStores();
    let now = 0;
    const limits = { totalBytes: 5_000, sessionBytes: 4_000 };
    const a = new SessionCache("a", stores, limits, () => now);
    const b = new SessionCache("b", stores, limits, () => now);
    // Each session holds ~10 events of ~150 bytes: about 1,500 bytes.
    now = 1;
    await a.save("old", { epoch: "e", events: log(10) });
    now = 2;
    await b.save("used", { epoch: "e", events: log(10) });
    now = 3;
    await a.save("newer", { epoch: "e", events: log(10) });
    // Reading "old" makes it recently used: "used" is now the least recently used.
    now = 4;
    expect(await a.load("old")).toBeDefined();
    await a.settled();
    now = 5;
    await b.save("newest", { epoch: "e", events: log(10) });
    expect(await b.load("used")).toBeUndefined();
    for (const id of ["old", "newer"]) expect(await a.load(id), id).toBeDefined();
    expect(await b.load("newest")).toBeDefined();
    expect((await keys(stores.data)).sort()).toEqual(["a/s/newer", "a/s/old", "b/s/newest"]);
  });

  it("does not cache a session past the per-session bound, and drops its older copy", async () => {
    const stores = freshStores();
    const cache = new SessionCache("p", stores, { totalBytes: 1_000_000, sessionBytes: 2_000 });
    await cache.save("s", { epoch: "e", events: log(5) });
    expect(await cache.load("s")).toBeDefined();
    await cache.save("s", { epoch: "e", events: log(50) });
    expect(await cache.load("s")).toBeUndefined();
    expect(await keys(stores.usage)).toEqual([]);
  });

  it("keeps the newest turns of a session past the per-session bound that fit, from a turn's start, with its seed", async () => {
    const stores = freshStores();
    const bound = 2_000;
    const cache = new SessionCache("p", stores, { totalBytes: 1_000_000, sessionBytes: bound });
    const events = turns(10, 5);
    const size = (part: SessionEvent[]) => 1 + part.reduce((sum, e) => sum + JSON.stringify(e).length, 0);
    await cache.save("s", { epoch: "e", events, seed: SEED });
    const kept = await cache.load("s");
    const first = kept?.events[0];
    expect(first?.type).toBe("turn/start");
    expect(kept?.events.at(-1)?.seq).toBe(50);
    expect(kept?.seed).toEqual(SEED);
    expect(size(kept!.events)).toBeLessThanOrEqual(bound);
    // the newest that fit: one turn more would not
    expect(size(events.slice(first!.seq - 1 - 5))).toBeGreaterThan(bound);
    expect(await get("p/s/s", stores.usage)).toMatchObject({ bytes: size(kept!.events) });

    // without a seed a later part could not be read back; a newest turn alone past the bound cannot be kept
    await cache.save("s", { epoch: "e", events });
    expect(await cache.load("s")).toBeUndefined();
    await cache.save("s", { epoch: "e", events: turns(2, 20), seed: SEED });
    expect(await cache.load("s")).toBeUndefined();
    expect(await keys(stores.usage)).toEqual([]);
  });

  it("treats a corrupt or holed entry as missing", async () => {
    const stores = freshStores();
    const cache = new SessionCache("p", stores);
    await set("p/s/holed", { epoch: "e", events: [log(3)[0], log(3)[2]] }, stores.data);
    await set("p/s/junk", "not a cached session", stores.data);
    expect(await cache.load("holed")).toBeUndefined();
    expect(await cache.load("junk")).toBeUndefined();
  });

  it("runs a forget queued after a save last, and forgets the whole browser on request", async () => {
    const stores = freshStores();
    const cache = new SessionCache("p", stores);
    void cache.save("s", { epoch: "e", events: log(3) });
    await cache.forget("s");
    expect(await cache.load("s")).toBeUndefined();
    await cache.save("t", { epoch: "e", events: log(3) });
    await new SessionCache("q", stores).save("u", { epoch: "e", events: log(3) });
    await forgetBrowser(stores);
    expect(await keys(stores.data)).toEqual([]);
    expect(await keys(stores.usage)).toEqual([]);
  });
});
