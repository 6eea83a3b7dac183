import Database from "better-sqlite3";
import { afterEach, describe, expect, it } from "vitest";
import { Limits } from "../../protocol/index.js";
import { delta, openTempStore, turnEnd, turnStart, userMessage } from "./open-store.js";

let opened: ReturnType<typeof openTempStore> | undefined;

afterEach(async () => {
  await opened?.dispose();
  opened = undefined;
});

/** The session's rows as the file holds them, read on a connection of its own. */
function rowsOf(path: string, sessionId: string): { seq: number; type: string }[] {
  const db = new Database(path, { readonly: true });
  try {
    return db.prepare("SELECT seq, type FROM events WHERE session_id = ? ORDER BY seq").all(sessionId) as {
      seq: number;
      type: string;
    }[];
  } finally {
    db.close();
  }
}

describe("the rows of one append, inserted several per statement", () => {
  it("stores every event of appends of 1 to 40 events, in order, each once", async () => {
    opened = openTempStore();
    const { store, path } = opened;
    await store.create({ sessionId: "s", owner: "alice", model: "m" });
    const texts: string[] = [];
    for (let n = 1; n <= 40; n++) {
      const events = Array.from({ length: n }, (_, i) => delta("t", `append ${n} event ${i}`));
      texts.push(...events.map((e) => e.data.text));
      await store.append("s", events);
    }
    const rows = rowsOf(path, "s");
    expect(rows.map((row) => row.seq)).toEqual(Array.from({ length: rows.length }, (_, i) => i + 1));
    const read = await store.readAfter("s", 1, 1000);
    expect(read.status).toBe("ok");
    if (read.status !== "ok") return;
    expect(read.events.map((e) => (e.data as { text: string }).text)).toEqual(texts);
  });

  it("indexes a turn ended inside the append with its deltas from the same append", async () => {
    opened = openTempStore();
    const { store } = opened;
    await store.create({ sessionId: "s", owner: "alice", model: "m" });
    await store.append("s", [
      userMessage("a question"),
      turnStart("t1"),
      ...Array.from({ length: 9 }, (_, i) => delta("t1", i === 4 ? "zebrafish " : "word ")),
      turnEnd("t1"),
    ]);
    const hits = await store.search("zebrafish", 10);
    expect(hits.map((hit) => hit.sessionId)).toEqual(["s"]);
  });

  it("inserts nothing of an append refused part way, neither then nor with a later append", async () => {
    opened = openTempStore();
    const { store, path } = opened;
    await store.create({ sessionId: "s", owner: "alice", model: "m" });
    const tooLarge = delta("t", "x".repeat(Limits.maxEventBytes + 1));
    const refused = store.append("s", [delta("t", "one"), delta("t", "two"), tooLarge]);
    await expect(refused).rejects.toMatchObject({ code: "payload_too_large" });
    await store.append("s", [delta("t", "three")]);
    expect(rowsOf(path, "s").map((row) => row.seq)).toEqual([1, 2]);
    const read = await store.readAfter("s", 1, 10);
    if (read.status !== "ok") throw new Error(read.status);
    expect(read.events.map((e) => (e.data as { text: string }).text)).toEqual(["three"]);
  });
});
