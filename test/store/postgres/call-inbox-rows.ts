import { randomBytes, randomUUID } from "node:crypto";
import { encode } from "@msgpack/msgpack";
import pg from "pg";
import { afterEach, vi } from "vitest";
import type { ForwardedCall, ForwardOutcome, ForwardReply } from "../../../src/store/call-inbox.js";
import { PgCallInbox, type PgCallInboxOptions } from "../../../src/store/postgres/pg-call-inbox.js";
import { gate } from "../../support/gate.js";
import { dropSchema, pgUrl } from "../contract/backends.js";

/** No poll within a test: only notifications (and the drain `serve` starts) move calls. */
export const NO_POLL = 600_000;

/**
 * A handler for `serve` that records each call's params, opens `started` as one begins and
 * holds it until the test opens `release`; it answers `result`, or the call's params.
 */
export function heldHandler(result?: unknown) {
  const started = gate();
  const release = gate();
  const ran: unknown[] = [];
  const handler = async (c: ForwardedCall): Promise<ForwardReply> => {
    ran.push(c.params);
    started.open();
    await release.promise;
    return { status: "ok", result: result === undefined ? c.params : result };
  };
  return { started, release, ran, handler };
}

/**
 * Holds the next statement containing `fragment` that any inbox of this process sends, until
 * `release()`: its request before it reaches the database (`"request"`), or its answer after the
 * database ran it (`"answer"`: the first answer `when` accepts, which `reorder` may rearrange).
 * `held` resolves once one is held; `count()` counts such statements sent since. With
 * `holdLater`, every one sent after it is held for good. Undone by `vi.restoreAllMocks()`.
 */
export function holdNextQuery(
  fragment: string,
  at: "request" | "answer",
  options: {
    holdLater?: boolean;
    when?: (answer: pg.QueryResult) => boolean;
    reorder?: (answer: pg.QueryResult) => void;
  } = {},
) {
  let reached!: () => void;
  const held = new Promise<void>((resolve) => {
    reached = resolve;
  });
  let release!: () => void;
  const released = new Promise<void>((resolve) => {
    release = resolve;
  });
  const query = pg.Pool.prototype.query as (...args: unknown[]) => unknown;
  let count = 0;
  let holding = false;
  vi.spyOn(pg.Pool.prototype, "query").mockImplementation(function (this: pg.Pool, ...args: unknown[]) {
    const run = () => query.apply(this, args);
    if (typeof args[0] !== "string" || !args[0].includes(fragment)) return run();
    count++;
    if (holding) return options.holdLater ? new Promise(() => undefined) : run();
    if (at === "request") {
      holding = true;
      reached();
      return released.then(run);
    }
    return (run() as Promise<pg.QueryResult>).then(async (answer) => {
      if (holding || (options.when && !options.when(answer))) return answer;
      holding = true;
      options.reorder?.(answer);
      reached();
      await released;
      return answer;
    });
  } as typeof pg.Pool.prototype.query);
  return { held, release, count: () => count };
}

/** `holdNextQuery` for the claim of a drain. */
export const holdNextClaim = (at: "request" | "answer") =>
  holdNextQuery("SET claimed_at = clock_timestamp()", at);

/**
 * A connection of its own LISTENing on `channel`: `sendHeard` sends a call to host-b and resolves (the call's outcome still to come) once this
 * connection heard of it and 200 ms more passed, so the inboxes listening have heard of it too.
 */
export async function channelListener(url: string, channel: string) {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  await client.query(`LISTEN "${channel}"`);
  const next = () => new Promise<void>((resolve) => client.once("notification", () => resolve()));
  return {
    async sendHeard(
      from: PgCallInbox,
      forwarded: ForwardedCall,
    ): Promise<{ outcome: Promise<ForwardOutcome> }> {
      const heard = next();
      const outcome = from.send("host-b", forwarded, NO_POLL);
      await heard;
      await new Promise((resolve) => setTimeout(resolve, 200));
      return { outcome };
    },
    end: () => client.end(),
  };
}

export function call(
  sessionId: string,
  params: unknown = { sessionId },
  method = "session.cancel",
): ForwardedCall {
  return {
    callId: randomUUID(),
    fromHost: "host-a",
    sessionId,
    principal: { name: "alice", admin: false },
    method,
    params,
  };
}

/**
 * Inboxes on a fresh schema per test, and the rows beside them as an operator (or a host whose
 * notification was lost) would write them: all closed and dropped after each test.
 */
export function inboxFixture(prefix: string) {
  const url = pgUrl ?? "";
  const state = { schema: "" };
  const opened: PgCallInbox[] = [];

  afterEach(async () => {
    await Promise.all(opened.splice(0).map((i) => i.close()));
    if (state.schema) await dropSchema(url, state.schema);
    state.schema = "";
  });

  const sql = async <T extends pg.QueryResultRow>(text: string, values: unknown[] = []) => {
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    try {
      await client.query(`SET search_path = "${state.schema}"`);
      return (await client.query<T>(text, values)).rows;
    } finally {
      await client.end();
    }
  };

  return {
    url,
    get schema() {
      return state.schema;
    },
    get channel() {
      return `sessionmux_calls_${state.schema}`.slice(0, 63);
    },
    fresh(schema = `${prefix}_${randomBytes(5).toString("hex")}`) {
      state.schema = schema;
      return schema;
    },
    async open(options: PgCallInboxOptions = {}) {
      const inbox = await PgCallInbox.open(url, { schema: state.schema, ...options });
      opened.push(inbox);
      return inbox;
    },
    /** Keeps `inbox` from being closed after the test (the test closed it itself). */
    forget(inbox: PgCallInbox) {
      opened.splice(opened.indexOf(inbox), 1);
    },
    sql,
    async rowCount(): Promise<number> {
      const rows = await sql<{ n: string }>("SELECT count(*) AS n FROM forwarded_calls");
      return Number(rows[0]?.n);
    },
    /** A call row written with no notification, expiring `expiresInMs` from now (negative: expired). */
    async record(targetHost: string, forwarded: ForwardedCall, expiresInMs: number): Promise<void> {
      const body = encode({
        principal: forwarded.principal,
        method: forwarded.method,
        params: forwarded.params,
      });
      await sql(
        `INSERT INTO forwarded_calls (call_id, target_host, from_host, session_id, body, expires_at)
         VALUES ($1, $2, $3, $4, $5, clock_timestamp() + $6 * interval '1 millisecond')`,
        [
          forwarded.callId,
          targetHost,
          forwarded.fromHost,
          forwarded.sessionId,
          Buffer.from(body),
          expiresInMs,
        ],
      );
    },
    /** Writes the reply of a recorded call with no notification; false when it was not there. */
    async answer(callId: string, reply: ForwardReply): Promise<boolean> {
      const rows = await sql("UPDATE forwarded_calls SET reply = $2 WHERE call_id = $1 RETURNING call_id", [
        callId,
        Buffer.from(encode(reply)),
      ]);
      return rows.length === 1;
    },
    async callIds(): Promise<string[]> {
      return (await sql<{ call_id: string }>("SELECT call_id FROM forwarded_calls ORDER BY call_id")).map(
        (r) => r.call_id,
      );
    },
  };
}
