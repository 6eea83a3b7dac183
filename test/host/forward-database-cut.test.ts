import { randomBytes, randomUUID } from "node:crypto";
import pg from "pg";
import { describe, expect, inject, it, vi } from "vitest";
import { SessionmuxError } from "../../protocol/index.js";
import { createNodeClient, type SessionmuxClient } from "../../src/client/node.js";
import { type RunningHost, startHost } from "../../src/server.js";
import { PostgresSessionStore } from "../../src/store/postgres/postgres-store.js";
import { dropSchema } from "../store/contract/backends.js";
import { backendPid } from "../store/postgres/held-writes.js";
import { cleanupsAfterEach } from "../support/cleanups.js";
import { gate } from "../support/gate.js";
import { ALICE_TOKEN, TEST_TOKENS } from "../support/host.js";
import { capturedLogger } from "../support/log-capture.js";
import { startTcpProxy, type TcpProxy } from "../support/tcp-proxy.js";
import { until } from "../support/until.js";
import { readWholeLog } from "../support/whole-log.js";

/**
 * Two real hosts on one PostgreSQL database, each reaching it through a TCP proxy of its own, and
 * a client of each over a real socket: a prompt sent to the host that does not own the session is
 * forwarded through the call inbox while one host's database path is cut. The client is told
 * `persistence_failure` (retryable) only when the call was certainly not recorded, else
 * `outcome_unknown`; it is never told success for a turn that did not commit, and the prompt,
 * sent again with its `clientMessageId`, runs once. The log is read through a third store, on a
 * path nothing cuts.
 */

const pgUrl = inject("pgUrl") ?? "";
const cleanups = cleanupsAfterEach(() => vi.restoreAllMocks());

/** How long each host's lease lasts: an owner cut off loses it within a test. */
const LEASE_TTL_MS = 2_000;

interface ProxiedHost {
  running: RunningHost;
  proxy: TcpProxy;
  client: SessionmuxClient;
  /** What the host logged, parsed. */
  logged: Record<string, unknown>[];
}

interface Cluster {
  /** `host-a`: creates the session, so it owns it. */
  a: ProxiedHost;
  /** `host-b`: receives the prompt, and forwards it to `host-a`. */
  b: ProxiedHost;
  /** A store on the database itself, which no test cuts. */
  reader: PostgresSessionStore;
  schema: string;
  /** A connection of the test's own, to the database itself. */
  admin: pg.Client;
}

async function connected(): Promise<pg.Client> {
  const client = new pg.Client({ connectionString: pgUrl });
  await client.connect();
  cleanups.push(() => client.end());
  return client;
}

async function startCluster(): Promise<Cluster> {
  const schema = `forward_cut_${randomBytes(4).toString("hex")}`;
  cleanups.push(() => dropSchema(pgUrl, schema));
  const start = async (hostId: string): Promise<ProxiedHost> => {
    const url = new URL(pgUrl);
    const proxy = await startTcpProxy(Number(url.port || 5432));
    cleanups.push(() => proxy.stop());
    url.hostname = "127.0.0.1";
    url.port = String(proxy.port);
    const { logger, lines } = capturedLogger();
    const running = await startHost({
      logger,
      port: 0,
      host: "127.0.0.1",
      dbPath: url.toString(),
      dbSchema: schema,
      dbPoolSize: 3,
      dbQueryCheckMs: 300,
      hostId,
      leaseTtlMs: LEASE_TTL_MS,
      tokens: TEST_TOKENS,
    });
    cleanups.push(() => running.close());
    const client = createNodeClient({ url: running.wsUrl, token: ALICE_TOKEN });
    cleanups.push(() => client.close());
    return { running, proxy, client, logged: lines };
  };
  const a = await start("host-a");
  const b = await start("host-b");
  const reader = await PostgresSessionStore.open(pgUrl, { schema, maxConnections: 2 });
  cleanups.push(() => reader.close());
  return { a, b, reader, schema, admin: await connected() };
}

/** A session `a` created, so it holds its lease. */
async function ownedBy(a: ProxiedHost): Promise<string> {
  const { header } = await a.client.create({});
  expect(a.running.host.leases?.lease(header.sessionId)).toBeDefined();
  return header.sessionId;
}

/**
 * The faults the host logged as not its database's: a call answered `internal_error` (a storage
 * failure not known as one), a forwarded call that failed so.
 */
function faults(host: ProxiedHost): unknown[] {
  return host.logged
    .filter((line) => line.msg === "mux internal error" || line.msg === "a forwarded call failed")
    .map((line) => line.msg);
}

