import pg from "pg";
import { describe, expect, it } from "vitest";
import { SessionmuxError } from "../../../protocol/index.js";
import { PostgresSessionStore } from "../../../src/store/postgres/postgres-store.js";
import type { CommitNotice } from "../../../src/store/session-store.js";
import { cleanupsAfterEach } from "../../support/cleanups.js";
import { settlement } from "../../support/settlement.js";
import { readWholeLog } from "../../support/whole-log.js";
import { pgUrl } from "../contract/backends.js";
import { userMessage } from "../open-store.js";
import { waitingOn } from "./held-writes.js";
import { openStoreBehindProxy } from "./store-behind-proxy.js";

/**
 * The group commit's connection whose network path goes silent (packets dropped, no reset) in the
 * middle of a transaction: nothing closes it, and without a check its writes wait on a COMMIT
 * that never answers for as long as TCP retransmits (about 15 minutes), every later write of the
 * host queued behind them. The store asks the server on another connection what the writer's
 * backend does: one that no longer runs a statement while the client still waits (it answered
 * into the silence), or a server that does not answer, has the writer's socket destroyed, and the
 * writes end as on a closed connection, `persistence_failure`, their outcome unknown.
 */

const cleanups = cleanupsAfterEach();

/** A store reaching the database through a TCP proxy, checking its writer every 300 ms. */
const openFar = () => openStoreBehindProxy(cleanups, "smx_writer_silent");

async function adminClient(): Promise<pg.Client> {
  const admin = new pg.Client({ connectionString: pgUrl! });
  await admin.connect();
  cleanups.push(() => admin.end());
  return admin;
}

/** The seq of every event a subscriber on `store` was given for `sessionId`. */
function seqsHeard(store: PostgresSessionStore, sessionId: string): Set<number> {
  const seqs = new Set<number>();
  store.subscribe(sessionId, (notice: CommitNotice) => {
    if (notice.kind === "append" || notice.kind === "create")
      for (const event of notice.events) seqs.add(event.seq);
  });
  return seqs;
}

/** The texts of the user messages in the log, asserting its seqs run 1, 2, 3 … with no gap. */
async function contiguousTexts(store: PostgresSessionStore, sessionId: string): Promise<string[]> {
  const read = await readWholeLog(store, sessionId);
  if (read.status !== "ok") throw new Error(read.status);
  expect(read.events.map((event) => event.seq)).toEqual(read.events.map((_, i) => i + 1));
  return read.events.flatMap((event) => (event.type === "user/message" ? [event.data.text] : []));
}

function expectPersistenceFailure(settled: { error: unknown } | { value: unknown } | undefined): void {
  expect(settled).toBeDefined();
  expect(settled).toHaveProperty("error");
  const { error } = settled as { error: unknown };
  expect(error).toBeInstanceOf(SessionmuxError);
  expect((error as SessionmuxError).code).toBe("persistence_failure");
}

describe.skipIf(!pgUrl)("PostgreSQL group commit whose connection goes silent", () => {
  it("leaves a write waiting on another transaction's row lock alone, and fails it persistence_failure once its answer is lost; the next write commits and the log holds each once", async () => {
    const { store, proxy, schema, checks } = await openFar();
    await store.create({ sessionId: "s1", owner: "alice", model: "m" });
    const heard = seqsHeard(store, "s1");
    expect((await store.append("s1", [userMessage("one")])).status).toBe("appended");

    // another transaction holds the session's head, as `rebuild-projections` or another host does
    const admin = await adminClient();
    await admin.query("BEGIN");
    await admin.query(`SELECT 1 FROM "${schema}".projections WHERE session_id = 's1' FOR UPDATE`);
    const { rows } = await admin.query<{ pid: number }>("SELECT pg_backend_pid() AS pid");
    const write = settlement(store.append("s1", [userMessage("two")]));
    // the group commit's connection waits on it (the port it comes from: the proxy's side)
    const blocked = async () => (await waitingOn(admin, rows[0]!.pid)).map(({ port }) => port);
    await expect.poll(blocked, { timeout: 10_000 }).toHaveLength(1);
    const [writerPort] = await blocked();
    // the writer is checked again and again while it waits, and left to wait: its backend runs
    const before = checks();
    await expect.poll(checks, { timeout: 10_000 }).toBeGreaterThanOrEqual(before + 3);
    expect(write()).toBeUndefined();

    // its path goes silent, and the lock is let go: the server runs what it was sent, and its
    // answers are lost
    expect(proxy.silenceAll((_, port) => port === writerPort)).toBe(1);
    await admin.query("COMMIT");
    await expect.poll(write, { timeout: 20_000 }).toBeDefined();
    expectPersistenceFailure(write());

    // a new connection takes the next write, at the head as it is now
    expect((await store.append("s1", [userMessage("three")])).status).toBe("appended");
    const texts = await contiguousTexts(store, "s1");
    // "two" may have landed (its COMMIT was sent before the silence) or not: never twice
    expect(texts.filter((text) => text === "two").length).toBeLessThanOrEqual(1);
    expect(texts.filter((text) => text !== "two")).toEqual(["one", "three"]);
    // the subscriber is given every event the log holds from its first on, whatever became of "two"
    const head = texts.length + 1;
    await expect
      .poll(() => [...heard].sort((a, b) => a - b), { timeout: 10_000 })
      .toEqual(Array.from({ length: head - 1 }, (_, i) => i + 2));
  }, 60_000);

  it("fails a write persistence_failure when the server does not answer the check either, and commits the next once the path is back", async () => {
    const { store, proxy, schema } = await openFar();
    await store.create({ sessionId: "s1", owner: "alice", model: "m" });
    expect((await store.append("s1", [userMessage("one")])).status).toBe("appended");

    // every connection goes silent, and so does each new one: the checks' too
    proxy.silenceNew(() => true);
    expect(proxy.silenceAll()).toBeGreaterThanOrEqual(1);
    const write = settlement(store.append("s1", [userMessage("two")]));
    await expect.poll(write, { timeout: 20_000 }).toBeDefined();
    expectPersistenceFailure(write());
    // a write made while the path is still silent fails too, its handshake bounded
    const meanwhile = settlement(store.append("s1", [userMessage("meanwhile")]));
    await expect.poll(meanwhile, { timeout: 20_000 }).toBeDefined();
    expectPersistenceFailure(meanwhile());

    proxy.silenceNew();
    expect((await store.append("s1", [userMessage("three")])).status).toBe("appended");
    // read on a direct connection: the store's read connections went silent too
    const near = await PostgresSessionStore.open(pgUrl!, { schema, maxConnections: 2 });
    cleanups.push(() => near.close());
    // what was sent into the silence never reached the server
    expect(await contiguousTexts(near, "s1")).toEqual(["one", "three"]);
  }, 60_000);
});
