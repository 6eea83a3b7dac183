import { randomBytes } from "node:crypto";
import pg from "pg";
import { describe, expect, inject, it, vi } from "vitest";
import { openHostDatabase } from "../../src/operations/host-database.js";
import type { ForwardedCall } from "../../src/store/call-inbox.js";
import { PgCallInbox } from "../../src/store/postgres/pg-call-inbox.js";
import { PG_SCHEMA_VERSION } from "../../src/store/postgres/pg-schema.js";
import { dropSchema } from "../store/contract/backends.js";
import { call } from "../store/postgres/call-inbox-rows.js";
import { cleanupsAfterEach } from "../support/cleanups.js";

/**
 * A host on PostgreSQL whose schema gained an entry that needs hosts of its build stopped, by
 * means that did not wait for it to stop (written by hand, or by a build without that check):
 * `/readyz`'s check reads the schema's entries with the server's state, so the host answers not
 * ready `build_outdated` and refuses every write from then on, forwarding no call and claiming
 * none. An entry that needs no stop changes nothing.
 */

const pgUrl = inject("pgUrl");
const cleanups = cleanupsAfterEach();
const metrics = { committed: () => undefined };

/** A host database on a schema of its own, and a way to add entries to the schema by hand. */
async function hostOnSchema() {
  const schema = `outdated_${randomBytes(6).toString("hex")}`;
  cleanups.push(() => dropSchema(pgUrl!, schema));
  const database = await openHostDatabase({ db: pgUrl!, schema, hostId: "h1", metrics });
  cleanups.push(() => database.close());
  const admin = new pg.Client({ connectionString: pgUrl! });
  await admin.connect();
  cleanups.push(() => admin.end());
  const later = (version: number, stops: boolean) =>
    admin.query(`INSERT INTO "${schema}".schema_migrations (version, stops_earlier_builds) VALUES ($1, $2)`, [
      version,
      stops,
    ]);
  return { schema, database, admin, later };
}

describe.skipIf(!pgUrl)("a host whose schema moved past its build", { timeout: 60_000 }, () => {
  it("forwards no call, and claims none addressed to it, once an entry stops its build", async () => {
    const { schema, database, admin, later } = await hostOnSchema();
    const inbox = database.shared!.inbox;
    // a host of the newer build, forwarding calls to this one
    const newer = await PgCallInbox.open(pgUrl!, { schema });
    cleanups.push(() => newer.close());
    const ran: ForwardedCall[] = [];
    inbox.serve("h1", async (forwarded) => {
      ran.push(forwarded);
      return { status: "ok", result: null };
    });
    expect(await newer.send("h1", call("s1"), 20_000)).toEqual({ status: "ok", result: null });
    await later(PG_SCHEMA_VERSION + 1, true);
    await expect(database.ready()).rejects.toMatchObject({ code: "build_outdated" });
    await expect(inbox.send("h2", call("s2"), 20_000)).rejects.toMatchObject({ code: "host_shutting_down" });
    // not claimed while its sender waits: taken back, for the session's next owner
    expect(await newer.send("h1", call("s3"), 2_000)).toEqual({ status: "timeout" });
    expect(ran.map((forwarded) => forwarded.sessionId)).toEqual(["s1"]);
    expect(await admin.query(`SELECT 1 FROM "${schema}".forwarded_calls`)).toMatchObject({ rowCount: 0 });
  });

  it("sweeps no upload once an entry stops its build", async () => {
    const schema = `outdated_${randomBytes(6).toString("hex")}`;
    cleanups.push(() => dropSchema(pgUrl!, schema));
    // closed by the test: its close waits for the sweep under way
    const database = await openHostDatabase({ db: pgUrl!, schema, hostId: "h1", metrics });
    let closed = false;
    cleanups.push(async () => {
      if (!closed) await database.close();
    });
    const attachmentId = await database.store.putAttachment({
      owner: "o",
      name: "f",
      type: "t",
      bytes: new Uint8Array(10),
    });
    const admin = new pg.Client({ connectionString: pgUrl! });
    await admin.connect();
    cleanups.push(() => admin.end());
    await admin.query(
      `INSERT INTO "${schema}".schema_migrations (version, stops_earlier_builds) VALUES ($1, true)`,
      [PG_SCHEMA_VERSION + 1],
    );
    await expect(database.ready()).rejects.toMatchObject({ code: "build_outdated" });
    const errors: unknown[] = [];
    vi.useFakeTimers({ toFake: ["setInterval", "clearInterval"] });
    try {
      // every upload expired: a sweep of this build would delete it
      database.uploads.start(-60_000, 1_000, (err) => errors.push(err));
      vi.advanceTimersByTime(1_000);
      database.uploads.stop();
    } finally {
      vi.useRealTimers();
    }
    closed = true;
    await database.close();
    expect(errors).toEqual([]);
    const { rows } = await admin.query(`SELECT attachment_id FROM "${schema}".attachments`);
    expect(rows).toEqual([{ attachment_id: attachmentId }]);
  });

  it("answers not ready build_outdated and refuses writes host_shutting_down once an entry stops its build", async () => {
    const { schema, database, admin, later } = await hostOnSchema();
    await database.ready();
    // a later entry that earlier builds may run beside: still ready, still writing
    await later(PG_SCHEMA_VERSION + 1, false);
    await database.ready();
    await database.store.create({ sessionId: "a", owner: "o", model: "m" });
    await later(PG_SCHEMA_VERSION + 2, true);
    await expect(database.ready()).rejects.toMatchObject({ name: "NotReadyError", code: "build_outdated" });
    await expect(database.store.create({ sessionId: "b", owner: "o", model: "m" })).rejects.toMatchObject({
      code: "host_shutting_down",
      data: { schemaVersion: PG_SCHEMA_VERSION + 2, buildSchemaVersion: PG_SCHEMA_VERSION },
    });
    const { rows } = await admin.query(`SELECT session_id FROM "${schema}".sessions ORDER BY session_id`);
    expect(rows).toEqual([{ session_id: "a" }]);
    // and it stays so
    await expect(database.ready()).rejects.toMatchObject({ code: "build_outdated" });
  });
});