/** Cuts every connection of the host's path to the database, and refuses new ones until `restore`. */
function cut(host: ProxiedHost): void {
  host.proxy.refuseNew(true);
  host.proxy.cutAll();
}

function restore(host: ProxiedHost): void {
  host.proxy.refuseNew(false);
}

type Answer =
  | { ok: { queued: boolean; turnId?: string } }
  | { code: string; retryable: boolean; message: string; data: unknown }
  | { untyped: unknown };

/** What the client was answered: the result, or the typed error, or `untyped` when it was not one. */
async function answerOf(sent: Promise<{ queued: boolean; turnId?: string }>): Promise<Answer> {
  return sent.then(
    (ok) => ({ ok }),
    (err: unknown) =>
      err instanceof SessionmuxError
        ? { code: err.code, retryable: err.retryable, message: err.message, data: err.data }
        : { untyped: err instanceof Error ? err.message : err },
  );
}

function turnIdOf(answer: Answer): string {
  if (!("ok" in answer) || answer.ok.turnId === undefined)
    throw new Error(`no turn: ${JSON.stringify(answer)}`);
  return answer.ok.turnId;
}

/** The prompts and turns the session's log holds, as the database has it. */
async function logged(reader: PostgresSessionStore, sessionId: string) {
  const read = await readWholeLog(reader, sessionId);
  if (read.status !== "ok") throw new Error(`log of ${sessionId}: ${read.status}`);
  const of = (type: string) => read.events.filter((event) => event.type === type);
  return {
    userMessages: of("user/message").length,
    turns: of("turn/start").map((event) => (event.data as { turnId: string }).turnId),
    ended: of("turn/end").map((event) => (event.data as { turnId: string }).turnId),
  };
}

/** Waits until the turn's `turn/end` is in the log. */
async function turnEnded(reader: PostgresSessionStore, sessionId: string, turnId: string): Promise<void> {
  await until(
    async () => (await logged(reader, sessionId)).ended.includes(turnId),
    20_000,
    `the end of turn ${turnId}`,
  );
}

/** The connections of the host's call inbox pool, as its metrics count them. */
async function inboxConnections(host: RunningHost): Promise<number> {
  const { values } = await host.metrics.dbConnections.get();
  return values.filter((v) => v.labels.pool === "inbox").reduce((n, v) => n + v.value, 0);
}

/** The forwarded calls in the table, and how many of them are answered. */
async function forwardedRows(admin: pg.Client, schema: string): Promise<{ rows: number; answered: number }> {
  const { rows } = await admin.query<{ rows: number; answered: number }>(
    `SELECT count(*)::int AS rows, count(reply)::int AS answered FROM "${schema}".forwarded_calls`,
  );
  return rows[0]!;
}

/**
 * Holds the next turn `host` opens before its `turn/start` is written: `taken` once it is there,
 * until `release()`; `failed` resolves with the error that write then met (undefined if none).
 */
function holdTurnOpening(
  host: ProxiedHost,
  whileFailed: () => void = () => undefined,
): { taken: Promise<void>; release: () => void; failed: Promise<unknown> } {
  const store = host.running.store;
  const append = store.append.bind(store);
  const taken = gate();
  const held = gate();
  let settle!: (err: unknown) => void;
  const failed = new Promise<unknown>((resolve) => {
    settle = resolve;
  });
  let armed = true;
  vi.spyOn(store, "append").mockImplementation(async (sessionId, events, options) => {
    if (!armed || events[0]?.type !== "turn/start") return append(sessionId, events, options);
    armed = false;
    taken.open();
    await held.promise;
    try {
      const written = await append(sessionId, events, options);
      settle(undefined);
      return written;
    } catch (err) {
      whileFailed();
      settle(err);
      throw err;
    }
  });
  return { taken: taken.promise, release: held.open, failed };
}

