import pg from "pg";
import { afterEach, describe, expect, it, vi } from "vitest";
import { Limits } from "../../../protocol/limits.js";
import { CHECKED_WRITE } from "../../../src/store/postgres/pg-pending-rows.js";
import { PgSessionCache } from "../../../src/store/postgres/pg-session-cache.js";
import type { PostgresSessionStore } from "../../../src/store/postgres/postgres-store.js";
import type { SessionState } from "../../../src/store/session-state.js";
import { readWholeLog } from "../../support/whole-log.js";
import { pgUrl } from "../contract/backends.js";
import { delta, turnEnd, turnStart, userMessage } from "../open-store.js";
import { keptWayOnly, sentStatements, serverWarnings } from "./pg-client-spies.js";
import { twoHostsWithSession } from "./two-hosts.js";

const S = "s";
const LONG = 60_000;

/** Two hosts on one fresh schema with session S, closed and the schema dropped after the test. */
const twoHosts = twoHostsWithSession("kept", S);

afterEach(() => {
  vi.restoreAllMocks();
});

async function seqs(store: PostgresSessionStore): Promise<number[]> {
  const read = await readWholeLog(store, S);
  return read.status === "ok" ? read.events.map((event) => event.seq) : [];
}

describe.skipIf(!pgUrl)(
  "a host keeps session states between transactions, never past another host's write",
  () => {
    it("appends on the kept state in one round trip while nobody else writes", async () => {
      const { a } = await twoHosts();
      expect((await a.append(S, [delta("t", "one")])).status).toBe("appended");
      const sent = sentStatements();
      const outcome = await a.append(S, [delta("t", "two")]);
      expect(outcome).toMatchObject({ status: "appended", events: [{ seq: 3 }] });
      keptWayOnly(sent);
      expect(await seqs(a)).toEqual([1, 2, 3]);
    });

    it("keeps a row it wrote itself at its own version: the append after a turn's start goes the kept way too", async () => {
      const { a } = await twoHosts();
      // a turn's start changes what the list shows, so its commit writes the projection row
      expect((await a.append(S, [turnStart("t1"), userMessage("hi")])).status).toBe("appended");
      const sent = sentStatements();
      expect(await a.append(S, [delta("t1", "x")])).toMatchObject({
        status: "appended",
        events: [{ seq: 4 }],
      });
      keptWayOnly(sent);
      expect((await a.projection(S))?.lastState).toBe("working");
    });

    it("an operation that needs a read ends the begun transaction and runs the usual way", async () => {
      const { a } = await twoHosts();
      await a.append(S, [turnStart("t"), delta("t", "kept answer")]);
      const notices = serverWarnings();
      const sent = sentStatements();
      // the turn's end reads its text for the search index: the kept way cannot run it
      const outcome = await a.append(S, [turnEnd("t")]);
      expect(outcome).toMatchObject({ status: "appended", events: [{ seq: 4 }] });
      expect(sent.filter((text) => text.includes("FOR UPDATE")).length).toBeGreaterThan(0);
      // the usual way began a transaction of its own, not inside the kept one
      expect(notices).toEqual([]);
      expect(await seqs(a)).toEqual([1, 2, 3, 4]);
      const found = await a.search("kept answer", 10, "alice");
      expect(found.map((hit) => hit.sessionId)).toEqual([S]);
    });

    it("after another host appended, the next append lands on its head and its projection", async () => {
      const { a, b } = await twoHosts();
      await a.append(S, [delta("t", "kept")]);
      await b.append(S, [userMessage("from b")]);
      const outcome = await a.append(S, [delta("t", "after")]);
      expect(outcome).toMatchObject({ status: "appended", events: [{ seq: 4 }] });
      expect(await seqs(b)).toEqual([1, 2, 3, 4]);
      // the message B added is still counted: A wrote from the row, not from what it had kept
      expect((await b.projection(S))?.messageCount).toBe(1);
    });

    it("after another host appended deltas (which leave the row alone), the kept head is refused", async () => {
      const { a, b } = await twoHosts();
      await a.append(S, [delta("t", "kept")]);
      await b.append(S, [delta("t", "from b")]);
      await b.append(S, [delta("t", "from b again")]);
      const sent = sentStatements();
      const outcome = await a.append(S, [delta("t", "after")]);
      expect(outcome).toMatchObject({ status: "appended", events: [{ seq: 5 }] });
      // tried on the kept state, refused by the database, run again the usual way
      expect(sent.some((name) => name.startsWith(CHECKED_WRITE))).toBe(true);
      expect(sent.filter((text) => text.includes("FOR UPDATE")).length).toBeGreaterThan(0);
      expect(await seqs(b)).toEqual([1, 2, 3, 4, 5]);
      // and kept again from that commit: the next append goes the one-round-trip way
      const sentBefore = sent.length;
      expect((await a.append(S, [delta("t", "kept again")])).status).toBe("appended");
      keptWayOnly(sent.slice(sentBefore));
    });

    it("after another host cleared the session, the append starts the new epoch at seq 1", async () => {
      const { a, b } = await twoHosts();
      await a.append(S, [delta("t", "kept")]);
      const cleared = await b.clear(S);
      if (cleared.status !== "cleared") throw new Error(cleared.status);
      const outcome = await a.append(S, [delta("t", "after")]);
      expect(outcome).toMatchObject({ status: "appended", epoch: cleared.epoch, events: [{ seq: 1 }] });
      expect(await seqs(b)).toEqual([1]);
      expect(await b.projection(S)).toMatchObject({ epoch: cleared.epoch, seq: 1 });
    });

    it("after a writer that does not stamp versions changed the row, the append reads it again", async () => {
      const { a, schema } = await twoHosts();
      await a.append(S, [delta("t", "kept")]);
      // what a host of the previous build does on clear and two appends: the head is back where
      // it was, in another epoch, and the version column untouched
      const client = new pg.Client({ connectionString: pgUrl! });
      await client.connect();
      try {
        await client.query(`UPDATE "${schema}".sessions SET epoch = 'older-build' WHERE session_id = $1`, [
          S,
        ]);
        await client.query(`UPDATE "${schema}".projections SET epoch = 'older-build' WHERE session_id = $1`, [
          S,
        ]);
      } finally {
        await client.end();
      }
      const outcome = await a.append(S, [delta("t", "after")]);
      expect(outcome).toMatchObject({ status: "appended", epoch: "older-build", events: [{ seq: 3 }] });
    });

    it("after another host deleted the session, the append is refused: the tombstone wins", async () => {
      const { a, b } = await twoHosts();
      await a.append(S, [delta("t", "kept")]);
      expect(await b.delete(S)).toEqual({ status: "deleted" });
      expect(await a.append(S, [delta("t", "after")])).toEqual({ status: "retired" });
      expect((await b.readAfter(S, 0, 10)).status).toBe("retired");
    });

    it("after deleting the session itself, the host keeps nothing of it: the next append is refused without a kept try", async () => {
      const { a } = await twoHosts();
      await a.append(S, [delta("t", "kept")]);
      expect(await a.delete(S)).toEqual({ status: "deleted" });
      const sent = sentStatements();
      expect(await a.append(S, [delta("t", "after")])).toEqual({ status: "retired" });
      expect(sent.some((name) => name.startsWith(CHECKED_WRITE))).toBe(false);
    });

    it("after a transaction of its own failed, the host reads every session again: none is kept", async () => {
      const { a } = await twoHosts();
      await a.create({ sessionId: "other", owner: "alice", model: "m" });
      await a.append("other", [delta("t", "kept")]);
      await a.append(S, [delta("t", "kept")]);
      // an event over the size limit fails its transaction inside the write
      const over = delta("t", "o".repeat(Limits.maxEventBytes));
      await expect(a.append(S, [over])).rejects.toMatchObject({ code: "payload_too_large" });
      const sent = sentStatements();
      expect(await a.append("other", [delta("t", "after")])).toMatchObject({
        status: "appended",
        events: [{ seq: 3 }],
      });
      expect(sent.some((name) => name.startsWith(CHECKED_WRITE))).toBe(false);
      expect(sent.filter((text) => text.includes("FOR UPDATE")).length).toBeGreaterThan(0);
    });

    it("after another host took the lease over, the old owner's fenced append is refused", async () => {
      const { a, b } = await twoHosts();
      const mine = await a.acquireLease(S, "host-a", LONG);
      if (mine.status !== "acquired") throw new Error(mine.status);
      const sent = sentStatements();
      expect((await a.append(S, [delta("t", "kept")], { fence: mine.lease })).status).toBe("appended");
      keptWayOnly(sent);
      // expire it now (a renewal sets the remaining time), then B takes it: no turn is open, so
      // the takeover writes only the lease row, not the session's
      await a.renewLeases("host-a", [mine.lease], 1);
      await expect.poll(() => b.leaseHolder(S), { timeout: 20_000, interval: 50 }).toBeNull();
      const taken = await b.acquireLease(S, "host-b", LONG);
      expect(taken).toMatchObject({ status: "acquired", lease: { generation: 2 } });
      expect(await a.append(S, [delta("t", "stale")], { fence: mine.lease })).toEqual({ status: "fenced" });
      expect(await seqs(b)).toEqual([1, 2]);
    });
  },
);

describe("the kept states are bounded and handed to one batch at a time", () => {
  const state = (sessionId: string) => ({ sessionId, headSeq: 1 }) as SessionState;

  it("forgets the least recently kept session past its capacity", () => {
    const kept = new PgSessionCache(2);
    kept.keep(state("x"), 1);
    kept.keep(state("y"), 1);
    kept.keep(state("x"), 2);
    kept.keep(state("z"), 1);
    expect(kept.size).toBe(2);
    expect(kept.take(["y"])).toBeNull();
    expect(kept.take(["x", "z"])?.get("x")?.version).toBe(2);
  });

  it("takes all listed sessions out or none, so a failed batch leaves nothing behind", () => {
    const kept = new PgSessionCache();
    kept.keep(state("x"), 1);
    expect(kept.take(["x", "missing"])).toBeNull();
    expect(kept.size).toBe(1);
    expect(kept.take(["x", "x"])?.size).toBe(1);
    expect(kept.size).toBe(0);
    expect(kept.take(["x"])).toBeNull();
  });
});
