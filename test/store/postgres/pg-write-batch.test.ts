import { randomBytes } from "node:crypto";
import pg from "pg";
import { afterEach, describe, expect, it, vi } from "vitest";
import { PgCommitFeed } from "../../../src/store/postgres/pg-commit-feed.js";
import { CHECKED_WRITE } from "../../../src/store/postgres/pg-pending-rows.js";
import { PostgresSessionStore } from "../../../src/store/postgres/postgres-store.js";
import { readWholeLog } from "../../support/whole-log.js";
import { dropSchema, pgUrl } from "../contract/backends.js";
import { delta, turnEnd, turnStart, userMessage } from "../open-store.js";
import { holdSessionWrites } from "./held-writes.js";
import { keptWayOnly, sentStatements, serverWarnings } from "./pg-client-spies.js";

/**
 * What a PostgreSQL write batch commits, announces and keeps, where the batch on kept states and
 * the usual one could part: a kept session the batch did not append to, a session deleted while
 * kept, a batch refused after an earlier one committed on the same connection, and operations of
 * one batch that read or lock what an earlier one changed.
 */
const S = "s";

interface Hosts {
  a: PostgresSessionStore;
  b: PostgresSessionStore;
  schema: string;
  /** Every NOTIFY on the schema's channel, as a third host hears it. */
  heard: { host: string; changes: [string, string, string, number, number][] }[];
}

const opened: { stores: PostgresSessionStore[]; listener: pg.Client; schema: string }[] = [];

afterEach(async () => {
  vi.restoreAllMocks();
  await Promise.all(
    opened.splice(0).map(async ({ stores, listener, schema }) => {
      await Promise.all(stores.map((store) => store.close()));
      await listener.end();
      await dropSchema(pgUrl!, schema);
    }),
  );
});

/** Hosts `host-a` and `host-b` on one fresh schema with session S (created by A), and a listener. */
async function openHosts(): Promise<Hosts> {
  const schema = `batch_${randomBytes(6).toString("hex")}`;
  const a = await PostgresSessionStore.open(pgUrl!, { schema, maxConnections: 2, hostId: "host-a" });
  const b = await PostgresSessionStore.open(pgUrl!, { schema, maxConnections: 2, hostId: "host-b" });
  const listener = new pg.Client({ connectionString: pgUrl! });
  opened.push({ stores: [a, b], listener, schema });
  const heard: Hosts["heard"] = [];
  listener.on("notification", (message) => {
    const payload = JSON.parse(message.payload ?? "{}") as {
      h: string;
      c: Hosts["heard"][number]["changes"];
    };
    heard.push({ host: payload.h, changes: payload.c });
  });
  await listener.connect();
  await listener.query(`LISTEN "sessionmux_${schema}"`);
  await a.create({ sessionId: S, owner: "alice", model: "m" });
  return { a, b, schema, heard };
}

async function seqs(store: PostgresSessionStore): Promise<number[]> {
  const read = await readWholeLog(store, S);
  return read.status === "ok" ? read.events.map((event) => event.seq) : [];
}

