import type pg from "pg";
import { SessionmuxError } from "../../../protocol/index.js";
import type { ForwardedCall, ForwardOutcome } from "../call-inbox.js";
import type { CallInboxLimits } from "../call-inbox-limits.js";
import { CountsByKey } from "../counts-by-key.js";
import { isPgStorageFailure, pgPersistenceFailure } from "./pg-errors.js";
import { decodeReply, encodeCallBody } from "./pg-forwarded-call-bytes.js";
import { idempotentQuery, runOn } from "./pg-idle-lost.js";
import { readQuery } from "./pg-read-query.js";
import { WaitingConnects } from "./pg-waiting-connects.js";

/** The sender's bounds, and how long it waits on calls its targets claimed (see `PgCallInboxOptions`). */
export interface PgForwardedCallSenderOptions
  extends Pick<
    CallInboxLimits,
    "maxPending" | "maxPendingPerPrincipal" | "maxPendingBytes" | "maxReplyBytes" | "claimedWaitMs"
  > {
  claimedReplyGraceMs: number;
  closeTakeBackMs: number;
}

interface Waiter {
  /** Wakes the sender to look for its reply (a notification or a poll saw one). */
  wake: () => void;
}

/** What a close's one statement found of the calls waiting on a reply (see `#takeBackAll`). */
interface SettledAtClose {
  /** Taken back unbegun (claimed or not) and unanswered: their rows deleted, so they never run. */
  takenBack: ReadonlySet<string>;
  /** The replies read (their rows deleted), as written, by call. */
  replies: Map<string, Buffer>;
}

/**
 * The sender's half of the PostgreSQL call inbox: records a forwarded call as a row of
 * `forwarded_calls` for its target (with a NOTIFY `c:<host>` on the inbox's channel), waits on its
 * reply (woken by `r:<callId>` or a poll), reads it and deletes the row. A sender that gives up
 * deletes the row first, so a late reply can never be mistaken for a delivered one; one its
 * target has not claimed is taken back unrun, and so is one it claimed and has not begun (its
 * row's `started`) once the target no longer holds the session, at the longest wait on a claimed
 * call, or as the inbox closes.
 */
export class PgForwardedCallSender {
  readonly #pool: pg.Pool;
  readonly #channel: string;
  readonly #maxPending: number;
  readonly #maxPendingPerPrincipal: number;
  readonly #maxPendingBytes: number;
  readonly #maxReplyBytes: number;
  readonly #claimedReplyGraceMs: number;
  readonly #claimedWaitMs: number;
  readonly #closeTakeBackMs: number;
  readonly #waiters = new Map<string, Waiter>();
  /**
   * Sends waiting for a connection to record their call: refused as the inbox closes, which
   * waits for the calls it runs (and their replies' statements) before its pool ends.
   */
  readonly #recording = new WaitingConnects();
  /** Calls waiting on a reply, by principal name. */
  readonly #pendingBy = new CountsByKey();
  /** Bytes of the bodies of the calls waiting on a reply. */
  #pendingBytes = 0;
  /** Bytes of replies read and not yet handed over. */
  #replyBytes = 0;
  /** Reads of replies waiting for room, oldest first. */
  readonly #replyQueue: { size: number; grant: () => void }[] = [];
  #closed = false;
  /**
   * Set as the inbox closes: what its one statement then found of the calls waiting (see
   * `#takeBackAll`), or nothing when that statement failed or outlasted its bound.
   */
  #settledAtClose: Promise<SettledAtClose> | undefined;

  constructor(pool: pg.Pool, channel: string, options: PgForwardedCallSenderOptions) {
    this.#pool = pool;
    this.#channel = channel;
    this.#maxPending = options.maxPending;
    this.#maxPendingPerPrincipal = options.maxPendingPerPrincipal;
    this.#maxPendingBytes = options.maxPendingBytes;
    this.#maxReplyBytes = options.maxReplyBytes;
    this.#claimedReplyGraceMs = options.claimedReplyGraceMs;
    this.#claimedWaitMs = options.claimedWaitMs;
    this.#closeTakeBackMs = options.closeTakeBackMs;
  }

