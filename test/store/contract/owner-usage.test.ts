import { expect, it } from "vitest";
import type { NewEvent } from "../../../protocol/index.js";
import { pgUploadSweeper } from "../../../src/operations/pg-upload-sweeper.js";
import { encodeValue } from "../../../src/store/event-codec.js";
import { UNDO_LOG_KEYS, UNDO_PG_LOG_KEYS } from "../../support/purge-migration.js";
import {
  type ContractStore,
  describeContract,
  pgUrl,
  type StoreUnderTest,
  storeFixture,
} from "./backends.js";
import { tamper } from "./operator-hand.js";

const delta = (text: string): NewEvent => ({ type: "assistant/delta", data: { turnId: "t", text } });
const withAttachment = (attachmentId: string, size: number): NewEvent =>
  ({
    type: "user/message",
    data: {
      messageId: `m-${attachmentId}`,
      source: "user",
      text: "see the file",
      attachments: [{ attachmentId, name: "f.bin", type: "application/octet-stream", size }],
      meta: {},
    },
  }) as NewEvent;

/** The stored data of the session's current log, measured from the log itself. */
async function logBytes(store: ContractStore, sessionId: string): Promise<number> {
  let bytes = 0;
  let afterSeq = 0;
  for (;;) {
    const read = await store.readAfter(sessionId, afterSeq, 500);
    if (read.status !== "ok") return 0;
    for (const event of read.events) bytes += encodeValue(event.data).byteLength;
    const last = read.events.at(-1);
    if (!last || last.seq >= read.headSeq) return bytes;
    afterSeq = last.seq;
  }
}

const upload = (store: ContractStore, owner: string, bytes: number) =>
  store.putAttachment({ owner, name: "f", type: "t", bytes: new Uint8Array(bytes) });

async function usageOf(store: ContractStore, sessions: string[]): Promise<number> {
  let total = 0;
  for (const id of sessions) total += await logBytes(store, id);
  return total;
}

/** The migration (7 on both stores) that added the count; the ones after it are applied again. */
const OWNER_USAGE_MIGRATION = 7;

/** Takes the database back to the schema before the usage table, keeping every log. */
async function rewind(db: StoreUnderTest): Promise<void> {
  // stopped, as a host of an earlier build must be before a PostgreSQL migration past 8 or 16
  await db.store.close();
  if (db.path) {
    await tamper(
      db,
      `${UNDO_LOG_KEYS}
       DROP TRIGGER attachments_counted; DROP TRIGGER attachments_uncounted; DROP TABLE owner_usage;
       ALTER TABLE projections DROP COLUMN pending_interactions;
       PRAGMA user_version = ${OWNER_USAGE_MIGRATION - 1}`,
    );
    return;
  }
  await tamper(
    db,
    `${UNDO_PG_LOG_KEYS} DROP TRIGGER attachments_counted ON attachments; DROP FUNCTION sessionmux_count_attachment();
     DROP TABLE owner_usage; ALTER TABLE projections DROP COLUMN pending_interactions;
     DELETE FROM schema_migrations WHERE version >= ${OWNER_USAGE_MIGRATION}`,
  );
}

