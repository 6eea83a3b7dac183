import { afterEach, describe, expect, it } from "vitest";
import { SEARCH_PREFIX_MAX_WORDS } from "../../src/store/search-prefix-words.js";
import { SqliteSessionStore } from "../../src/store/sqlite-store.js";
import { openTempStore, userMessage } from "./open-store.js";

/**
 * How many indexed words a search's last word may start to match as a prefix, on a real store
 * file (searches on its read thread) and on a read-only reader of it (on its own connection).
 */
let opened: ReturnType<typeof openTempStore> | undefined;

afterEach(async () => {
  await opened?.dispose();
  opened = undefined;
});

/** Messages of `owner` in session `sessionId` holding `count` distinct words from `zzq{from}` on. */
async function distinctWords(store: SqliteSessionStore, sessionId: string, from: number, count: number) {
  const messages = [];
  for (let at = from; at < from + count; at += 1_500) {
    const words = [];
    for (let n = at; n < Math.min(at + 1_500, from + count); n++) words.push(`zzq${n.toString(36)}`);
    messages.push(userMessage(words.join(" ")));
  }
  await store.append(sessionId, messages);
}

const sessions = (hits: { sessionId: string; snippet: string }[]) => hits.map((hit) => hit.sessionId);

describe("a search's prefix", () => {
  it("expands to as many indexed words as the bound; one that starts more matches whole, whoever holds them", async () => {
    // Before, FTS5 read every word a prefix starts: 300,000 of them held a read thread for 1 s.
    const max = SEARCH_PREFIX_MAX_WORDS;
    expect(max).toBe(10_000);
    opened = openTempStore();
    const { store } = opened;
    await store.create({ sessionId: "a", owner: "alice", model: "m" });
    await store.create({ sessionId: "b", owner: "bob", model: "m" });
    await store.create({ sessionId: "w", owner: "alice", model: "m" });
    await distinctWords(store, "a", 0, max - 2);
    await distinctWords(store, "b", max - 2, 1);
    // the word itself, alone in a session of its own: found by a prefix and as a whole word
    await store.append("w", [userMessage("zzq")]);
    // the bound's worth, bob's word among them: expanded, for alice and for an admin
    expect(sessions(await store.search("zzq", 20, "alice"))).toContain("a");
    expect(sessions(await store.search("zzq", 20))).toContain("a");
    await distinctWords(store, "b", max, 1);
    // bob's second word passes the bound (the host's whole index): the word matches whole
    const whole = await store.search("zzq", 20, "alice");
    expect(whole).toEqual([{ sessionId: "w", seq: 2, snippet: "**zzq**" }]);
    expect(sessions(await store.search("Zzq", 20))).toEqual(["w"]);
    // a longer prefix starts fewer words, and is expanded
    expect(sessions(await store.search("zzq1", 20, "alice"))).toContain("a");
    // a reader without the read thread counts them on its own connection
    const reader = SqliteSessionStore.open(opened.path, { readOnly: true });
    try {
      expect(sessions(await reader.search("zzq", 20, "alice"))).toEqual(["w"]);
      expect(sessions(await reader.search("zzq1", 20, "alice"))).toContain("a");
    } finally {
      await reader.close();
    }
  });
});