describe.skipIf(!pgUrl)("a PostgreSQL write batch", () => {
  it("answers an append refused for its epoch on the kept state in one round trip, announcing nothing", async () => {
    const { a, heard } = await openHosts();
    const appended = await a.append(S, [delta("t", "kept")]);
    if (appended.status !== "appended") throw new Error(appended.status);
    const sent = sentStatements();
    expect(await a.append(S, [delta("t", "late")], { expectedEpoch: "another" })).toEqual({
      status: "epoch_mismatch",
      epoch: appended.epoch,
    });
    keptWayOnly(sent);
    // a marker batch: its NOTIFY comes after any the refused append could have sent
    await a.append(S, [delta("t", "marker")]);
    await vi.waitFor(() => expect(heard.at(-1)?.changes).toEqual([[S, "append", appended.epoch, 3, 3]]), {
      timeout: 5_000,
    });
    expect(heard.map(({ changes }) => changes.map(([, kind]) => kind))).toEqual([
      ["create"],
      ["append"],
      ["append"],
    ]);
    expect(await seqs(a)).toEqual([1, 2, 3]);
  });

  it("makes a kept batch's announcement once its COMMIT was sent, and resets the setting the NOTIFY reads with the NOTIFY", async () => {
    const { a, heard } = await openHosts();
    const appended = await a.append(S, [delta("t", "kept")]);
    if (appended.status !== "appended") throw new Error(appended.status);
    const sent = sentStatements();
    const sentWhenAnnounced: (string | undefined)[] = [];
    const announcement = PgCommitFeed.prototype.announcement;
    vi.spyOn(PgCommitFeed.prototype, "announcement").mockImplementation(function (
      this: PgCommitFeed,
      ...args
    ) {
      sentWhenAnnounced.push(sent.at(-1));
      return announcement.apply(this, args);
    });
    expect(await a.append(S, [delta("t", "next")])).toMatchObject({
      status: "appended",
      events: [{ seq: 3 }],
    });
    keptWayOnly(sent);
    // encoding the announcement overlaps the COMMIT's flush rather than delaying its sending
    expect(sentWhenAnnounced).toEqual(["COMMIT"]);
    expect(sent).toContain("sessionmux_notify_kept");
    expect(sent.filter((text) => text.includes("set_config"))).toEqual([]);
    await vi.waitFor(() => expect(heard.at(-1)?.changes).toEqual([[S, "append", appended.epoch, 3, 3]]), {
      timeout: 5_000,
    });
  });

  it("checks the head of a kept session it did not append to: after another host appended, the state kept next is the new one", async () => {
    const { a, b } = await openHosts();
    const appended = await a.append(S, [delta("t", "kept")]);
    if (appended.status !== "appended") throw new Error(appended.status);
    // deltas leave the row alone: only the head tells that B wrote
    expect((await b.append(S, [delta("t", "from b")])).status).toBe("appended");
    const warnings = serverWarnings();
    expect(await a.append(S, [delta("t", "late")], { expectedEpoch: "another" })).toEqual({
      status: "epoch_mismatch",
      epoch: appended.epoch,
    });
    // refused by the database's check, run again the usual way: its transaction was over, so no
    // ROLLBACK went after it
    expect(warnings).toEqual([]);
    const sent = sentStatements();
    expect(await a.append(S, [delta("t", "after")])).toMatchObject({
      status: "appended",
      events: [{ seq: 4 }],
    });
    keptWayOnly(sent);
    expect(await seqs(b)).toEqual([1, 2, 3, 4]);
  });

  it("keeps no state of a session it deleted: an append after the delete is refused without a kept try", async () => {
    const { a } = await openHosts();
    expect((await a.append(S, [delta("t", "kept")])).status).toBe("appended");
    expect(await a.delete(S)).toEqual({ status: "deleted" });
    const sent = sentStatements();
    expect(await a.append(S, [delta("t", "after")])).toEqual({ status: "retired" });
    expect(sent.filter((name) => name === "sessionmux_lock_kept" || name.startsWith(CHECKED_WRITE))).toEqual(
      [],
    );
  });

  it("announces a kept batch the database refused only once, when it committed the usual way", async () => {
    const { a, b, heard } = await openHosts();
    const appended = await a.append(S, [delta("t", "kept")]);
    if (appended.status !== "appended") throw new Error(appended.status);
    expect((await b.append(S, [delta("t", "from b")])).status).toBe("appended");
    // tried on the kept state (head 2), refused, committed at seq 4 the usual way
    expect(await a.append(S, [delta("t", "after")])).toMatchObject({
      status: "appended",
      events: [{ seq: 4 }],
    });
    // one connection's notifications arrive in the order sent: a NOTIFY of the refused try would
    // come before this one
    await vi.waitFor(
      () =>
        expect(heard.filter(({ host }) => host === "host-a").at(-1)?.changes).toEqual([
          [S, "append", appended.epoch, 4, 4],
        ]),
      { timeout: 5_000 },
    );
    expect(heard.filter(({ host }) => host === "host-a").map(({ changes }) => changes)).toEqual([
      [[S, "create", appended.epoch, 1, 1]],
      [[S, "append", appended.epoch, 2, 2]],
      [[S, "append", appended.epoch, 4, 4]],
    ]);
  });

  it("commits a batch with nothing to announce the usual way, and sends no NOTIFY for it", async () => {
    const { a, heard } = await openHosts();
    const sent = sentStatements();
    // a prompt's key alone: no notice, and never a batch on kept states
    await a.recordPrompt(S, "c1", { queued: true, itemId: "q1" });
    expect(sent).toContain("BEGIN");
    expect(
      sent.filter((name) => name === "sessionmux_lock_kept" || name.startsWith("sessionmux_notify")),
    ).toEqual([]);
    expect(await a.findPrompt(S, "c1")).toEqual({ queued: true, itemId: "q1" });
    // a marker batch: its NOTIFY comes after any the prompt's batch could have sent
    const marker = await a.append(S, [delta("t", "marker")]);
    if (marker.status !== "appended") throw new Error(marker.status);
    await vi.waitFor(() => expect(heard.at(-1)?.changes).toEqual([[S, "append", marker.epoch, 2, 2]]), {
      timeout: 5_000,
    });
    expect(heard.map(({ changes }) => changes.map(([, kind]) => kind))).toEqual([["create"], ["append"]]);
  });

  it("an operation that locks a session an earlier one in the batch changed works on the changed state", async () => {
    const { a } = await openHosts();
    await a.append(S, [turnStart("t")]);
    // one batch: the message is counted, then the restart closes the turn it finds open
    const [appended, interrupted] = await Promise.all([
      a.append(S, [userMessage("hi")]),
      a.interruptOpenTurns(Date.now()),
    ]);
    expect(appended).toMatchObject({ status: "appended", events: [{ seq: 3 }] });
    expect(interrupted).toEqual([S]);
    // read again under the lock, the row (written only at COMMIT) would not count the message
    expect(await a.projection(S)).toMatchObject({ messageCount: 1, seq: 4, lastState: "interrupted" });
  });

  it("a create that lost the race for its id to a session created and deleted meanwhile is told retired", async () => {
    const { a, b, schema } = await openHosts();
    // B's insert of the session row waits, inside its transaction, for a lock the test holds
    const held = await holdSessionWrites(schema, "INSERT");
    try {
      await held.hold();
      // one transaction on B: the id is created and deleted
      const onB = Promise.all([b.create({ sessionId: "x", owner: "o", model: "m" }), b.delete("x")]);
      await held.waitFor("held");
      // A found no row for the id; its insert waits for B's transaction to end
      const onA = a.create({ sessionId: "x", owner: "o", model: "m" });
      await held.waitFor("behind");
      await held.release();
      expect(await onB).toEqual([expect.objectContaining({ status: "created" }), { status: "deleted" }]);
      expect(await onA).toEqual({ status: "retired" });
    } finally {
      await held.end();
    }
  });

  it("a writer connection cut while a kept batch is set aside fails that write, and the next one commits", async () => {
    const { a, schema } = await openHosts();
    await a.append(S, [turnStart("t"), delta("t", "kept")]);
    const unhandled: unknown[] = [];
    const record = (reason: unknown) => unhandled.push(reason);
    process.on("unhandledRejection", record);
    // `holder` holds the row lock; `admin` watches from outside its transaction (whose view of
    // pg_stat_activity would stay as first read)
    const holder = new pg.Client({ connectionString: pgUrl! });
    const admin = new pg.Client({ connectionString: pgUrl! });
    await Promise.all([holder.connect(), admin.connect()]);
    try {
      // the kept batch's locks wait behind this transaction's
      await holder.query("BEGIN");
      await holder.query(`SELECT 1 FROM "${schema}".projections WHERE session_id = $1 FOR UPDATE`, [S]);
      // the turn's end reads its text, so the kept batch is set aside, its ROLLBACK queued behind the locks
      const ended = a.append(S, [turnEnd("t")]).catch((err: unknown) => err);
      const writer = async () =>
        (
          await admin.query<{ pid: number }>(
            `SELECT pid FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%sessionmux_expect(count(*)%'`,
          )
        ).rows[0]?.pid;
      await expect.poll(writer, { timeout: 10_000, interval: 20 }).toBeDefined();
      await admin.query("SELECT pg_terminate_backend($1)", [await writer()]);
      expect(await ended).toMatchObject({ code: "persistence_failure" });
      await holder.query("ROLLBACK");
      expect(await a.append(S, [turnEnd("t")])).toMatchObject({ status: "appended", events: [{ seq: 4 }] });
      // the statements the cut connection never answered were all waited for: none failed unseen
      // (which would end a host's process)
      expect(unhandled).toEqual([]);
    } finally {
      process.off("unhandledRejection", record);
      await Promise.all([holder.end(), admin.end()]);
    }
  });
});
