import pg from "pg";
import { describe, expect, it } from "vitest";
import type { PgReads } from "../../../src/store/postgres/pg-reads.js";
import type { CommitNotice } from "../../../src/store/session-store.js";
import { pgUrl } from "../contract/backends.js";
import { delta, turnEnd, turnStart } from "../open-store.js";
import { holdNotices } from "./held-notices.js";
import { notifiesHandled, twoHostsFixture } from "./two-hosts.js";

/**
 * A host that heard another host's NOTIFY and failed to read the rows it names (its read's
 * connection ended) owes them: the session's next commit, which would make it read again, may
 * never come (a turn's end is its last). It listens again, and the re-read after that covers them,
 * though its LISTEN connection never dropped.
 */
const openHosts = twoHostsFixture("feed_read_failure");
const WAIT = { timeout: 20_000 };

describe.skipIf(!pgUrl)("PostgreSQL commit feed: a read of another host's rows that fails", () => {
  it("delivers the rows once it can read them, with no later commit to the session", async () => {
    const { a, b, schema } = await openHosts();
    await a.create({ sessionId: "s", owner: "o", model: "m" });
    const seqs: number[] = [];
    b.subscribe("s", (notice: CommitNotice) => {
      if (notice.kind === "append" || notice.kind === "create") seqs.push(...notice.events.map((e) => e.seq));
    });
    await a.append("s", [turnStart("t")]);
    // B may hear of the creation too (seq 1), depending on when its NOTIFY comes
    const from2 = () => seqs.filter((seq) => seq >= 2);
    await expect.poll(from2, WAIT).toEqual([2]);

    // B hears the turn's end only once its rows are locked away, so its read waits; then that
    // read's connection ends
    const notices = holdNotices(b);
    await a.append("s", [delta("t", "last words"), turnEnd("t", "failed")]);
    const admin = new pg.Client({ connectionString: pgUrl! });
    await admin.connect();
    try {
      await admin.query("BEGIN");
      await admin.query(`LOCK TABLE "${schema}".events IN ACCESS EXCLUSIVE MODE`);
      notices.release();
      const blocked = async () =>
        (
          await admin.query<{ pid: number }>(
            "SELECT pid FROM pg_stat_activity WHERE pg_backend_pid() = ANY (pg_blocking_pids(pid))",
          )
        ).rows.map((row) => row.pid);
      await expect.poll(blocked, WAIT).toHaveLength(1);
      const [reader] = await blocked();
      await admin.query("SELECT pg_terminate_backend($1)", [reader]);
      await admin.query("ROLLBACK");
    } finally {
      await admin.end();
    }
    await expect.poll(from2, WAIT).toEqual([2, 3, 4]);
  });

  it("tells the rest of a fork longer than a page as created after the read of its second page failed", async () => {
    const { a, b } = await openHosts();
    const told: string[] = [];
    b.subscribeAll((sessionId, notice: CommitNotice) => {
      if (sessionId === "fork" && (notice.kind === "append" || notice.kind === "create"))
        told.push(`${notice.kind} ${notice.events[0]!.seq}..${notice.events.at(-1)!.seq}`);
    });
    await a.create({ sessionId: "src", owner: "o", model: "m" });
    const deltas = Array.from({ length: 520 }, (_, i) => delta("t", `part ${i}`));
    await a.append("src", [turnStart("t"), ...deltas, turnEnd("t", "failed")]);
    await notifiesHandled({ a, b });
    // B's read of the fork's second page fails once (its connection ended): B listens again,
    // and its re-read reads the rest
    const reads = (b as unknown as { feed: { reads: PgReads } }).feed.reads;
    const readAfter = reads.readAfter.bind(reads);
    let failed = false;
    reads.readAfter = async (sessionId, afterSeq, limit) => {
      if (sessionId === "fork" && afterSeq >= 500 && !failed) {
        failed = true;
        throw new Error("Connection terminated unexpectedly");
      }
      return readAfter(sessionId, afterSeq, limit);
    };
    await a.fork({ sourceId: "src", targetId: "fork", owner: "o" });
    // the fork's rows are 1 (created) and the source's 2..523 copied; its copied failure, the
    // last of them, is no news: all told as created, none as appended
    await expect.poll(() => told.at(-1), WAIT).toMatch(/\.\.523$/);
    expect(failed).toBe(true);
    expect(told).toEqual(["create 1..500", "create 501..523"]);
  });
});
