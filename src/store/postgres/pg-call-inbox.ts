import { setTimeout as sleep } from "node:timers/promises";
import { decode, encode } from "@msgpack/msgpack";
import type pg from "pg";
import { SessionmuxError } from "../../../protocol/index.js";
import type { CallInbox, ForwardedCall, ForwardOutcome, ForwardReply } from "../call-inbox.js";
import { CALL_INBOX_LIMITS, type CallInboxLimits } from "../call-inbox-limits.js";
import type { PoolStats } from "../store-metrics.js";
import { openWatchedPool, type QueryWatch, queryWatch } from "./pg-backend-watch.js";
import { isPgStorageFailure, pgPersistenceFailure } from "./pg-errors.js";
import { idempotentQuery, runOn } from "./pg-idle-lost.js";
import { openClient, poolStatsOf } from "./pg-pool.js";
import { readQuery } from "./pg-read-query.js";
import { migrate } from "./pg-schema.js";
import { WaitingConnects } from "./pg-waiting-connects.js";

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
   * How long a call its target claimed is still waited for once the sender withdraws it (the
   * target lost the session): a reply written meanwhile is the answer, else `unknown`. @default 500
   */
  claimedReplyGraceMs?: number;
  /**
   * How long in all, from its sending, a call its target claimed is waited for while the target
   * still holds the session (past the forward wait: it may be running there, so it is neither taken
   * back nor sent again); then it is given up, `unknown`. At least the forward wait. @default 60000
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
}

/** Calls claimed per read; a drain reads again until fewer come back. */
const CLAIM_BATCH = 64;
/** See `PgCallInboxOptions.claimedReplyGraceMs`: a reply is one UPDATE after its call ran. */
const CLAIMED_REPLY_GRACE_MS = 500;
/** Writes of a reply, the first included, while the database fails them (see `#answer`). */
const REPLY_ATTEMPTS = 4;
/** The pause before a reply's next write, times the writes made: 0.1 s, 0.2 s, 0.3 s. */
const REPLY_RETRY_MS = 100;
/** See `PgCallInboxOptions.closeTakeBackMs`: one statement for every call waiting, in a host's shutdown. */
const CLOSE_TAKE_BACK_MS = 1_000;
/** Rows whose sender vanished are deleted this long after they expired. */
const EXPIRED_GRACE_MS = 60_000;

interface Waiter {
  /** Wakes the sender to look for its reply (a notification or a poll saw one). */
  wake: () => void;
}

interface ClaimedRow {
  call_id: string;
  from_host: string;
  session_id: string;
  body: Buffer;
  /** Milliseconds until the call expires, by the database's clock: its sender gives up then. */
  left_ms: number;
}

/**
 * The PostgreSQL call inbox: a forwarded call is a row (`forwarded_calls`) its target claims and
 * answers in place, with a NOTIFY on one channel per schema as the wake-up (`c:<host>` for a new
 * call, `r:<callId>` for a reply). Rows are the truth: a poll re-reads them, so a call recorded
 * while a listener was away is still served, and a reply notification lost in a blip still
 * reaches its sender. Each call is answered at most once (`reply IS NULL` guards the update) and
 * its row is deleted once its sender read the reply or gave up; a sender that gave up deletes the
 * row first, so a late reply can never be mistaken for a delivered one.
 */
export class PgCallInbox implements CallInbox {
  readonly #pool: pg.Pool;
  readonly #connect: () => pg.Client;
  readonly #channel: string;
  readonly #maxPending: number;
  readonly #maxPendingPerPrincipal: number;
  readonly #maxPendingBytes: number;
  readonly #maxReplyBytes: number;
  readonly #maxServing: number;
  readonly #maxServingBytes: number;
  readonly #claimedReplyGraceMs: number;
  readonly #claimedWaitMs: number;
  readonly #closeTakeBackMs: number;
  /** Calls claimed and not yet settled (answered, released or dropped as expired). */
  #serving = 0;
  /** Bytes those calls hold (bodies, and replies not yet written); a claim under way reserves its room here. */
  #servingBytes = 0;
  /**
   * Hosts whose drain stopped at `maxServing` or `maxServingBytes` with calls possibly left:
   * drained again as calls settle or a claim gives back the room it did not use.
   */
  readonly #starved = new Set<string>();
  readonly #waiters = new Map<string, Waiter>();
  /**
   * Sends waiting for a connection to record their call: refused as the inbox closes, which
   * waits for the calls it runs (and their replies' statements) before its pool ends.
   */
  readonly #recording = new WaitingConnects();
  /** Calls waiting on a reply, by principal name. */
  readonly #pendingBy = new Map<string, number>();
  /** Bytes of the bodies of the calls waiting on a reply. */
  #pendingBytes = 0;
  /** Bytes of replies read and not yet handed over. */
  #replyBytes = 0;
  /** Reads of replies waiting for room, oldest first. */
  readonly #replyQueue: { size: number; grant: () => void }[] = [];
  readonly #served = new Map<string, (call: ForwardedCall) => Promise<ForwardReply>>();
  readonly #draining = new Map<string, Promise<void>>();
  readonly #redrain = new Set<string>();
  /** Calls of one session run one after another, in the order they were recorded. */
  readonly #chains = new Map<string, Promise<void>>();
  /**
   * Calls claimed while serving that wait for their turn, by call: the host and session they were
   * claimed for, and once that host stopped serving or lost the session's lease, the statement
   * answering them `not_owner` (see `#refuseWaiting`): the calls it answered.
   */
  readonly #waitingTurn = new Map<
    string,
    { hostId: string; sessionId: string; refused?: Promise<ReadonlySet<string>> }
  >();
  readonly #timer: NodeJS.Timeout;
  #client: pg.Client | undefined;
  #connecting: Promise<void> | undefined;
  #ticks = 0;
  #closed = false;
  /**
   * Set as the inbox closes: what its one statement then found of the calls waiting (see
   * `#takeBackAll`), or nothing when that statement failed or outlasted its bound.
   */
  #settledAtClose: Promise<SettledAtClose> | undefined;