describe.skipIf(!pgUrl)("a prompt forwarded to the owning host while a database path is cut", () => {
  it("is persistence_failure when the receiving host could not record it, and the retry runs once", async () => {
    const { a, b, reader } = await startCluster();
    const sessionId = await ownedBy(a);
    const params = { sessionId, text: "hello", clientMessageId: randomUUID() };

    // cut before the call: the receiving host reaches nothing
    cut(b);
    expect(await answerOf(b.client.prompt(params))).toMatchObject({
      code: "persistence_failure",
      retryable: true,
    });

    // back, then cut again once it found the owner: the call's own record is what fails
    restore(b);
    const leaseHolder = b.running.store.leaseHolder.bind(b.running.store);
    let armed = true;
    vi.spyOn(b.running.store, "leaseHolder").mockImplementation(async (id) => {
      const holder = await leaseHolder(id);
      if (armed && id === sessionId) {
        armed = false;
        expect(holder?.hostId).toBe("host-a");
        cut(b);
        // the inbox's pooled connection is seen gone, so the record needs a new one
        await until(
          async () => (await inboxConnections(b.running)) === 0,
          10_000,
          "the inbox's pool emptied",
        );
      }
      return holder;
    });
    expect(await answerOf(b.client.prompt(params))).toMatchObject({
      code: "persistence_failure",
      retryable: true,
      message: expect.stringMatching(/could not be sent to the host running this session's agent/),
    });
    expect(await logged(reader, sessionId)).toEqual({ userMessages: 0, turns: [], ended: [] });

    restore(b);
    const retried = await answerOf(b.client.prompt(params));
    const turnId = turnIdOf(retried);
    await turnEnded(reader, sessionId, turnId);
    expect(await logged(reader, sessionId)).toEqual({ userMessages: 1, turns: [turnId], ended: [turnId] });
    // it ran on its owner
    expect((await reader.leaseHolder(sessionId))?.hostId).toBe("host-a");
    expect([...faults(a), ...faults(b)]).toEqual([]);
  }, 60_000);

  it("is outcome_unknown when the receiving host's path is cut with the INSERT sent; it runs at most once, and the owner's followers see it", async () => {
    const { a, b, reader, schema, admin } = await startCluster();
    const sessionId = await ownedBy(a);
    const followed: string[] = [];
    const follow = a.client.follow(sessionId).subscribe({
      next: (update) => {
        if (update.kind !== "events") return;
        for (const event of update.events) if (event.type === "user/message") followed.push(event.data.text);
      },
    });
    cleanups.push(() => follow.unsubscribe());
    const watcher = await connected();
    // the INSERT waits on the table's lock, in the server's hands
    await admin.query("BEGIN");
    await admin.query(`LOCK TABLE "${schema}".forwarded_calls IN ACCESS EXCLUSIVE MODE`);
    const holder = await backendPid(admin);
    const params = { sessionId, text: "hello", clientMessageId: randomUUID() };
    const sent = answerOf(b.client.prompt(params));
    // pg_stat_activity read outside a transaction, which would keep its first snapshot
    const inserting = await until(
      async () =>
        (
          await watcher.query<{ pid: number }>(
            "SELECT pid FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid)) AND query LIKE '%INSERT INTO forwarded_calls%'",
            [holder],
          )
        ).rows[0]?.pid,
      10_000,
      "the call's INSERT waiting on the lock",
    );
    cut(b);
    expect(await sent).toMatchObject({
      code: "outcome_unknown",
      retryable: false,
      data: { method: "session.prompt", outcome: "unknown" },
    });
    await admin.query("COMMIT");
    // the server goes on with the INSERT, then finds its client gone
    await until(
      async () =>
        (await watcher.query("SELECT 1 FROM pg_stat_activity WHERE pid = $1", [inserting])).rows.length === 0,
      10_000,
      "the INSERT's backend ended",
    );
    // recorded: its owner claims and answers it (nobody reads that reply); else nothing is there
    await until(
      async () => {
        const { rows, answered } = await forwardedRows(watcher, schema);
        return rows === answered;
      },
      20_000,
      "the forwarded call answered, or not recorded",
    );
    const first = await logged(reader, sessionId);
    expect(first.userMessages).toBeLessThanOrEqual(1);
    if (first.userMessages === 1) {
      await turnEnded(reader, sessionId, first.turns[0]!);
      await until(() => followed.length === 1, 10_000, "the owner's follower told of the prompt");
    }

    // the client, told the outcome is unknown, sends the prompt again once the path is back
    restore(b);
    const retried = await answerOf(b.client.prompt(params));
    const turnId = turnIdOf(retried);
    if (first.userMessages === 1) expect(turnId).toBe(first.turns[0]);
    await turnEnded(reader, sessionId, turnId);
    expect(await logged(reader, sessionId)).toEqual({ userMessages: 1, turns: [turnId], ended: [turnId] });
    await until(() => followed.length === 1, 10_000, "the owner's follower told of the prompt");
    expect(followed).toEqual(["hello"]);
    expect([...faults(a), ...faults(b)]).toEqual([]);
  }, 60_000);

  it("is recorded and answered ok when the receiving host's idle connections died unseen (a blip); it runs once", async () => {
    const { a, b, reader } = await startCluster();
    const sessionId = await ownedBy(a);
    // one forwarded call first, so the receiving host's pools hold connections that idle
    const first = turnIdOf(
      await answerOf(b.client.prompt({ sessionId, text: "one", clientMessageId: randomUUID() })),
    );
    await turnEnded(reader, sessionId, first);
    // the owner frees the session just after the turn's end commits: a prompt before that is queued
    await until(
      () =>
        a.running.host.live.agents().some((agent) => agent.sessionId === sessionId && agent.state === "idle"),
      10_000,
      "the owner's agent idle",
    );
    expect(await inboxConnections(b.running)).toBeGreaterThan(0);
    // every pooled connection of the receiving host ends at the server's side, unseen by it
    expect(
      b.proxy.cutAllUnnoticed((opening) => opening.includes("application_name\0sessionmux\0")),
    ).toBeGreaterThan(0);

    const answer = await answerOf(b.client.prompt({ sessionId, text: "two", clientMessageId: randomUUID() }));
    const turnId = turnIdOf(answer);
    await turnEnded(reader, sessionId, turnId);
    expect(await logged(reader, sessionId)).toEqual({
      userMessages: 2,
      turns: [first, turnId],
      ended: [first, turnId],
    });
    expect((await reader.leaseHolder(sessionId))?.hostId).toBe("host-a");
    expect([...faults(a), ...faults(b)]).toEqual([]);
  }, 60_000);

  it("is outcome_unknown when the owner's path is cut while it holds the claimed call; it never runs twice, also once the other host took the session", async () => {
    const { a, b, reader, schema, admin } = await startCluster();
    const sessionId = await ownedBy(a);
    const opening = holdTurnOpening(a);
    const params = { sessionId, text: "hello", clientMessageId: randomUUID() };
    const sent = answerOf(b.client.prompt(params));
    // claimed, and running there: its turn is about to be written
    await opening.taken;
    cut(a);
    opening.release();
    expect(await opening.failed).toMatchObject({ code: "persistence_failure" });
    // its lease runs out with no reply: the caller is not told the prompt ran
    expect(await sent).toMatchObject({
      code: "outcome_unknown",
      retryable: false,
      data: { method: "session.prompt", outcome: "unknown" },
    });
    expect(await logged(reader, sessionId)).toEqual({ userMessages: 0, turns: [], ended: [] });
    // given up: its row is gone, so no host can run it later
    expect(await forwardedRows(admin, schema)).toEqual({ rows: 0, answered: 0 });

    // sent again: the host it reaches takes the session over and runs it
    const retried = await answerOf(b.client.prompt(params));
    const turnId = turnIdOf(retried);
    expect((await reader.leaseHolder(sessionId))?.hostId).toBe("host-b");
    await turnEnded(reader, sessionId, turnId);

    // the old owner back on the database runs nothing of it
    restore(a);
    await until(
      () => a.running.host.leases?.lease(sessionId) === undefined,
      10_000,
      "host-a letting the session go",
    );
    await a.client.list({ limit: 10 });
    expect(await logged(reader, sessionId)).toEqual({ userMessages: 1, turns: [turnId], ended: [turnId] });
    expect(await forwardedRows(admin, schema)).toEqual({ rows: 0, answered: 0 });
    expect([...faults(a), ...faults(b)]).toEqual([]);
  }, 60_000);

  it("is persistence_failure, retryable, when the owner's path blips under the turn it opens for the call; the retry runs once", async () => {
    const { a, b, reader } = await startCluster();
    const sessionId = await ownedBy(a);
    // the path is back once the turn's write failed, so the owner's answer reaches the caller
    const opening = holdTurnOpening(a, () => restore(a));
    const params = { sessionId, text: "hello", clientMessageId: randomUUID() };
    const sent = answerOf(b.client.prompt(params));
    await opening.taken;
    cut(a);
    opening.release();
    expect(await sent).toMatchObject({ code: "persistence_failure", retryable: true });
    expect(await opening.failed).toMatchObject({ code: "persistence_failure" });
    expect(await logged(reader, sessionId)).toEqual({ userMessages: 0, turns: [], ended: [] });

    const turnId = turnIdOf(await answerOf(b.client.prompt(params)));
    await turnEnded(reader, sessionId, turnId);
    expect(await logged(reader, sessionId)).toEqual({ userMessages: 1, turns: [turnId], ended: [turnId] });
    expect((await reader.leaseHolder(sessionId))?.hostId).toBe("host-a");
    expect([...faults(a), ...faults(b)]).toEqual([]);
  }, 60_000);
});
