import pg from "pg";
import { describe, expect, it } from "vitest";
import type { PostgresSessionStore } from "../../../src/store/postgres/postgres-store.js";
import { pgUrl } from "../contract/backends.js";
import { delta, turnStart, userMessage } from "../open-store.js";
import { twoHostsFixture } from "./two-hosts.js";

const S = "s";
const openTwoHosts = twoHostsFixture("head");

/** The session's projection row as stored: its `seq` column and the transaction that last wrote it. */
async function storedRow(schema: string): Promise<{ seq: number; version: number }> {
  const client = new pg.Client({ connectionString: pgUrl! });
  await client.connect();
  try {
    const found = await client.query<{ seq: string; version: string }>(
      `SELECT seq, version FROM "${schema}".projections WHERE session_id = $1`,
      [S],
    );
    const row = found.rows[0]!;
    return { seq: Number(row.seq), version: Number(row.version) };
  } finally {
    await client.end();
  }
}

/** The head as every read of another host shows it. */
async function headsShown(store: PostgresSessionStore): Promise<number[]> {
  const header = await store.header(S);
  const read = await store.readAfter(S, 0, 1000);
  const listed = await store.list({ limit: 10 });
  return [
    (await store.projection(S))?.seq ?? -1,
    listed.rows.find((row) => row.sessionId === S)?.seq ?? -1,
    header.status === "ok" ? header.headSeq : -1,
    read.status === "ok" ? read.headSeq : -1,
  ];
}

describe.skipIf(!pgUrl)("a PostgreSQL projection row is not rewritten when only its head moved", () => {
  it("leaves the row of a session streaming deltas alone, and every read on any host shows the head", async () => {
    const { a, b, schema } = await openTwoHosts();
    await a.create({ sessionId: S, owner: "alice", model: "m" });
    // the turn's first text changes the row (it now has text); the deltas after it only the head
    await a.append(S, [turnStart("t"), delta("t", "first")]);
    const before = await storedRow(schema);
    // from both hosts, so both the kept way and the usual way leave the row alone
    for (let i = 0; i < 10; i++) await (i % 3 === 0 ? b : a).append(S, [delta("t", `token ${i}`)]);
    expect(await storedRow(schema)).toEqual(before);
    expect(await headsShown(a)).toEqual([13, 13, 13, 13]);
    expect(await headsShown(b)).toEqual([13, 13, 13, 13]);
    const read = await b.readAfter(S, 0, 1000);
    expect(read.status === "ok" && read.events.map((event) => event.seq)).toEqual(
      Array.from({ length: 13 }, (_, i) => i + 1),
    );
  });

  it("writes the row once anything else it shows changes, and the next append folds from the log's head", async () => {
    const { a, b, schema } = await openTwoHosts();
    await a.create({ sessionId: S, owner: "alice", model: "m" });
    for (let i = 0; i < 3; i++) await a.append(S, [delta("t", `token ${i}`)]);
    const streamed = await storedRow(schema);
    const outcome = await b.append(S, [userMessage("a question")]);
    expect(outcome).toMatchObject({ status: "appended", events: [{ seq: 5 }] });
    const written = await storedRow(schema);
    expect(written.version).not.toBe(streamed.version);
    expect(written.seq).toBe(5);
    expect(await a.projection(S)).toMatchObject({ seq: 5, messageCount: 1 });
    expect(await a.append(S, [delta("t", "after")])).toMatchObject({ events: [{ seq: 6 }] });
  });
});