  private constructor(pool: pg.Pool, connect: () => pg.Client, schema: string, options: PgCallInboxOptions) {
    this.#pool = pool;
    this.#connect = connect;
    this.#channel = `sessionmux_calls_${schema}`.slice(0, 63);
    this.#maxPending = options.maxPending ?? CALL_INBOX_LIMITS.maxPending;
    this.#maxPendingPerPrincipal = options.maxPendingPerPrincipal ?? CALL_INBOX_LIMITS.maxPendingPerPrincipal;
    this.#maxPendingBytes = options.maxPendingBytes ?? CALL_INBOX_LIMITS.maxPendingBytes;
    this.#maxReplyBytes = options.maxReplyBytes ?? CALL_INBOX_LIMITS.maxReplyBytes;
    this.#maxServing = options.maxServing ?? CALL_INBOX_LIMITS.maxServing;
    this.#maxServingBytes = options.maxServingBytes ?? CALL_INBOX_LIMITS.maxServingBytes;
    this.#claimedReplyGraceMs = options.claimedReplyGraceMs ?? CLAIMED_REPLY_GRACE_MS;
    this.#claimedWaitMs = options.claimedWaitMs ?? CALL_INBOX_LIMITS.claimedWaitMs;
    this.#closeTakeBackMs = options.closeTakeBackMs ?? CLOSE_TAKE_BACK_MS;
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

  async send(
    targetHost: string,
    call: ForwardedCall,
    timeoutMs: number,
    withdraw?: AbortSignal,
  ): Promise<ForwardOutcome> {
    if (this.#closed) throw shuttingDown();
    const principal = call.principal.name;
    const mine = this.#pendingBy.get(principal) ?? 0;
    // the principal's own share first: a principal past it is told so, whatever the others do
    if (mine >= this.#maxPendingPerPrincipal) {
      throw new SessionmuxError(
        "overloaded",
        `this host already waits on ${this.#maxPendingPerPrincipal} calls of this principal forwarded to other hosts; retry shortly`,
        { data: { limit: "pending_calls_per_principal", max: this.#maxPendingPerPrincipal } },
      );
    }
    if (this.#waiters.size >= this.#maxPending) {
      throw new SessionmuxError(
        "overloaded",
        `this host already waits on ${this.#maxPending} calls forwarded to other hosts; retry shortly`,
        { data: { limit: "pending_calls", max: this.#maxPending } },
      );
    }
    const body = encode(
      { principal: call.principal, method: call.method, params: call.params },
      { ignoreUndefined: true },
    );
    const size = body.byteLength;
    // a call larger than the bound goes alone, so none is refused however long it retries
    if (this.#pendingBytes > 0 && this.#pendingBytes + size > this.#maxPendingBytes) {
      throw new SessionmuxError(
        "overloaded",
        `the calls this host forwarded to other hosts and waits on already hold ${this.#pendingBytes} of their ${this.#maxPendingBytes} bytes; retry shortly`,
        { data: { limit: "pending_call_bytes", max: this.#maxPendingBytes } },
      );
    }
    let wake!: () => void;
    let woken = new Promise<void>((resolve) => {
      wake = resolve;
    });
    this.#waiters.set(call.callId, { wake: () => wake() });
    this.#pendingBy.set(principal, mine + 1);
    this.#pendingBytes += size;
    // asked once: a claimed call stays claimed
    let withdrawing = withdraw?.aborted ?? false;
    const onWithdraw = () => {
      withdrawing = true;
      wake();
    };
    withdraw?.addEventListener("abort", onWithdraw, { once: true });
    if (withdrawing) wake();
    try {
      // the inbox closed while it waited for a connection: never recorded, so it never runs
      if (!(await this.#record(targetHost, call, body, timeoutMs))) return { status: "timeout" };
      // recorded: its target may claim and run it whatever happens here, so a read that fails from
      // now on leaves the outcome unknown, and the call is not sent again
      try {
        const sent = Date.now();
        // "waiting": not known to be claimed; "claimed": claimed while its target held the session,
        // waited on to `claimedWaitMs`; "withdrawn": its target let the session go, the reply waited
        // on for the grace
        let phase: "waiting" | "claimed" | "withdrawn" = "waiting";
        let until = sent + timeoutMs;
        for (;;) {
          const left = until - Date.now();
          const timedOut = left <= 0 || (await wakeOrTimeout(woken, left)) === "timeout";
          if (this.#closed) return await this.#outcomeAtClose(call.callId);
          woken = new Promise<void>((resolve) => {
            wake = resolve;
          });
          if (timedOut && phase === "waiting") {
            // never claimed: taken back, so the caller may resolve the owner again
            if (await this.#takeBackUnclaimed(call.callId)) return { status: "timeout" };
            // claimed by a target still holding the session (its lease's end withdraws the call): it
            // may be running there, so it is waited on rather than sent again, where it would run
            // twice; the row's expiry follows, so the target still runs it if its turn comes later
            const last = sent + Math.max(timeoutMs, this.#claimedWaitMs);
            // sets the expiry from its own values, so a second run (its connection died while
            // idle, see `idempotentQuery`) answers as the first
            const kept = await idempotentQuery(
              this.#pool,
              `UPDATE forwarded_calls SET expires_at = clock_timestamp() + $2 * interval '1 millisecond'
               WHERE call_id = $1 AND claimed_at IS NOT NULL AND reply IS NULL RETURNING call_id`,
              [call.callId, Math.max(0, last - Date.now())],
            );
            if (kept.rows.length > 0) {
              phase = "claimed";
              until = last;
            }
          } else if (timedOut) {
            // giving up deletes the row, so the target can no longer answer it; a reply already
            // written is read and delivered instead (the call ran: sent again, it would run twice)
            const gaveUp = await this.#pool.query<{ claimed: boolean }>(
              "DELETE FROM forwarded_calls WHERE call_id = $1 AND reply IS NULL RETURNING claimed_at IS NOT NULL AS claimed",
              [call.callId],
            );
            const row = gaveUp.rows[0];
            // one its target put back unclaimed (it stopped serving as it took it) never ran there
            if (row)
              return { status: row.claimed ? "unknown" : phase === "withdrawn" ? "withdrawn" : "timeout" };
            // answered meanwhile; else gone, which an expiry long past does (it may have run), or
            // the take-back of a close
            return (await this.#takeReply(call.callId)) ?? (await this.#gone(call.callId));
          } else if (withdrawing && phase !== "withdrawn") {
            withdrawing = false;
            // only while its target has not claimed it: a claimed call may be running there
            if (await this.#takeBackUnclaimed(call.callId)) return { status: "withdrawn" };
            // claimed by a target that no longer holds the session: dead, paused past its lease, or
            // letting the session go as it answers; a reply not written within the grace is not
            // waited for to the end of the forward wait, which would tell the caller no more
            phase = "withdrawn";
            until = Math.min(until, Date.now() + this.#claimedReplyGraceMs);
          }
          const reply = await this.#takeReply(call.callId);
          if (reply) return reply;
          // at the forward wait, neither taken back nor kept: answered (read above), put back
          // unclaimed as it was looked at (taken back at the next look), or gone, as above
          if (timedOut && phase === "waiting" && !(await this.#recorded(call.callId))) {
            return await this.#gone(call.callId);
          }
        }
      } catch (err) {
        // the inbox closed between two of its statements (its pool ended): answered as a call
        // waiting when it closes is
        if (this.#closed) return await this.#outcomeAtClose(call.callId);
        throw isPgStorageFailure(err) ? forwardUnknown(call, err) : err;
      }
    } finally {
      withdraw?.removeEventListener("abort", onWithdraw);
      this.#waiters.delete(call.callId);
      this.#pendingBytes -= size;
      const left = (this.#pendingBy.get(principal) ?? 1) - 1;
      if (left > 0) this.#pendingBy.set(principal, left);
      else this.#pendingBy.delete(principal);
    }
  }

  /**
   * A recorded call's outcome once its inbox closed (see `close`): `timeout` when the close took it
   * back unrun, its target's reply when the close read one, else `unknown`, since its target may
   * claim and run it, or already did.
   */
  async #outcomeAtClose(callId: string): Promise<ForwardOutcome> {
    const settled = await this.#settledAtClose;
    if (settled?.takenBack.has(callId)) return { status: "timeout" };
    const reply = settled?.replies.get(callId);
    // handed over once: the map holds it no longer than its caller waits for it
    settled?.replies.delete(callId);
    return reply ? (decode(plain(reply)) as ForwardReply) : { status: "unknown" };
  }

  /**
   * A recorded call whose row went, not by its sender's hand: only an expiry long past deletes it
   * (it may have run), or the take-back of a close.
   */
  #gone(callId: string): Promise<ForwardOutcome> {
    return this.#closed ? this.#outcomeAtClose(callId) : Promise.resolve({ status: "unknown" });
  }

  /** Deletes the call if its target has not claimed (nor answered) it: true when it was taken back unrun. */
  async #takeBackUnclaimed(callId: string): Promise<boolean> {
    const taken = await this.#pool.query(
      "DELETE FROM forwarded_calls WHERE call_id = $1 AND claimed_at IS NULL AND reply IS NULL RETURNING call_id",
      [callId],
    );
    return taken.rows.length > 0;
  }

  async #recorded(callId: string): Promise<boolean> {
    const found = await readQuery(this.#pool, "SELECT 1 FROM forwarded_calls WHERE call_id = $1", [callId]);
    return found.rows.length > 0;
  }

  /**
   * Writes the call's row, and wakes its target. Rejects `persistence_failure` (retryable) when the
   * row was certainly not written: no connection could be had, the connection was lost before the
   * statement went out, or the server refused it (its ERROR ends the statement's transaction);
   * `outcome_unknown` when the connection was lost once the statement was sent, or ended by the
   * server (a FATAL, which may come after the commit): the row may be there, and its target run it.
   * A connection that had died while idle in the pool is no such loss: the statement goes again on
   * the next one, which records the call once. False when the inbox closed before a connection
   * could be had: nothing was sent.
   */
  async #record(
    targetHost: string,
    call: ForwardedCall,
    body: Uint8Array,
    timeoutMs: number,
  ): Promise<boolean> {
    // The row's key is the call's id, made for this call (a UUID): a row already there under it
    // is this call's, recorded by a try whose connection died before its answer came back. So the
    // INSERT is sent again where its connection died while idle (a blip, see `runOn`), and a second
    // one that finds the row writes nothing and wakes no one: the first's NOTIFY went with its
    // commit. The row cannot have gone meanwhile: only this sender deletes it, after this returns,
    // or the expiry, `EXPIRED_GRACE_MS` past its wait.
    let connects = 0;
    let sent = false;
    try {
      await runOn(
        this.#pool,
        (client) => {
          sent = true;
          return client.query(
            `WITH recorded AS (
               INSERT INTO forwarded_calls (call_id, target_host, from_host, session_id, body, expires_at)
               VALUES ($1, $2, $3, $4, $5, clock_timestamp() + $6 * interval '1 millisecond')
               ON CONFLICT (call_id) DO NOTHING
               RETURNING target_host)
             SELECT pg_notify($7, 'c:' || target_host) FROM recorded`,
            [call.callId, targetHost, call.fromHost, call.sessionId, body, timeoutMs, this.#channel],
          );
        },
        {
          connect: () => {
            connects += 1;
            return this.#recording.connectTo(this.#pool);
          },
          // a connection that answered with an ERROR is still sound; any other is dropped
          release: (client, err) =>
            client.release(refused(err) ? undefined : err instanceof Error ? err : true),
        },
      );
      return true;
    } catch (err) {
      // whatever fails after a try whose connection died under it may leave that try's row there
      if (connects > 1) throw forwardUnknown(call, err);
      // no connection could be had: nothing was sent
      if (!sent) {
        if (this.#closed) return false;
        throw isPgStorageFailure(err) ? pgPersistenceFailure(err, NOT_SENT) : err;
      }
      if (!isPgStorageFailure(err)) throw err;
      throw refused(err) || notQueryable(err)
        ? pgPersistenceFailure(err, NOT_SENT)
        : forwardUnknown(call, err);
    }
  }

  /**
   * Reads, deletes and decodes the reply to `callId`, once the replies being read leave room for
   * it (`maxReplyBytes`; alone when it is larger). Undefined when there is none yet.
   */
  async #takeReply(callId: string): Promise<ForwardOutcome | undefined> {
    // a read, so tried again on another connection where the pool's idle one was lost (a blip):
    // failed, the caller would be told `outcome_unknown` for a call its target answered
    const sized = await readQuery<{ size: number }>(
      this.#pool,
      "SELECT octet_length(reply) AS size FROM forwarded_calls WHERE call_id = $1 AND reply IS NOT NULL",
      [callId],
    );
    const size = sized.rows[0]?.size;
    if (size === undefined) return undefined;
    await this.#replyRoom(size);
    try {
      // a close read the reply itself, in its one statement (their room is not waited for)
      if (this.#closed) return await this.#outcomeAtClose(callId);
      const taken = await this.#pool.query<{ reply: Buffer }>(
        "DELETE FROM forwarded_calls WHERE call_id = $1 AND reply IS NOT NULL RETURNING reply",
        [callId],
      );
      const reply = taken.rows[0]?.reply;
      return reply ? (decode(plain(reply)) as ForwardReply) : undefined;
    } finally {
      this.#replyBytes -= size;
      this.#grantReplies();
    }
  }

  /** Resolves once `size` bytes of reply may be read: in turn, and alone when nothing else fits. */
  #replyRoom(size: number): Promise<void> {
    return new Promise<void>((grant) => {
      this.#replyQueue.push({ size, grant });
      this.#grantReplies();
    });
  }

  #grantReplies(): void {
    for (;;) {
      const next = this.#replyQueue[0];
      if (!next) return;
      const fits = this.#replyBytes === 0 || this.#replyBytes + next.size <= this.#maxReplyBytes;
      // a closing inbox lets every read go: each sees it closed and reads nothing
      if (!fits && !this.#closed) return;
      this.#replyQueue.shift();
      this.#replyBytes += next.size;
      next.grant();
    }
  }

  serve(hostId: string, handler: (call: ForwardedCall) => Promise<ForwardReply>): () => void {
    this.#served.set(hostId, handler);
    this.#drain(hostId);
    return () => {
      if (this.#served.get(hostId) !== handler) return;
      this.#served.delete(hostId);
      this.#refuseWaiting(hostId);
    };
  }

  leaseLost(hostId: string, sessionId: string): void {
    if (!this.#closed) this.#refuseWaiting(hostId, sessionId);
  }

  /**
   * Answers `not_owner` at once, in one statement, the calls claimed for `hostId` (every host
   * when undefined), of `sessionId` if given, that wait for their turn behind an earlier call of
   * their session: serving stopped or the session's lease was lost, so they will not run here,
   * and their senders resolve the owner again now rather than when the earlier call ends. Waited
   * for longer, a sender whose owner no longer holds the session would give its call up as
   * `unknown` though it never ran. Where the statement fails, each is answered at its turn as
   * before (the router checks the lease before it runs a call).
   */
  #refuseWaiting(hostId?: string, sessionId?: string): void {
    const ids: string[] = [];
    for (const [callId, waiting] of this.#waitingTurn) {
      if (waiting.refused) continue;
      if (hostId !== undefined && waiting.hostId !== hostId) continue;
      if (sessionId === undefined || waiting.sessionId === sessionId) ids.push(callId);
    }
    if (ids.length === 0) return;
    const refused = this.#pool
      .query<{ call_id: string }>(
        `WITH answered AS (
           UPDATE forwarded_calls SET reply = $2 WHERE call_id = ANY($1) AND reply IS NULL RETURNING call_id)
         SELECT call_id, pg_notify($3, 'r:' || call_id) FROM answered`,
        [ids, encode({ status: "not_owner" } satisfies ForwardReply), this.#channel],
      )
      .then(
        (answered) => new Set(answered.rows.map((row) => row.call_id)),
        () => new Set<string>(),
      );
    for (const callId of ids) {
      const waiting = this.#waitingTurn.get(callId);
      if (waiting) waiting.refused = refused;
    }
  }

  /**
   * Stops serving and listening. A call still waiting for a connection to be recorded resolves
   * `timeout` at once (never recorded). Every call waiting on a reply is told what became of it,
   * by one statement: those their targets have not claimed are taken back (their rows deleted,
   * so they never run) and resolve `timeout`; those their targets answered resolve with the reply
   * (up to `maxReplyBytes` of them, read then); a claimed one not yet answered, one whose reply
   * did not fit, and every one when that statement fails or takes longer than `closeTakeBackMs`,
   * may run there (or ran): `unknown`.
   */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.#recording.refuse(shuttingDown);
    clearInterval(this.#timer);
    this.#served.clear();
    this.#refuseWaiting();
    // set before any sender wakes: each looks for its call among those taken back
    this.#settledAtClose = this.#takeBackAll([...this.#waiters.keys()]);
    for (const waiter of this.#waiters.values()) waiter.wake();
    this.#grantReplies();
    await Promise.all([this.#settledAtClose, ...this.#draining.values(), ...this.#chains.values()]);
    const client = this.#client;
    this.#client = undefined;
    await client?.end().catch(() => undefined);
    await this.#pool.end().catch(() => undefined);
  }

  /**
   * Takes back the calls of `callIds` their targets have not claimed (nor answered), as
   * `#takeBackUnclaimed` does one, and reads and deletes the replies of those answered, smallest
   * first while they fit in `maxReplyBytes` (the first whatever its size), as `#takeReply` does
   * one: the ones it deleted, and those replies. A row a target's claim holds makes the delete
   * wait for that claim, and then find it claimed; a reply being written then is not read (its
   * call was not answered when the statement began). Nothing when it fails, or past
   * `closeTakeBackMs` (a shutdown waits no longer): its connect, if still waiting for a free
   * connection, is taken out of the pool's queue then, and a statement already sent may still
   * delete calls, which never run, and replies, answered `unknown` all the same. Ids never
   * recorded (waiting for a connection) match nothing.
   */
  async #takeBackAll(callIds: string[]): Promise<SettledAtClose> {
    const none: SettledAtClose = { takenBack: new Set(), replies: new Map() };
    if (callIds.length === 0) return none;
    const connects = new WaitingConnects();
    const taking = (async (): Promise<SettledAtClose> => {
      const client = await connects.connectTo(this.#pool);
      try {
        const found = await client.query<{ call_id: string; reply: Buffer | null }>(
          `WITH taken AS (
             DELETE FROM forwarded_calls WHERE call_id = ANY($1) AND claimed_at IS NULL AND reply IS NULL
             RETURNING call_id),
           answered AS (
             SELECT call_id, octet_length(reply) AS size FROM forwarded_calls
             WHERE call_id = ANY($1) AND reply IS NOT NULL FOR UPDATE),
           chosen AS (
             SELECT call_id FROM (
               SELECT call_id, sum(size) OVER w AS upto, row_number() OVER w AS n FROM answered
               WINDOW w AS (ORDER BY size, call_id)) sized
             WHERE upto <= $2 OR n = 1),
           read AS (
             DELETE FROM forwarded_calls WHERE call_id IN (SELECT call_id FROM chosen) RETURNING call_id, reply)
           SELECT call_id, NULL::bytea AS reply FROM taken UNION ALL SELECT call_id, reply FROM read`,
          [callIds, this.#maxReplyBytes],
        );
        client.release();
        const takenBack = new Set<string>();
        const replies = new Map<string, Buffer>();
        for (const row of found.rows) {
          if (row.reply) replies.set(row.call_id, row.reply);
          else takenBack.add(row.call_id);
        }
        return { takenBack, replies };
      } catch (err) {
        // a connection that answered with an ERROR is still sound; any other is dropped
        client.release(refused(err) ? undefined : err instanceof Error ? err : true);
        throw err;
      }
    })().catch(() => none);
    let timer: NodeJS.Timeout | undefined;
    const bound = new Promise<SettledAtClose>((resolve) => {
      timer = setTimeout(() => {
        connects.refuse(shuttingDown);
        resolve(none);
      }, this.#closeTakeBackMs);
    });
    try {
      return await Promise.race([taking, bound]);
    } finally {
      clearTimeout(timer);
    }
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
    if (payload.startsWith("c:") && this.#served.has(id)) this.#drain(id);
    else if (payload.startsWith("r:")) this.#waiters.get(id)?.wake();
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
    for (const hostId of this.#served.keys()) this.#drain(hostId);
    if (this.#waiters.size > 0) {
      this.#pool
        .query<{ call_id: string }>(
          "SELECT call_id FROM forwarded_calls WHERE call_id = ANY($1) AND reply IS NOT NULL",
          [[...this.#waiters.keys()]],
        )
        .then((found) => {
          for (const row of found.rows) this.#waiters.get(row.call_id)?.wake();
        })
        .catch(() => undefined);
    }
    if (++this.#ticks % 10 === 0) {
      this.#pool
        .query(
          "DELETE FROM forwarded_calls WHERE expires_at < clock_timestamp() - $1 * interval '1 millisecond'",
          [EXPIRED_GRACE_MS],
        )
        .catch(() => undefined);
    }
  }

  /** Claims and runs the calls addressed to `hostId`, oldest first; one drain per host at a time. */
  #drain(hostId: string): void {
    if (this.#draining.has(hostId)) {
      this.#redrain.add(hostId);
      return;
    }
    // a host that stopped serving (or closed) claims no more: a drain under way ends before its
    // next claim
    const serving = () => !this.#closed && this.#served.has(hostId);
    const run = async () => {
      do {
        this.#redrain.delete(hostId);
        for (;;) {
          if (!serving()) return;
          const room = Math.min(CLAIM_BATCH, this.#maxServing - this.#serving);
          const bytes = Math.max(0, this.#maxServingBytes - this.#servingBytes);
          // a call larger than the byte bound is claimed alone, once nothing else is held
          const alone = this.#serving === 0 && this.#servingBytes === 0;
          if (room <= 0 || (bytes === 0 && !alone)) {
            // the calls it holds settle first; each settling one drains again
            this.#starved.add(hostId);
            return;
          }
          // the room is taken before the claim, so a drain of another host served here meanwhile
          // cannot claim it too
          this.#serving += room;
          this.#servingBytes += bytes;
          let claim: { rows: ClaimedRow[]; found: number };
          try {
            claim = await this.#claim(hostId, room, bytes, alone);
          } finally {
            this.#serving -= room;
            this.#servingBytes -= bytes;
          }
          const { rows, found } = claim;
          this.#serving += rows.length;
          for (const row of rows) this.#servingBytes += row.body.length;
          // false for a claim that was under way as serving stopped: those calls are not this host's
          const taken = serving();
          for (const row of rows) this.#run(hostId, row, taken, row.body.length);
          // the room this claim reserved and did not use may be another host's
          this.#feedStarved();
          if (rows.length === room) continue;
          if (found === rows.length) break;
          // the next call did not fit in the bytes left: it waits for what is held to settle (or
          // for the room another drain reserved), unless that all went meanwhile
          if (this.#serving === 0 && this.#servingBytes === 0) continue;
          this.#starved.add(hostId);
          return;
        }
      } while (this.#redrain.has(hostId));
    };
    const drained = run()
      .catch(() => undefined)
      .finally(() => {
        this.#draining.delete(hostId);
        // asked again after its last look (room freed as it stopped for want of it): look again
        if (this.#redrain.has(hostId)) this.#drain(hostId);
      });
    this.#draining.set(hostId, drained);
  }

  /** Drains again the hosts that stopped for want of room, now that some may have freed. */
  #feedStarved(): void {
    for (const hostId of [...this.#starved]) {
      this.#starved.delete(hostId);
      this.#drain(hostId);
    }
  }

  /**
   * Claims the oldest calls for `hostId`, up to `limit` of them and `maxBytes` of bodies (the
   * first one whatever its size when `alone`), in the order they were recorded. `found`: the
   * calls it looked at, more than it took when the next did not fit in the bytes.
   */
  async #claim(
    hostId: string,
    limit: number,
    maxBytes: number,
    alone: boolean,
  ): Promise<{ rows: ClaimedRow[]; found: number }> {
    // in the order they were recorded, sorted by the database: a JS Date keeps milliseconds, and
    // two calls of a session recorded within one ran in either order
    const claimed = await this.#pool.query<ClaimedRow & { found: number }>(
      `WITH candidates AS (
         SELECT call_id, created_at, octet_length(body) AS size FROM forwarded_calls
         WHERE target_host = $1 AND claimed_at IS NULL AND expires_at > clock_timestamp()
         ORDER BY created_at, call_id LIMIT $2 FOR UPDATE SKIP LOCKED),
       chosen AS (
         SELECT call_id FROM (
           SELECT call_id, sum(size) OVER w AS upto, row_number() OVER w AS n FROM candidates
           WINDOW w AS (ORDER BY created_at, call_id)) sized
         WHERE upto <= $3 OR (n = 1 AND $4)),
       claimed AS (
         UPDATE forwarded_calls SET claimed_at = clock_timestamp()
         WHERE call_id IN (SELECT call_id FROM chosen)
         RETURNING call_id, from_host, session_id, body, created_at, expires_at)
       SELECT (SELECT count(*) FROM candidates)::int AS found, claimed.call_id, from_host, session_id,
         body, extract(epoch FROM expires_at - clock_timestamp()) * 1000 AS left_ms
       FROM (SELECT 1) one LEFT JOIN claimed ON true ORDER BY created_at`,
      [hostId, limit, maxBytes, alone],
    );
    const found = claimed.rows[0]?.found ?? 0;
    return { rows: claimed.rows.filter((row) => row.call_id !== null), found };
  }

  /**
   * A call claimed by a claim under way as this host stopped serving goes back unclaimed, in its
   * session's order, for whoever serves the host next (told at once): a stopped host takes no calls.
   */
  async #release(callId: string): Promise<void> {
    // not sent again on a connection that died while idle: between two runs the call, unclaimed by
    // the first, may be claimed by whoever serves the host next, and the second would unclaim it
    // as it runs there
    await this.#pool.query(
      `WITH released AS (
         UPDATE forwarded_calls SET claimed_at = NULL WHERE call_id = $1 AND reply IS NULL RETURNING target_host)
       SELECT pg_notify($2, 'c:' || target_host) FROM released`,
      [callId, this.#channel],
    );
  }

  /**
   * True when the sender of a claimed call whose first expiry passed still waits on it (it moved
   * the expiry on). One expired and not yet moved on is put back unclaimed, so its sender, about
   * to look, takes it back as never claimed (it never ran) rather than wait on it.
   */
  async #stillAwaited(callId: string): Promise<boolean> {
    const found = await this.#pool.query<{ awaited: boolean }>(
      `WITH released AS (
         UPDATE forwarded_calls SET claimed_at = NULL
         WHERE call_id = $1 AND reply IS NULL AND expires_at <= clock_timestamp() RETURNING call_id)
       SELECT EXISTS (SELECT 1 FROM forwarded_calls WHERE call_id = $1 AND reply IS NULL)
         AND NOT EXISTS (SELECT 1 FROM released) AS awaited`,
      [callId],
    );
    return found.rows[0]?.awaited === true;
  }

  /**
   * Writes the reply to `callId` and wakes its sender. A statement the database did not take is
   * sent again, a few times: its first may go out on a connection that died idle in the pool (a
   * path that blipped while the call ran, its close not yet read), and a reply lost there leaves
   * its sender waiting out its longest wait on a call this host answered, then told `unknown`.
   * Sending it twice writes it once (`reply IS NULL`); one whose connection died while idle is
   * sent again at once (see `idempotentQuery`).
   */
  async #answer(callId: string, encoded: Uint8Array): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      try {
        await idempotentQuery(
          this.#pool,
          `WITH answered AS (
             UPDATE forwarded_calls SET reply = $2 WHERE call_id = $1 AND reply IS NULL RETURNING call_id)
           SELECT pg_notify($3, 'r:' || call_id) FROM answered`,
          [callId, encoded, this.#channel],
        );
        return;
      } catch (err) {
        if (this.#closed || attempt >= REPLY_ATTEMPTS || !isPgStorageFailure(err)) throw err;
        await sleep(REPLY_RETRY_MS * attempt);
        // one that closed meanwhile writes no more: its pool is ending
        if (this.#closed) throw err;
      }
    }
  }

  /** Runs a claimed call in its session's turn; `size`: the bytes it holds until it settles. */
  #run(hostId: string, row: ClaimedRow, taken: boolean, size: number): void {
    let held = size;
    const expiresAt = Date.now() + Number(row.left_ms);
    const previous = this.#chains.get(row.session_id) ?? Promise.resolve();
    if (taken) this.#waitingTurn.set(row.call_id, { hostId, sessionId: row.session_id });
    const next = previous.then(async () => {
      if (!taken) return this.#release(row.call_id);
      const refused = this.#waitingTurn.get(row.call_id)?.refused;
      this.#waitingTurn.delete(row.call_id);
      // answered not_owner as its host stopped serving or lost the session's lease
      if (refused && (await refused).has(row.call_id)) return;
      // past the expiry it was claimed with: run only if its sender still waits (it keeps waiting
      // on a claimed call while this host holds the session); one whose sender gave up while it
      // waited behind its session's earlier calls would do its work unasked
      if (Date.now() >= expiresAt && !(await this.#stillAwaited(row.call_id))) return;
      // taken while serving: a caller told at once re-resolves the owner rather than wait it out
      const handler = this.#served.get(hostId);
      // a body that does not decode is answered as the fault it is, and holds nothing after
      const reply: ForwardReply = handler
        ? await Promise.resolve()
            .then(() => handler(forwardedCall(row)))
            .catch((err: unknown) => asReply(err))
        : { status: "not_owner" };
      const encoded = encode(reply, { ignoreUndefined: true });
      // the reply is held too until it is written
      held += encoded.byteLength;
      this.#servingBytes += encoded.byteLength;
      await this.#answer(row.call_id, encoded);
    });
    const settled = next
      .catch(() => undefined)
      .finally(() => {
        this.#serving--;
        this.#servingBytes -= held;
        this.#feedStarved();
      });
    this.#chains.set(row.session_id, settled);
    void settled.then(() => {
      if (this.#chains.get(row.session_id) === settled) this.#chains.delete(row.session_id);
    });
  }
}

/** What a close's one statement found of the calls waiting on a reply (see `#takeBackAll`). */
interface SettledAtClose {
  /** Taken back unclaimed and unanswered: their rows deleted, so they never run. */
  takenBack: ReadonlySet<string>;
  /** The replies read (their rows deleted), as written, by call. */
  replies: Map<string, Buffer>;
}

function asReply(err: unknown): ForwardReply {
  if (err instanceof SessionmuxError) {
    return {
      status: "error",
      code: err.code,
      message: err.message,
      ...(err.data !== undefined ? { data: err.data } : {}),
    };
  }
  return { status: "error", code: "internal_error", message: "the owning host failed to run the call" };
}

/** Decoded bytes then come back as plain Uint8Arrays, as the wire gives them, not as Buffers. */
function plain(bytes: Buffer): Uint8Array {
  return new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

const NOT_SENT =
  "this call could not be sent to the host running this session's agent: the session store could not be reached; retry later";

/** The server answered the statement with an ERROR, which ends its transaction: it wrote nothing. */
function refused(err: unknown): boolean {
  return (err as { severity?: unknown } | null)?.severity === "ERROR";
}

/**
 * pg refused to send the statement, its connection already lost: nothing went out. A FATAL ends
 * the connection and may follow the commit; a connection lost mid-statement gives no answer at all.
 */
function notQueryable(err: unknown): boolean {
  return err instanceof Error && /not queryable/i.test(err.message);
}

/** The call's row may have been written: its target may run it, so it must not be sent again unasked. */
function forwardUnknown(call: ForwardedCall, err: unknown): SessionmuxError {
  return new SessionmuxError(
    "outcome_unknown",
    "the session store's connection failed once this call was sent to be recorded for the host running this session's agent: whether the call took effect is unknown; check the session, then send it again if it did not (a prompt sent again with its clientMessageId runs at most once)",
    { data: { method: call.method, outcome: "unknown" }, cause: err },
  );
}

function shuttingDown(): SessionmuxError {
  return new SessionmuxError("host_shutting_down", "the host is shutting down; reconnect shortly");
}

function wakeOrTimeout(woken: Promise<void>, ms: number): Promise<"woken" | "timeout"> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<"timeout">((resolve) => {
    timer = setTimeout(() => resolve("timeout"), ms);
  });
  return Promise.race([woken.then(() => "woken" as const), timeout]).finally(() => clearTimeout(timer));
}

/** The call a claimed row holds (its body as the sender encoded it). */
function forwardedCall(row: ClaimedRow): ForwardedCall {
  const body = decode(plain(row.body)) as Pick<ForwardedCall, "principal" | "method" | "params">;
  return { callId: row.call_id, fromHost: row.from_host, sessionId: row.session_id, ...body };
}
