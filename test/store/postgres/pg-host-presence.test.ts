import { randomBytes } from "node:crypto";
import pg from "pg";
import { afterEach, describe, expect, it, vi } from "vitest";
import { LEGACY_CHECK_MS, LEGACY_LISTENER } from "../../../src/store/postgres/pg-host-presence.js";
import { PostgresSessionStore } from "../../../src/store/postgres/postgres-store.js";
import type { CommitNotice } from "../../../src/store/session-store.js";
import { dropSchema, pgUrl } from "../contract/backends.js";
import { delta } from "../open-store.js";
import { holdSessionWrites } from "./held-writes.js";
import { gateListenConnects } from "./listen-connects.js";

/**
 * A host alone on its database sends no NOTIFY (see `pg-host-presence.ts`); whenever another host
 * is present, or may be about to be, every committed batch is announced.
 */

const cleanups: (() => Promise<unknown>)[] = [];

afterEach(async () => {
  vi.useRealTimers();
  vi.restoreAllMocks();
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup().catch(() => undefined);
});

function newSchema(): string {
  const schema = `presence_${randomBytes(6).toString("hex")}`;
  cleanups.push(() => dropSchema(pgUrl!, schema));
  return schema;
}

async function openHost(schema: string, hostId: string): Promise<PostgresSessionStore> {
  const store = await PostgresSessionStore.open(pgUrl!, { schema, maxConnections: 2, hostId });
  cleanups.push(() => store.close());
  return store;
}

async function connect(config: pg.ClientConfig = {}): Promise<pg.Client> {
  const client = new pg.Client({ connectionString: pgUrl!, ...config });
  await client.connect();
  cleanups.push(() => client.end());
  return client;
}

/**
 * A plain LISTEN on the schema's channel (no presence lock: it does not count as a host) that
 * records whose NOTIFYs it hears; `settled()` resolves once every announcement the stores sent so
 * far was run and a marker sent after them was heard, so what it heard then is all it will hear.
 */
async function overhear(schema: string, config: pg.ClientConfig = {}) {
  const channel = `sessionmux_${schema}`;
  const heard: string[] = [];
  const listener = await connect(config);
  listener.on("notification", (message) => {
    const payload = message.payload ?? "";
    heard.push(payload.startsWith("marker") ? payload : (JSON.parse(payload) as { h: string }).h);
  });
  await listener.query(`LISTEN "${channel}"`);
  const announcements: Promise<unknown>[] = [];
  const query = pg.Client.prototype.query as (...args: unknown[]) => unknown;
  vi.spyOn(pg.Client.prototype, "query").mockImplementation(function (this: pg.Client, ...args: unknown[]) {
    const result = query.apply(this, args);
    // the announcements are the statements prepared as `sessionmux_notify…`
    const config = args[0] as string | { name?: string };
    const statement = (typeof config === "string" ? undefined : config.name) ?? "";
    const name = (this as unknown as { connectionParameters: { application_name?: string } })
      .connectionParameters.application_name;
    if (
      name?.startsWith("sessionmux") &&
      statement.startsWith("sessionmux_notify") &&
      result instanceof Promise
    )
      announcements.push(result.catch(() => undefined));
    return result;
  } as typeof pg.Client.prototype.query);
  const admin = await connect();
  let markers = 0;
  return {
    heard,
    /** How many announcements the stores ran (sent or not). */
    announced: () => announcements.length,
    async settled(): Promise<string[]> {
      await Promise.all(announcements);
      const marker = `marker-${++markers}`;
      await admin.query("SELECT pg_notify($1, $2)", [channel, marker]);
      await vi.waitFor(() => expect(heard).toContain(marker), { timeout: 10_000 });
      return heard.filter((entry) => !entry.startsWith("marker"));
    },
  };
}

/** Polls until an append of `a` is announced to nobody (its count of hosts heard does not grow). */
async function unannouncedSoon(
  a: PostgresSessionStore,
  ear: Awaited<ReturnType<typeof overhear>>,
): Promise<void> {
  await vi.waitFor(
    async () => {
      const before = (await ear.settled()).length;
      await a.append("s", [delta("t", "probe")]);
      expect((await ear.settled()).length).toBe(before);
    },
    { timeout: 10_000, interval: 100 },
  );
}

/** Records every uncaught exception and unhandled rejection until the test's cleanup. */
function processFailures(): unknown[] {
  const failures: unknown[] = [];
  const record = (reason: unknown) => failures.push(reason);
  process.on("uncaughtException", record);
  process.on("unhandledRejection", record);
  cleanups.push(async () => {
    process.off("uncaughtException", record);
    process.off("unhandledRejection", record);
  });
  return failures;
}

