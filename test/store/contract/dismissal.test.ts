import { expect, it, vi } from "vitest";
import type { CommitNotice, SessionProjection } from "../../../src/store/session-store.js";
import { UNDO_LOG_KEYS, UNDO_PG_LOG_KEYS } from "../../support/purge-migration.js";
import { turnStart, userMessage } from "../open-store.js";
import { describeContract, storeFixture } from "./backends.js";
import { tamper } from "./operator-hand.js";

/** The migration (10 on both stores) that deletes dismissals with their session. */
const DISMISSALS_MIGRATION = 10;

const ids = (page: { rows: { sessionId: string }[] }) => page.rows.map((row) => row.sessionId);

describeContract("dismissal", (backend) => {
  const open = storeFixture(backend);

  it("a dismissed session leaves only that principal's list, keeps its log, and comes back when restored", async () => {
    let clock = 1_000;
    const { store } = await open({ now: () => clock });
    for (const id of ["a", "b", "c"]) {
      clock += 10;
      await store.create({ sessionId: id, owner: "alice", model: "m" });
    }
    expect(await store.dismiss("b", "alice", clock)).toEqual({ status: "ok", changed: true });
    expect(await store.dismiss("b", "alice", clock)).toEqual({ status: "ok", changed: false });
    const alice = { principal: "alice", dismissed: false };
    expect(ids(await store.list({ limit: 10, dismissals: alice }))).toEqual(["c", "a"]);
    expect(ids(await store.list({ limit: 10, dismissals: { ...alice, dismissed: true } }))).toEqual(["b"]);
    // another principal's view (an admin) and the unfiltered list still show it
    expect(
      ids(await store.list({ limit: 10, dismissals: { principal: "admin", dismissed: false } })),
    ).toEqual(["c", "b", "a"]);
    expect(ids(await store.list({ limit: 10 }))).toEqual(["c", "b", "a"]);
    expect(await store.isDismissed("b", "alice")).toBe(true);
    expect(await store.isDismissed("b", "admin")).toBe(false);
    // the log and its projection are untouched, and writes to it still land
    clock += 10;
    await store.append("b", [turnStart("t"), userMessage("still running")]);
    expect((await store.projection("b"))?.turnCount).toBe(1);
    expect(ids(await store.list({ limit: 10, dismissals: alice }))).toEqual(["c", "a"]);

    expect(await store.restore("b", "alice")).toEqual({ status: "ok", changed: true });
    expect(await store.restore("b", "alice")).toEqual({ status: "ok", changed: false });
    expect(ids(await store.list({ limit: 10, dismissals: alice }))).toEqual(["b", "c", "a"]);
    expect(await store.isDismissed("b", "alice")).toBe(false);
  });

  it("a dismissal is durable: another instance on the same database sees it", async () => {
    const s = await open();
    await s.store.create({ sessionId: "kept", owner: "bob", model: "m" });
    await s.store.dismiss("kept", "bob", 5);
    await s.store.close();
    const again = await s.openAnother();
    expect(await again.isDismissed("kept", "bob")).toBe(true);
    expect(
      ids(await again.list({ limit: 10, dismissals: { principal: "bob", dismissed: true }, owner: "bob" })),
    ).toEqual(["kept"]);
  });

  it("dismissal filters combine with owner, parked and paging without gaps or repeats", async () => {
    let clock = 1_000;
    const { store } = await open({ now: () => clock });
    const kept: string[] = [];
    for (let i = 0; i < 23; i++) {
      clock = 1_000 + Math.floor(i / 2) * 10;
      const id = `s${String(i).padStart(2, "0")}`;
      await store.create({ sessionId: id, owner: "carol", model: "m" });
      if (i % 3 === 0) await store.dismiss(id, "carol", clock);
      else kept.push(id);
    }
    const seen: string[] = [];
    let before: string | undefined;
    for (let page = 0; page < 20; page++) {
      const got = await store.list({
        limit: 4,
        owner: "carol",
        dismissals: { principal: "carol", dismissed: false },
        ...(before ? { before } : {}),
      });
      seen.push(...ids(got));
      if (!got.next) break;
      before = got.next;
    }
    expect([...seen].sort()).toEqual(kept);
    expect(new Set(seen).size).toBe(seen.length);
    const parked = await store.list({
      limit: 10,
      parked: true,
      dismissals: { principal: "carol", dismissed: true },
    });
    expect(parked.rows).toEqual([]);
  });

  it("deleting a session deletes every principal's dismissal of it, and nobody else's", async () => {
    const { store } = await open();
    for (const id of ["gone", "kept"]) await store.create({ sessionId: id, owner: "alice", model: "m" });
    for (const principal of ["alice", "admin"]) {
      await store.dismiss("gone", principal, 1);
      await store.dismiss("kept", principal, 1);
    }
    expect(await store.delete("gone")).toEqual({ status: "deleted" });
    expect(await store.isDismissed("gone", "alice")).toBe(false);
    expect(await store.isDismissed("gone", "admin")).toBe(false);
    expect(await store.isDismissed("kept", "alice")).toBe(true);
    expect(await store.isDismissed("kept", "admin")).toBe(true);
  });

  it("a database from before opens without the dismissals an earlier delete left behind", async () => {
    const db = await open();
    for (const id of ["gone", "kept"]) await db.store.create({ sessionId: id, owner: "alice", model: "m" });
    await db.store.dismiss("kept", "alice", 1);
    await db.store.delete("gone");
    await db.store.close();
    // the rows an earlier build's delete left, in the schema before the migration
    await tamper(
      db,
      `INSERT INTO dismissals (principal, session_id, dismissed_at) VALUES ('alice', 'gone', 1);
       DROP INDEX dismissals_by_session;
       ${db.path ? `${UNDO_LOG_KEYS} PRAGMA user_version = ${DISMISSALS_MIGRATION - 1}` : `${UNDO_PG_LOG_KEYS} DELETE FROM schema_migrations WHERE version >= ${DISMISSALS_MIGRATION}`}`,
    );
    const reopened = await db.openAnother();
    expect(await reopened.isDismissed("gone", "alice")).toBe(false);
    expect(await reopened.isDismissed("kept", "alice")).toBe(true);
  });

  it("a change is one `meta` commit notice marked as a dismissal, with no row, on every instance; no change, none", async () => {
    const { store, openAnother } = await open();
    await store.create({ sessionId: "s", owner: "alice", model: "m" });
    type Heard = [string, CommitNotice, SessionProjection | null];
    const listen = (on: typeof store) => {
      const all: Heard[] = [];
      const followed: CommitNotice[] = [];
      on.subscribeAll((sessionId, notice, projection) => all.push([sessionId, notice, projection]));
      on.subscribe("s", (notice) => followed.push(notice));
      return { all, followed };
    };
    const here = listen(store);
    // another host on the same database hears it through the commit feed (PostgreSQL only: one
    // SQLite file has one writing process)
    const there = backend.sharedWriters ? listen(await openAnother()) : undefined;
    await store.dismiss("s", "alice", 1);
    await store.dismiss("s", "alice", 2);
    await store.restore("s", "alice");
    await store.restore("s", "alice");
    await store.dismiss("s", "admin", 3);
    // a commit after them: a stray notice would have been heard before its
    await store.append("s", [turnStart("t")]);
    const dismissal: CommitNotice = { kind: "meta", dismissal: true };
    const expected = [dismissal, dismissal, dismissal, expect.objectContaining({ kind: "append" })];
    for (const heard of [here, there]) {
      if (!heard) continue;
      await vi.waitFor(() => expect(heard.all.at(-1)?.[1].kind).toBe("append"), { timeout: 10_000 });
      expect(heard.all.map(([, notice]) => notice)).toEqual(expected);
      expect(heard.all.slice(0, 3)).toEqual(Array.from({ length: 3 }, () => ["s", dismissal, null]));
      expect(heard.followed).toEqual(expected);
    }
  });

  it("dismissing or restoring an unknown or deleted session answers not_found and records nothing", async () => {
    const { store } = await open();
    expect(await store.dismiss("nobody", "alice", 1)).toEqual({ status: "not_found" });
    await store.create({ sessionId: "gone", owner: "alice", model: "m" });
    await store.delete("gone");
    expect(await store.dismiss("gone", "alice", 1)).toEqual({ status: "not_found" });
    expect(await store.restore("gone", "alice")).toEqual({ status: "not_found" });
    expect(await store.isDismissed("gone", "alice")).toBe(false);
  });
});
