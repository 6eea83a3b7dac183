import Database from "better-sqlite3";
import { afterEach, describe, expect, it } from "vitest";
import { SqliteSessionStore } from "../../src/store/sqlite-store.js";
import { delta, openTempStore, userMessage } from "./open-store.js";

const S = "s";
let opened: ReturnType<typeof openTempStore> | undefined;

afterEach(async () => {
  await opened?.dispose();
  opened = undefined;
});

/** The `seq` column of the session's projection row, read from the file on a connection of its own. */
function rowSeq(path: string): number {
  const db = new Database(path, { readonly: true });
  try {
    return (db.prepare("SELECT seq FROM projections WHERE session_id = ?").get(S) as { seq: number }).seq;
  } finally {
    db.close();
  }
}

async function seqsShown(store: SqliteSessionStore): Promise<[number | undefined, number | undefined]> {
  const listed = await store.list({ limit: 10 });
  return [(await store.projection(S))?.seq, listed.rows.find((row) => row.sessionId === S)?.seq];
}

describe("a projection row is not rewritten when only its head moved", () => {
  it("leaves the row of a session streaming deltas alone, and every read still shows the head", async () => {
    opened = openTempStore();
    const { store, path } = opened;
    await store.create({ sessionId: S, owner: "alice", model: "m" });
    const before = rowSeq(path);
    for (let i = 0; i < 20; i++) await store.append(S, [delta("t", `token ${i}`)]);
    // the deltas changed nothing the row shows but its head: no write of the row
    expect(rowSeq(path)).toBe(before);
    expect(await seqsShown(store)).toEqual([21, 21]);
  });

  it("shows the head after a restart, from the log", async () => {
    opened = openTempStore();
    const { store, path } = opened;
    await store.create({ sessionId: S, owner: "alice", model: "m" });
    for (let i = 0; i < 5; i++) await store.append(S, [delta("t", `token ${i}`)]);
    await store.close();
    const reopened = SqliteSessionStore.open(path);
    try {
      expect(await seqsShown(reopened)).toEqual([6, 6]);
      // the next append folds from the head the log has
      const outcome = await reopened.append(S, [userMessage("after the restart")]);
      expect(outcome).toMatchObject({ status: "appended", events: [{ seq: 7 }] });
    } finally {
      await reopened.close();
    }
  });

  it("writes the row, head included, once anything else it shows changes", async () => {
    opened = openTempStore();
    const { store, path } = opened;
    await store.create({ sessionId: S, owner: "alice", model: "m" });
    for (let i = 0; i < 3; i++) await store.append(S, [delta("t", `token ${i}`)]);
    await store.append(S, [userMessage("a question")]);
    expect(rowSeq(path)).toBe(5);
    expect(await store.projection(S)).toMatchObject({ seq: 5, messageCount: 1 });
  });
});