/** The backend holding the schema's presence lock (one host open: its group-commit connection). */
async function presenceHolder(admin: pg.Client, schema: string): Promise<number> {
  const held = await admin.query<{ pid: number }>(
    `SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND classid = ${0x534d}
       AND objid = hashtext($1)::oid AND granted`,
    [`sessionmux_${schema}`],
  );
  expect(held.rows).toHaveLength(1);
  return held.rows[0]!.pid;
}

/** The seqs a subscriber of session "s" on `store` was given. */
function seqsOf(store: PostgresSessionStore): number[] {
  const seqs: number[] = [];
  store.subscribe("s", (notice) => {
    if (notice.kind === "append" || notice.kind === "create") seqs.push(...notice.events.map((e) => e.seq));
  });
  return seqs;
}

describe.skipIf(!pgUrl)("a PostgreSQL host's NOTIFY and the other hosts present", () => {
  it("sends none while alone, one per batch while another host listens, and none again once it left", async () => {
    const schema = newSchema();
    // an older build's listener, but of another schema: it needs no NOTIFY of this one
    const elsewhere = await connect({ application_name: LEGACY_LISTENER });
    await elsewhere.query(`LISTEN "sessionmux_${schema}_other"; SELECT 1`);
    const a = await openHost(schema, "host-a");
    const ear = await overhear(schema);

    await a.create({ sessionId: "s", owner: "o", model: "m" });
    await a.append("s", [delta("t", "alone")]);
    expect(await ear.settled()).toEqual([]);
    expect(ear.announced()).toBe(2);

    const b = await openHost(schema, "host-b");
    await a.append("s", [delta("t", "with b")]);
    expect(await ear.settled()).toEqual(["host-a"]);

    await b.close();
    await unannouncedSoon(a, ear);
  });

  it("decides after COMMIT: a host that starts while a batch waits inside its transaction hears of it", async () => {
    const schema = newSchema();
    const a = await openHost(schema, "host-a");
    const held = await holdSessionWrites(schema, "INSERT");
    cleanups.push(() => held.end());
    await held.hold();
    const created = a.create({ sessionId: "late", owner: "o", model: "m" });
    await held.waitFor("held");

    // a alone when its batch began: b starts, follows the session and finds nothing in the log
    const b = await openHost(schema, "host-b");
    const heard: CommitNotice["kind"][] = [];
    b.subscribe("late", (notice) => heard.push(notice.kind));
    expect((await b.readAfter("late", 0, 10)).status).toBe("not_found");

    await held.release();
    expect((await created).status).toBe("created");
    await vi.waitFor(() => expect(heard).toEqual(["create"]), { timeout: 10_000 });
  });

  it("announces every batch while a listener of a build without presence locks is connected", async () => {
    vi.useFakeTimers({ toFake: ["setInterval", "clearInterval"] });
    const schema = newSchema();
    const old = new pg.Client({ connectionString: pgUrl!, application_name: LEGACY_LISTENER });
    await old.connect();
    // as an older build's LISTEN connection: the LISTEN its last statement
    await old.query(`LISTEN "sessionmux_${schema}"; SELECT 1`);
    try {
      const ear = await overhear(schema);
      const a = await openHost(schema, "host-a");
      await a.create({ sessionId: "s", owner: "o", model: "m" });
      expect(await ear.settled()).toEqual(["host-a"]);
      await old.end();
      // found gone at a later look (every LEGACY_CHECK_MS)
      vi.advanceTimersByTime(LEGACY_CHECK_MS);
      await unannouncedSoon(a, ear);
    } finally {
      await old.end().catch(() => undefined);
    }
  });

  it("a host whose group-commit connection ended listens again and delivers what others committed meanwhile", async () => {
    const schema = newSchema();
    const a = await openHost(schema, "host-a");
    const admin = await connect();
    const presence = await admin.query<{ pid: number }>(
      `SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND classid = ${0x534d}
         AND objid = hashtext($1)::oid AND granted`,
      [`sessionmux_${schema}`],
    );
    expect(presence.rows).toHaveLength(1);
    const b = await openHost(schema, "host-b");
    await b.create({ sessionId: "s", owner: "o", model: "m" });
    const seqs: number[] = [];
    a.subscribe("s", (notice) => {
      if (notice.kind === "append" || notice.kind === "create") seqs.push(...notice.events.map((e) => e.seq));
    });
    expect((await a.readAfter("s", 0, 10)).status).toBe("ok");

    // a's presence ends with its connection: b, alone now, announces nothing of this append
    await admin.query("SELECT pg_terminate_backend($1, 10000)", [presence.rows[0]!.pid]);
    await b.append("s", [delta("t", "while a was away")]);
    await vi.waitFor(() => expect(seqs).toContain(2), { timeout: 10_000 });
    // and a is present again: b's next append is announced to it
    await b.append("s", [delta("t", "with a back")]);
    await vi.waitFor(() => expect(seqs).toContain(3), { timeout: 10_000 });
    expect(new Set(seqs).size).toBe(seqs.length);
  });

  it("a host whose LISTEN connection is down already when its group-commit connection ends carries on, and listens again", async () => {
    const schema = newSchema();
    const a = await openHost(schema, "host-a");
    const admin = await connect();
    const feed = await admin.query<{ pid: number }>(
      `SELECT pid FROM pg_stat_activity WHERE application_name = 'sessionmux-feed' AND starts_with(query, $1)`,
      [`LISTEN "sessionmux_${schema}"`],
    );
    expect(feed.rows).toHaveLength(1);
    const writer = await presenceHolder(admin, schema);
    const b = await openHost(schema, "host-b");
    await b.create({ sessionId: "s", owner: "o", model: "m" });
    const seqs = seqsOf(a);
    expect((await a.readAfter("s", 0, 10)).status).toBe("ok");
    const failures = processFailures();

    // a's LISTEN connection ends, and its next one is held back: a listens on nothing
    const { openConnects, connecting } = gateListenConnects();
    await admin.query("SELECT pg_terminate_backend($1, 10000)", [feed.rows[0]!.pid]);
    await vi.waitFor(() => expect(connecting).toHaveLength(1), { timeout: 10_000 });
    // then its group-commit connection, and with it its presence: the pool lets it go
    const { writerPool } = a as unknown as { writerPool: pg.Pool };
    await admin.query("SELECT pg_terminate_backend($1, 10000)", [writer]);
    await vi.waitFor(() => expect(writerPool.totalCount).toBe(0), { timeout: 10_000 });
    // b, alone now, announces nothing of this append
    await b.append("s", [delta("t", "while a was away")]);
    openConnects();
    await vi.waitFor(() => expect(seqs).toContain(2), { timeout: 10_000 });
    // and a is present again: b's next append is announced to it
    await b.append("s", [delta("t", "with a back")]);
    await vi.waitFor(() => expect(seqs).toContain(3), { timeout: 10_000 });
    expect(new Set(seqs).size).toBe(seqs.length);
    expect(failures).toEqual([]);
  });

  it("a host whose presence lock could not be taken discards that connection and does not listen until a later attempt holds it", async () => {
    const schema = newSchema();
    const channel = `sessionmux_${schema}`;
    const a = await openHost(schema, "host-a");
    await a.create({ sessionId: "s", owner: "o", model: "m" });
    const seqs = seqsOf(a);
    const admin = await connect();
    const writer = await presenceHolder(admin, schema);
    const failures = processFailures();
    // the key in exclusive mode, granted once a's group-commit connection ended: a's next request
    // for it waits
    const blocker = await connect();
    const exclusive = blocker.query("SELECT pg_advisory_lock($1, hashtext($2))", [0x534d, channel]);
    const { openConnects } = gateListenConnects();
    await admin.query("SELECT pg_terminate_backend($1, 10000)", [writer]);
    await exclusive;
    openConnects();
    const waiting = async () =>
      (
        await admin.query<{ pid: number }>(
          `SELECT pid FROM pg_stat_activity WHERE application_name = 'sessionmux' AND wait_event_type = 'Lock'
             AND starts_with(query, 'SELECT pg_advisory_lock_shared') AND strpos(query, $1) > 0`,
          [`'${channel}'`],
        )
      ).rows.map((row) => row.pid);
    await expect.poll(waiting, { timeout: 10_000, interval: 20 }).toHaveLength(1);
    const [refused] = await waiting();
    // the lock statement fails
    await admin.query("SELECT pg_cancel_backend($1)", [refused]);
    // its connection is let go, and a later attempt asks again on a new one
    const alive = async (pid: number) =>
      (await admin.query("SELECT 1 FROM pg_stat_activity WHERE pid = $1", [pid])).rowCount === 1;
    await expect.poll(() => alive(refused!), { timeout: 10_000, interval: 20 }).toBe(false);
    await expect
      .poll(async () => (await waiting()).filter((pid) => pid !== refused), { timeout: 10_000, interval: 20 })
      .toHaveLength(1);
    // nothing of a listens meanwhile
    const listening = await admin.query(
      `SELECT 1 FROM pg_stat_activity WHERE application_name = 'sessionmux-feed' AND starts_with(query, $1)`,
      [`LISTEN "${channel}"`],
    );
    expect(listening.rows).toEqual([]);
    // once a holds the lock, another host announces its commits to it
    await blocker.query("SELECT pg_advisory_unlock($1, hashtext($2))", [0x534d, channel]);
    const b = await openHost(schema, "host-b");
    await b.append("s", [delta("t", "from b")]);
    await vi.waitFor(() => expect(seqs).toContain(2), { timeout: 10_000 });
    expect(failures).toEqual([]);
  });
});
