import type pg from "pg";
import type { CallInbox, ForwardedCall, ForwardOutcome, ForwardReply } from "../call-inbox.js";
import { CALL_INBOX_LIMITS, type CallInboxLimits } from "../call-inbox-limits.js";
import type { PoolStats } from "../store-metrics.js";
import { openWatchedPool, type QueryWatch, queryWatch } from "./pg-backend-watch.js";
import { PgForwardedCallOwner } from "./pg-forwarded-call-owner.js";
import { PgForwardedCallSender } from "./pg-forwarded-call-sender.js";
import { openClient, poolStatsOf } from "./pg-pool.js";
import { migrate } from "./pg-schema.js";

/** The bounds of `CallInboxLimits` (each at its default when left out), and the inbox's own settings. */
export interface PgCallInboxOptions extends Partial<CallInboxLimits> {
  /** Schema holding the store's tables. @default "public" */
  schema?: string;
  /**
   * How often rows are re-read without a notification (a LISTEN connection that blipped loses
   * them): calls addressed to this host, replies to its calls, expired rows. @default 1000
   */
  pollMs?: number;
  /** @default 3 */
  maxConnections?: number;
  /**
   * How long a call its target began is still waited for once the sender withdraws it (the
   * target lost the session): a reply written meanwhile is the answer, else `unknown`. @default 500
   */
  claimedReplyGraceMs?: number;
  /**
   * How long in all, from its sending (its first, for a call its caller routed more than once), a
   * call its target claimed is waited for while the target still holds the session (past the
   * forward wait: it may be running there, so it is not sent again); then it is given up:
   * `not_begun` when the target had not begun it (taken back, it never runs), else `unknown`.
   * At least the forward wait. @default 60000
   */
  claimedWaitMs?: number;
  /**
   * How long a close waits for the calls still waiting on a reply to be taken back (see `close`):
   * past it, each is answered `unknown`. @default 1000
   */
  closeTakeBackMs?: number;
  /** How often the LISTEN connection is asked `SELECT 1` (see `PostgresStoreOptions.listenCheckMs`). @default 5000 */
  listenCheckMs?: number;
  /**
   * How often a statement of the inbox's pool still waiting on the database is checked, on another
   * connection, for whether the server still runs it, and twice this the longest a new
   * connection's handshake may take (see `PostgresStoreOptions.queryCheckMs`). @default 5000
   */
  queryCheckMs?: number;
  /** The watch the host's other pools on this database share, in place of one every `queryCheckMs`. */
  queryWatch?: QueryWatch;
  /**
   * Why this host may no longer write (its store's `buildOutdated`): while it answers an error, a
   * call is not forwarded (refused with it) and no call addressed here is claimed (each waits for
   * the host's leases to lapse, then its sender routes it again). @default never
   */
  writesRefused?: () => Error | undefined;
}

/** See `PgCallInboxOptions.claimedReplyGraceMs`: a reply is one UPDATE after its call ran. */
const CLAIMED_REPLY_GRACE_MS = 500;
/** See `PgCallInboxOptions.closeTakeBackMs`: one statement for every call waiting, in a host's shutdown. */
const CLOSE_TAKE_BACK_MS = 1_000;
/** Rows whose sender vanished are deleted this long after they expired. */
const EXPIRED_GRACE_MS = 60_000;

/**
 * The PostgreSQL call inbox: a forwarded call is a row (`forwarded_calls`) its target claims and
 * answers in place, with a NOTIFY on one channel per schema as the wake-up (`c:<host>` for a new
 * call, `r:<callId>` for a reply). Rows are the truth: a poll re-reads them, so a call recorded
 * while a listener was away is still served, and a reply notification lost in a blip still
 * reaches its sender. Each call is answered at most once (`reply IS NULL` guards the update) and
 * its row is deleted once its sender read the reply or gave up; a sender that gave up deletes the
 * row first, so a late reply can never be mistaken for a delivered one. The sender's half
 * (`PgForwardedCallSender`) and the owner's (`PgForwardedCallOwner`) share its pool, its LISTEN
 * connection and its poll.
 */
export class PgCallInbox implements CallInbox {
  readonly #pool: pg.Pool;
  readonly #connect: () => pg.Client;
  readonly #channel: string;
  readonly #sender: PgForwardedCallSender;
  readonly #owner: PgForwardedCallOwner;
  readonly #timer: NodeJS.Timeout;
  readonly #writesRefused: () => Error | undefined;
  #client: pg.Client | undefined;
  #connecting: Promise<void> | undefined;
  #ticks = 0;
  #closed = false;