describeContract("stored data per owner", (backend) => {
  const open = storeFixture(backend);

  it("counts every event's stored data to its session's owner, and nothing of a write that failed", async () => {
    const { store } = await open();
    await store.create({ sessionId: "a", owner: "o", model: "m" });
    await store.create({ sessionId: "b", owner: "o", model: "m" });
    await store.create({ sessionId: "p", owner: "p", model: "m" });
    await store.append("a", [delta("x".repeat(1000)), delta("é".repeat(300))]);
    await store.append("b", [
      { type: "raw/bytes", data: { bytes: new Uint8Array(5000) } } as unknown as NewEvent,
    ]);
    await store.append("p", [delta("other owner")]);
    // submitted in one tick, so they share a transaction: the oversized event fails it, and the
    // others are written again one by one
    const outcomes = await Promise.allSettled([
      store.append("a", [delta("kept")]),
      store.append("b", [delta("y".repeat(1024 * 1024 + 10))]),
      store.append("p", [delta("kept too")]),
    ]);
    expect(outcomes.map((o) => o.status)).toEqual(["fulfilled", "rejected", "fulfilled"]);
    const expected = await usageOf(store, ["a", "b"]);
    expect(expected).toBeGreaterThan(6000);
    expect(await store.ownerStoredBytes("o")).toBe(expected);
    expect(await store.ownerStoredBytes("p")).toBe(await usageOf(store, ["p"]));
    expect(await store.ownerStoredBytes("nobody")).toBe(0);
  });

  it("counts a fork to the fork's owner, and a clear or a delete out of the owner's", async () => {
    const { store } = await open();
    await store.create({ sessionId: "src", owner: "o", model: "m" });
    await store.append("src", [delta("a".repeat(2000)), delta("b".repeat(3000))]);
    expect((await store.fork({ sourceId: "src", targetId: "copy", owner: "q" })).status).toBe("created");
    expect(await store.ownerStoredBytes("q")).toBe(await usageOf(store, ["copy"]));
    expect(await store.ownerStoredBytes("q")).toBeGreaterThan(5000);
    expect(await store.ownerStoredBytes("o")).toBe(await usageOf(store, ["src"]));

    expect((await store.clear("src")).status).toBe("cleared");
    await store.append("src", [delta("after the clear")]);
    expect(await store.ownerStoredBytes("o")).toBe(await usageOf(store, ["src"]));
    expect(await store.ownerStoredBytes("o")).toBeLessThan(1000);

    expect((await store.delete("copy")).status).toBe("deleted");
    expect(await store.ownerStoredBytes("q")).toBe(0);
    expect((await store.delete("src")).status).toBe("deleted");
    expect(await store.ownerStoredBytes("o")).toBe(0);
  });

  it("counts one transaction's writes to each of its owners, whatever their names, out and in", async () => {
    const { store } = await open();
    const owners = ['"quoted", [bracketed]', "ünï cödé ✓", "plain", "back\\slash"];
    for (const [i, owner] of owners.entries()) {
      await store.create({ sessionId: `s${i}`, owner, model: "m" });
      await store.append(`s${i}`, [delta(String(i).repeat(500 * (i + 1)))]);
    }
    // one tick: appends for three owners and a clear that takes the fourth's data out share a
    // transaction, so their counts move together
    const outcomes = await Promise.all([
      store.append("s0", [delta("more for the first")]),
      store.append("s1", [delta("x".repeat(700)), delta("y")]),
      store.clear("s2"),
      store.append("s3", [delta("z".repeat(64))]),
    ]);
    expect(outcomes.map((o) => o.status)).toEqual(["appended", "appended", "cleared", "appended"]);
    for (const [i, owner] of owners.entries())
      expect(await store.ownerStoredBytes(owner)).toBe(await usageOf(store, [`s${i}`]));
    expect(await store.ownerStoredBytes("plain")).toBe(0);
    expect(await store.ownerStoredBytes("back\\slash")).toBeGreaterThan(2000);
  });

  it("counts an owner's attachments from their upload until they are deleted with their session", async () => {
    const { store } = await open();
    await store.create({ sessionId: "s", owner: "o", model: "m" });
    const events = await usageOf(store, ["s"]);
    const linked = await upload(store, "o", 3000);
    await upload(store, "o", 700);
    await upload(store, "p", 50);
    expect(await store.ownerStoredBytes("o")).toBe(events + 3700);
    expect(await store.ownerStoredBytes("p")).toBe(50);
    await store.append("s", [withAttachment(linked, 3000)]);
    expect(await store.ownerStoredBytes("o")).toBe((await usageOf(store, ["s"])) + 3700);
    // the session's delete takes its attachment with it; the upload no prompt referenced stays
    expect((await store.delete("s")).status).toBe("deleted");
    expect(await store.ownerStoredBytes("o")).toBe(700);
  });

  it("is durable, and a database from before the count is counted when it is opened", async () => {
    const db = await open();
    const { store } = db;
    await store.create({ sessionId: "a", owner: "o", model: "m" });
    await store.create({ sessionId: "b", owner: "p", model: "m" });
    await store.append("a", [delta("x".repeat(4000))]);
    await store.append("b", [delta("y".repeat(7000))]);
    await upload(store, "p", 900);
    const before = { o: await usageOf(store, ["a"]), p: (await usageOf(store, ["b"])) + 900 };
    expect(await store.ownerStoredBytes("o")).toBe(before.o);
    expect(await store.ownerStoredBytes("p")).toBe(before.p);

    await rewind(db);
    const reopened = await db.openAnother();
    expect(await reopened.ownerStoredBytes("o")).toBe(before.o);
    expect(await reopened.ownerStoredBytes("p")).toBe(before.p);
    await reopened.append("a", [delta("more")]);
    expect(await reopened.ownerStoredBytes("o")).toBe(await usageOf(reopened, ["a"]));
    await upload(reopened, "o", 10);
    expect(await reopened.ownerStoredBytes("o")).toBe((await usageOf(reopened, ["a"])) + 10);
  });

  it("rebuild-projections counts every owner again from the rows", async () => {
    const db = await open();
    const { store } = db;
    await store.create({ sessionId: "a", owner: "o", model: "m" });
    await store.create({ sessionId: "b", owner: "p", model: "m" });
    await store.append("a", [delta("x".repeat(3000))]);
    await upload(store, "o", 250);
    const truth = { o: (await usageOf(store, ["a"])) + 250, p: await usageOf(store, ["b"]) };
    await tamper(
      db,
      "UPDATE owner_usage SET stored_bytes = 1 WHERE owner = 'o'; DELETE FROM owner_usage WHERE owner = 'p'",
    );
    expect(await store.ownerStoredBytes("o")).toBe(1);
    await store.rebuildProjections();
    expect(await store.ownerStoredBytes("o")).toBe(truth.o);
    expect(await store.ownerStoredBytes("p")).toBe(truth.p);
    await store.append("b", [delta("after")]);
    expect(await store.ownerStoredBytes("p")).toBe(await usageOf(store, ["b"]));
    // appends submitted in the same tick share the rebuild's transaction, before and after it
    await Promise.all([
      store.append("a", [delta("before the recount")]),
      store.rebuildProjections(),
      store.append("a", [delta("after the recount")]),
    ]);
    expect(await store.ownerStoredBytes("o")).toBe((await usageOf(store, ["a"])) + 250);
  });

  if (backend.name === "postgres") {
    it("the expiry sweep of unreferenced uploads counts them out", async () => {
      const { store, schema } = await open();
      const expired = await upload(store, "o", 4000);
      await upload(store, "o", 500);
      expect(await store.ownerStoredBytes("o")).toBe(4500);
      const sweeper = pgUploadSweeper(pgUrl!, schema!);
      const errors: unknown[] = [];
      try {
        sweeper.start(-60_000, 20, (err) => errors.push(err));
        await expect.poll(() => store.ownerStoredBytes("o")).toBe(0);
      } finally {
        await sweeper.close();
      }
      expect(errors).toEqual([]);
      expect(await store.getAttachment(expired)).toBeNull();
    });
  }

  if (backend.sharedWriters) {
    it("stays exact when store instances write one owner's sessions at once", async () => {
      const { store, openAnother } = await open();
      const stores = [store, await openAnother(), await openAnother()];
      const ids = Array.from({ length: 6 }, (_, i) => `s${i}`);
      for (const id of ids) await store.create({ sessionId: id, owner: "o", model: "m" });
      await Promise.all(
        Array.from({ length: 60 }, (_, i) =>
          stores[i % 3]!.append(ids[i % 6]!, [delta(`${i}:${"z".repeat(i * 37)}`)]),
        ),
      );
      expect(await stores[1]!.delete("s0")).toEqual({ status: "deleted" });
      expect(await store.ownerStoredBytes("o")).toBe(await usageOf(store, ids));
    });
  }
});
