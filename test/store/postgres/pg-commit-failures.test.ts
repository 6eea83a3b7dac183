import pg from "pg";
import { afterEach, describe, expect, it, vi } from "vitest";
import { PostgresSessionStore } from "../../../src/store/postgres/postgres-store.js";
import { readWholeLog } from "../../support/whole-log.js";
import {
  backends,
  type ContractStore,
  type Opener,
  pgUrl,
  type StoreUnderTest,
  storeFixture,
} from "../contract/backends.js";
import { delta } from "../open-store.js";
import { serverWarnings } from "./pg-client-spies.js";
import { refusableRole } from "./refusable-role.js";

/**
 * How the group commit on PostgreSQL meets a failing transaction, with the failure raised by
 * PostgreSQL itself: a trigger in the store's own schema fails inserts into the log with a chosen
 * SQLSTATE, for as many statements as a sequence allows (a sequence, because its count survives
 * the rollback of the transaction that failed). A lost race is run again, up to three more times;
 * the database failing its part fails every write of the batch with `persistence_failure`, and
 * none of them is run again; nothing a caller was refused is ever in the log.
 */
const postgres = backends.find((backend) => backend.name === "postgres");

/** A store on a fresh schema with sessions `a` and `b`, each one event long. */
async function openStore(open: Opener): Promise<StoreUnderTest> {
  const s = await open();
  for (const sessionId of ["a", "b"]) await s.store.create({ sessionId, owner: "o", model: "m" });
  return s;
}

/** From now on the next `times` inserts into the log fail with `sqlstate`. */
async function failInserts(schema: string, sqlstate: string, times: number): Promise<void> {
  const admin = new pg.Client({ connectionString: pgUrl! });
  await admin.connect();
  try {
    await admin.query(`SET search_path = "${schema}"`);
    await admin.query(`CREATE SEQUENCE injected_failures`);
    await admin.query(`CREATE FUNCTION fail_log_inserts() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        IF nextval('injected_failures') <= ${times} THEN
          RAISE EXCEPTION 'injected failure' USING ERRCODE = '${sqlstate}';
        END IF;
        RETURN NULL;
      END $$`);
    await admin.query(
      `CREATE TRIGGER fail_log_inserts BEFORE INSERT ON events FOR EACH STATEMENT EXECUTE FUNCTION fail_log_inserts()`,
    );
  } finally {
    await admin.end();
  }
}

async function texts(store: ContractStore | PostgresSessionStore, sessionId: string): Promise<string[]> {
  const read = await readWholeLog(store, sessionId);
  if (read.status !== "ok") throw new Error(read.status);
  return read.events.flatMap((event) => (event.type === "assistant/delta" ? [event.data.text] : []));
}

afterEach(() => {
  vi.restoreAllMocks();
});

describe.skipIf(!postgres)("PostgreSQL group commit under failing transactions", () => {
  const open = storeFixture(postgres!);
  it("runs a transaction that lost a race again, and commits it once", async () => {
    const s = await openStore(open);
    await failInserts(s.schema!, "40P01", 3);
    const before = s.store.stats();
    const [a, b] = await Promise.all([
      s.store.append("a", [delta("t", "a1")]),
      s.store.append("b", [delta("t", "b1")]),
    ]);
    expect([a.status, b.status]).toEqual(["appended", "appended"]);
    const after = s.store.stats();
    expect(after.rollbacks - before.rollbacks).toBe(3);
    expect(after.transactions - before.transactions).toBe(1);
    expect(after.operations - before.operations).toBe(2);
    expect(await texts(s.store, "a")).toEqual(["a1"]);
    expect(await texts(s.store, "b")).toEqual(["b1"]);
  });

  it("gives up on a race lost four times with the database's error, writes nothing, and sends no ROLLBACK after a failed COMMIT", async () => {
    const s = await openStore(open);
    await failInserts(s.schema!, "40001", 4);
    const warnings = serverWarnings();
    const before = s.store.stats();
    await expect(s.store.append("a", [delta("t", "a1")])).rejects.toMatchObject({ code: "40001" });
    expect(s.store.stats().rollbacks - before.rollbacks).toBe(4);
    // each failed COMMIT already ended its transaction: no ROLLBACK was sent after it
    expect(warnings).toEqual([]);
    expect(await texts(s.store, "a")).toEqual([]);
    // the race is over: the next append commits, at the next seq
    expect(await s.store.append("a", [delta("t", "a2")])).toMatchObject({
      status: "appended",
      events: [{ seq: 2 }],
    });
  });

  it("fails every write of a batch the database could not take with persistence_failure, runs none again", async () => {
    const s = await openStore(open);
    await failInserts(s.schema!, "53100", 1);
    const before = s.store.stats();
    const outcomes = await Promise.allSettled([
      s.store.append("a", [delta("t", "a1")]),
      s.store.append("b", [delta("t", "b1")]),
    ]);
    for (const outcome of outcomes) {
      expect(outcome.status).toBe("rejected");
      if (outcome.status === "rejected")
        expect(outcome.reason).toMatchObject({ code: "persistence_failure", data: { postgres: "53100" } });
    }
    const after = s.store.stats();
    expect(after.rollbacks - before.rollbacks).toBe(1);
    expect(after.transactions).toBe(before.transactions);
    expect(await texts(s.store, "a")).toEqual([]);
    expect(await texts(s.store, "b")).toEqual([]);
    // the database is back: both sessions take their next event at seq 2
    expect(await s.store.append("a", [delta("t", "a2")])).toMatchObject({ events: [{ seq: 2 }] });
    expect(await s.store.append("b", [delta("t", "b2")])).toMatchObject({ events: [{ seq: 2 }] });
  });
  it("fails writes with persistence_failure while the database refuses its connections, then carries on", async () => {
    const refusable = await refusableRole("smx_refused");
    let store: PostgresSessionStore | undefined;
    try {
      store = await PostgresSessionStore.open(refusable.url, { schema: refusable.schema, maxConnections: 2 });
      await store.create({ sessionId: "a", owner: "o", model: "m" });
      expect(await store.append("a", [delta("t", "before")])).toMatchObject({ status: "appended" });

      // the role may no longer log in, and its open connections end: no writer connection is left
      await refusable.lockOut();
      for (const text of ["refused 1", "refused 2"])
        await expect(store.append("a", [delta("t", text)])).rejects.toMatchObject({
          code: "persistence_failure",
        });

      await refusable.letIn();
      expect(await store.append("a", [delta("t", "after")])).toMatchObject({
        status: "appended",
        events: [{ seq: 3 }],
      });
      expect(await texts(store, "a")).toEqual(["before", "after"]);
    } finally {
      await store?.close();
      await refusable.drop();
    }
  });
});