  async send(
    targetHost: string,
    call: ForwardedCall,
    timeoutMs: number,
    withdraw?: AbortSignal,
    waitingSince?: number,
  ): Promise<ForwardOutcome> {
    if (this.#closed) throw shuttingDown();
    const principal = call.principal.name;
    // the principal's own share first: a principal past it is told so, whatever the others do
    if (this.#pendingBy.get(principal) >= this.#maxPendingPerPrincipal) {
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
    const body = encodeCallBody(call);
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
    this.#pendingBy.add(principal);
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
            // twice; the row's expiry follows, so the target still runs it if its turn comes later.
            // The longest wait counts from the caller's first send: a call routed again after
            // forward waits (the owner claimed none of its sends in time) waits no longer in all.
            const last = Math.max(sent + timeoutMs, (waitingSince ?? sent) + this.#claimedWaitMs);
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
            // giving up deletes the row, so the target can no longer answer it, nor begin it: the
            // delete takes the row's lock as the target's start does (see `#takeBackUnbegun`), and
            // says what it deleted as that lock let it find it. A reply already written is read and
            // delivered instead (the call ran: sent again, it would run twice)
            const gaveUp = await this.#pool.query<{ claimed: boolean; begun: boolean }>(
              `DELETE FROM forwarded_calls WHERE call_id = $1 AND reply IS NULL
               RETURNING claimed_at IS NOT NULL AS claimed, started IS NOT FALSE AS begun`,
              [call.callId],
            );
            const row = gaveUp.rows[0];
            // one its target put back unclaimed (it stopped serving as it took it) never ran there;
            // one it claimed and had not begun never runs now (a claim of a build that marks no
            // start is taken for begun)
            if (row) {
              if (row.claimed && row.begun) return { status: "unknown" };
              if (phase === "withdrawn") return { status: "withdrawn" };
              return { status: row.claimed ? "not_begun" : "timeout" };
            }
            // answered meanwhile; else gone, which an expiry long past does (it may have run), or
            // the take-back of a close
            return (await this.#takeReply(call.callId)) ?? (await this.#gone(call.callId));
          } else if (withdrawing && phase !== "withdrawn") {
            withdrawing = false;
            // only while its target has not begun it (claimed or not): a begun call may be running
            // there, and one not begun can no longer begin once its row is gone
            if (await this.#takeBackUnbegun(call.callId)) return { status: "withdrawn" };
            // begun by a target that no longer holds the session: dead, paused past its lease, or
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
      this.#pendingBy.add(principal, -1);
    }
  }

  /**
   * A recorded call's outcome once its inbox closed (see `close`): `timeout` when the close took it
   * back unrun (unclaimed, or claimed and not begun), its target's reply when the close read one,
   * else `unknown`, since its target may claim and run it, or already did.
   */
  async #outcomeAtClose(callId: string): Promise<ForwardOutcome> {
    const settled = await this.#settledAtClose;
    if (settled?.takenBack.has(callId)) return { status: "timeout" };
    const reply = settled?.replies.get(callId);
    // handed over once: the map holds it no longer than its caller waits for it
    settled?.replies.delete(callId);
    return reply ? decodeReply(reply) : { status: "unknown" };
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

  /**
   * Deletes the call if its target has not begun it (nor answered it): unclaimed, or claimed and
   * not yet marked begun (see `PgForwardedCallOwner`), so its target can no longer begin it. True
   * when it was taken back unrun. Only once the target no longer holds the session: one that
   * still does runs the calls it claimed in their session's order, which a call taken back and
   * sent again would lose. A claim of a build that marks no start is taken for begun.
   */
  async #takeBackUnbegun(callId: string): Promise<boolean> {
    const taken = await this.#pool.query(
      `DELETE FROM forwarded_calls
       WHERE call_id = $1 AND reply IS NULL AND (claimed_at IS NULL OR started IS FALSE) RETURNING call_id`,
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
      return reply ? decodeReply(reply) : undefined;
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

  /** A reply to `callId` was written (its notification, or a poll, saw it): its sender looks for it. */
  replied(callId: string): void {
    this.#waiters.get(callId)?.wake();
  }

  /** Wakes the senders whose replies were written: the net behind their notifications. */
  pollReplies(): void {
    if (this.#waiters.size === 0) return;
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

  /**
   * The first step of the inbox's close: a call still waiting for a connection to be recorded
   * resolves `timeout` at once (never recorded), and no call is sent any more.
   */
  stopRecording(): void {
    this.#closed = true;
    this.#recording.refuse(shuttingDown);
  }

  /**
   * Tells every call waiting on a reply what became of it, by one statement (see
   * `PgCallInbox.close`); resolves once that statement settled or outlasted its bound.
   */
  async close(): Promise<void> {
    if (!this.#closed) this.stopRecording();
    // set before any sender wakes: each looks for its call among those taken back
    this.#settledAtClose = this.#takeBackAll([...this.#waiters.keys()]);
    for (const waiter of this.#waiters.values()) waiter.wake();
    this.#grantReplies();
    await this.#settledAtClose;
  }

  /**
   * Takes back the calls of `callIds` their targets have not begun (nor answered), claimed or not,
   * as `#takeBackUnbegun` does one: this host stops waiting on them, and one left claimed would run
   * there after its caller was told it may or may not run, with nobody to hear its answer. Its
   * session's order is no reason to leave it: its caller sends it again, or not, as for one never
   * claimed. Reads and deletes the replies of those answered, smallest first while they fit in
   * `maxReplyBytes` (the first whatever its size), as `#takeReply` does one: the ones it deleted,
   * and those replies. A row a target's claim or start holds makes the delete wait for it, and
   * then find it claimed and not begun (taken back), or begun (left); a reply being written then
   * is not read (its call was not answered when the statement began). Nothing when it fails, or past
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
             DELETE FROM forwarded_calls
             WHERE call_id = ANY($1) AND reply IS NULL AND (claimed_at IS NULL OR started IS FALSE)
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