  private constructor(pool: pg.Pool, connect: () => pg.Client, schema: string, options: PgCallInboxOptions) {
    this.#pool = pool;
    this.#connect = connect;
    this.#channel = `sessionmux_calls_${schema}`.slice(0, 63);
    this.#sender = new PgForwardedCallSender(pool, this.#channel, {
      maxPending: options.maxPending ?? CALL_INBOX_LIMITS.maxPending,
      maxPendingPerPrincipal: options.maxPendingPerPrincipal ?? CALL_INBOX_LIMITS.maxPendingPerPrincipal,
      maxPendingBytes: options.maxPendingBytes ?? CALL_INBOX_LIMITS.maxPendingBytes,
      maxReplyBytes: options.maxReplyBytes ?? CALL_INBOX_LIMITS.maxReplyBytes,
      claimedReplyGraceMs: options.claimedReplyGraceMs ?? CLAIMED_REPLY_GRACE_MS,
      claimedWaitMs: options.claimedWaitMs ?? CALL_INBOX_LIMITS.claimedWaitMs,
      closeTakeBackMs: options.closeTakeBackMs ?? CLOSE_TAKE_BACK_MS,
    });
    this.#writesRefused = options.writesRefused ?? (() => undefined);
    this.#owner = new PgForwardedCallOwner(
      pool,
      this.#channel,
      {
        maxServing: options.maxServing ?? CALL_INBOX_LIMITS.maxServing,
        maxServingBytes: options.maxServingBytes ?? CALL_INBOX_LIMITS.maxServingBytes,
      },
      () => this.#writesRefused() === undefined,
    );
    this.#timer = setInterval(() => this.#poll(), options.pollMs ?? 1000);
    this.#timer.unref();
  }

  static async open(url: string, options: PgCallInboxOptions = {}): Promise<PgCallInbox> {
    const schema = options.schema ?? "public";
    // a statement (a forwarded call's INSERT, its reply's read) over a path that went silent fails
    // as on a closed connection instead of waiting for TCP, as the store's reads do
    const pool = openWatchedPool(
      url,
      { schema, max: options.maxConnections ?? 3 },
      options.queryWatch ?? queryWatch(url, options.queryCheckMs),
    );
    // an idle connection that drops must not crash the process: the next query reconnects
    pool.on("error", () => undefined);
    try {
      const client = await pool.connect();
      try {
        await migrate(client, schema);
      } finally {
        client.release();
      }
    } catch (err) {
      await pool.end().catch(() => undefined);
      throw err;
    }
    const inbox = new PgCallInbox(
      pool,
      () =>
        openClient(url, "sessionmux-calls", {
          schema,
          listenCheckMs: options.listenCheckMs,
        }),
      schema,
      options,
    );
    try {
      await inbox.#startListening();
    } catch (err) {
      // nothing may outlive a failed open: its poll would reconnect and keep the pool in use
      await inbox.close();
      throw err;
    }
    return inbox;
  }

  /** The inbox's connections now (its pool of `maxConnections`; the LISTEN connection is apart). */
  poolStats(): PoolStats {
    return poolStatsOf(this.#pool);
  }

  send(
    targetHost: string,
    call: ForwardedCall,
    timeoutMs: number,
    withdraw?: AbortSignal,
    waitingSince?: number,
  ): Promise<ForwardOutcome> {
    const refused = this.#writesRefused();
    if (refused) return Promise.reject(refused);
    return this.#sender.send(targetHost, call, timeoutMs, withdraw, waitingSince);
  }

  serve(hostId: string, handler: (call: ForwardedCall) => Promise<ForwardReply>): () => void {
    return this.#owner.serve(hostId, handler);
  }

  leaseLost(hostId: string, sessionId: string): void {
    if (!this.#closed) this.#owner.leaseLost(hostId, sessionId);
  }

  /**
   * Stops serving and listening. A call still waiting for a connection to be recorded resolves
   * `timeout` at once (never recorded). Every call waiting on a reply is told what became of it,
   * by one statement: those their targets have not begun, claimed or not, are taken back (their
   * rows deleted, so they never run) and resolve `timeout`; those their targets answered resolve
   * with the reply (up to `maxReplyBytes` of them, read then); a begun one not yet answered, one
   * whose reply did not fit, and every one when that statement fails or takes longer than
   * `closeTakeBackMs`, may run there (or ran): `unknown`.
   */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.#sender.stopRecording();
    clearInterval(this.#timer);
    const served = this.#owner.close();
    const settled = this.#sender.close();
    await Promise.all([settled, served]);
    const client = this.#client;
    this.#client = undefined;
    await client?.end().catch(() => undefined);
    await this.#pool.end().catch(() => undefined);
  }

  async #listen(): Promise<void> {
    const client = this.#connect();
    client.on("notification", (message) => {
      if (message.channel === this.#channel && message.payload) this.#heard(message.payload);
    });
    const lost = () => {
      if (this.#client !== client) return;
      this.#client = undefined;
      client.end().catch(() => undefined);
    };
    client.on("error", lost);
    client.on("end", lost);
    await client.connect();
    await client.query(`LISTEN "${this.#channel}"`);
    if (this.#closed) {
      await client.end().catch(() => undefined);
      return;
    }
    this.#client = client;
  }

  #heard(payload: string): void {
    const id = payload.slice(2);
    if (payload.startsWith("c:")) this.#owner.called(id);
    else if (payload.startsWith("r:")) this.#sender.replied(id);
  }

  /**
   * Makes the LISTEN connection; while it is under way (the first one of `open` too) a poll
   * starts no second one, which nothing would end. Rejects as `#listen` does.
   */
  #startListening(): Promise<void> {
    const listening = this.#listen();
    this.#connecting = listening
      .catch(() => undefined)
      .finally(() => {
        this.#connecting = undefined;
      });
    return listening;
  }

  /** The safety net behind notifications: reconnect, serve, look for replies, delete expired rows. */
  #poll(): void {
    if (this.#closed) return;
    if (!this.#client && !this.#connecting) this.#startListening().catch(() => undefined);
    this.#owner.pollServed();
    this.#sender.pollReplies();
    if (++this.#ticks % 10 === 0) {
      this.#pool
        .query(
          "DELETE FROM forwarded_calls WHERE expires_at < clock_timestamp() - $1 * interval '1 millisecond'",
          [EXPIRED_GRACE_MS],
        )
        .catch(() => undefined);
    }
  }
}
