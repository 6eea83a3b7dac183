import { setTimeout as sleep } from "node:timers/promises";
import type pg from "pg";
import { SessionmuxError } from "../../../protocol/index.js";
import type { ForwardedCall, ForwardReply } from "../call-inbox.js";
import type { CallInboxLimits } from "../call-inbox-limits.js";
import { isPgStorageFailure } from "./pg-errors.js";
import { decodeCallBody, encodeReply } from "./pg-forwarded-call-bytes.js";
import { idempotentQuery } from "./pg-idle-lost.js";

/** Calls claimed per read; a drain reads again until fewer come back. */
const CLAIM_BATCH = 64;
/** Writes of a call's start or reply, the first included, while the database fails them (see `#written`). */
const WRITE_ATTEMPTS = 4;
/** The pause before a write's next try, times the tries made: 0.1 s, 0.2 s, 0.3 s. */
const WRITE_RETRY_MS = 100;

interface ClaimedRow {
  call_id: string;
  from_host: string;
  session_id: string;
  body: Buffer;
}

/**
 * The owner's half of the PostgreSQL call inbox: claims the calls addressed to the hosts served
 * here (woken by a `c:<host>` notification or a poll), runs each in its session's turn, and
 * answers it in place, with a NOTIFY `r:<callId>` to its sender. Each call is answered at most
 * once (`reply IS NULL` guards the update). A call claimed for a host that stopped serving, or
 * lost the session's lease, while it waits for its turn is answered `not_owner` at once. A claim
 * marks the call not begun (`started` false) and its turn's first step marks it begun (see
 * `#start`): until then its sender may take it back once this host no longer holds the session.
 */
export class PgForwardedCallOwner {
  readonly #pool: pg.Pool;
  readonly #channel: string;
  readonly #maxServing: number;
  readonly #maxServingBytes: number;
  /** Calls claimed and not yet settled (answered, released or dropped as expired). */
  #serving = 0;
  /** Bytes those calls hold (bodies, and replies not yet written); a claim under way reserves its room here. */
  #servingBytes = 0;
  /**
   * Hosts whose drain stopped at `maxServing` or `maxServingBytes` with calls possibly left:
   * drained again as calls settle or a claim gives back the room it did not use.
   */
  readonly #starved = new Set<string>();
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
  #closed = false;

  constructor(
    pool: pg.Pool,
    channel: string,
    limits: Pick<CallInboxLimits, "maxServing" | "maxServingBytes">,
    /** Whether this host may write (see `PgCallInboxOptions.writesRefused`): else it claims nothing. */
    private readonly writable: () => boolean = () => true,
  ) {
    this.#pool = pool;
    this.#channel = channel;
    this.#maxServing = limits.maxServing;
    this.#maxServingBytes = limits.maxServingBytes;
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
        [ids, encodeReply({ status: "not_owner" }), this.#channel],
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

  /** A call was recorded for `hostId` (its notification): claimed now if that host is served here. */
  called(hostId: string): void {
    if (this.#served.has(hostId)) this.#drain(hostId);
  }

  /** Drains every host served here: the net behind the notifications of new calls. */
  pollServed(): void {
    for (const hostId of this.#served.keys()) this.#drain(hostId);
  }

  /**
   * Stops serving: the calls claimed and waiting for their turn are answered `not_owner` (see
   * `#refuseWaiting`). Resolves once the drains under way and the calls claimed settled.
   */
  async close(): Promise<void> {
    this.#closed = true;
    this.#served.clear();
    this.#refuseWaiting();
    await Promise.all([...this.#draining.values(), ...this.#chains.values()]);
  }

  /** Claims and runs the calls addressed to `hostId`, oldest first; one drain per host at a time. */
  #drain(hostId: string): void {
    if (this.#draining.has(hostId)) {
      this.#redrain.add(hostId);
      return;
    }
    // a host that stopped serving (or closed, or may no longer write) claims no more: a drain
    // under way ends before its next claim
    const serving = () => !this.#closed && this.#served.has(hostId) && this.writable();
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
         UPDATE forwarded_calls SET claimed_at = clock_timestamp(), started = false
         WHERE call_id IN (SELECT call_id FROM chosen)
         RETURNING call_id, from_host, session_id, body, created_at)
       SELECT (SELECT count(*) FROM candidates)::int AS found, claimed.call_id, from_host, session_id, body
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
         UPDATE forwarded_calls SET claimed_at = NULL, started = NULL WHERE call_id = $1 AND reply IS NULL
         RETURNING target_host)
       SELECT pg_notify($2, 'c:' || target_host) FROM released`,
      [callId, this.#channel],
    );
  }

  /**
   * Marks the claimed call begun, in one statement, the step past which its sender no longer takes
   * it back as never run (see `PgForwardedCallSender`): true when this host may run it now. False
   * when its row went (its sender took it back as this host's lease ended, or gave it up), was
   * answered (`not_owner`, as this host stopped serving or lost the session), or its expiry passed
   * and its sender had not moved it on: that one is put back unclaimed, so its sender, about to
   * look, takes it back as never claimed rather than wait on it; one whose sender gave up while it
   * waited behind its session's earlier calls would do its work unasked. Sent again as `#answer`
   * is: a second run after a first the database took finds the call begun and answers false, so
   * the call is not run here, whose sender is then told `unknown`: never run twice.
   */
  async #start(callId: string): Promise<boolean> {
    const started = await this.#written<{ started: boolean | null }>(
      `UPDATE forwarded_calls f
       SET started = CASE WHEN f.expires_at > at.now THEN true END,
         claimed_at = CASE WHEN f.expires_at > at.now THEN f.claimed_at END
       FROM (SELECT clock_timestamp() AS now) at
       WHERE f.call_id = $1 AND f.reply IS NULL AND f.started IS FALSE
       RETURNING f.started`,
      [callId],
    );
    return started.rows[0]?.started === true;
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
    await this.#written(
      `WITH answered AS (
         UPDATE forwarded_calls SET reply = $2 WHERE call_id = $1 AND reply IS NULL RETURNING call_id)
       SELECT pg_notify($3, 'r:' || call_id) FROM answered`,
      [callId, encoded, this.#channel],
    );
  }

  /** Sends a write of a call's row again while the database fails it, as `#answer` tells. */
  async #written<R extends pg.QueryResultRow>(text: string, values: unknown[]): Promise<pg.QueryResult<R>> {
    for (let attempt = 1; ; attempt++) {
      try {
        return await idempotentQuery<R>(this.#pool, text, values);
      } catch (err) {
        if (this.#closed || attempt >= WRITE_ATTEMPTS || !isPgStorageFailure(err)) throw err;
        await sleep(WRITE_RETRY_MS * attempt);
        // one that closed meanwhile writes no more: its pool is ending
        if (this.#closed) throw err;
      }
    }
  }

  /** Runs a claimed call in its session's turn; `size`: the bytes it holds until it settles. */
  #run(hostId: string, row: ClaimedRow, taken: boolean, size: number): void {
    let held = size;
    const previous = this.#chains.get(row.session_id) ?? Promise.resolve();
    if (taken) this.#waitingTurn.set(row.call_id, { hostId, sessionId: row.session_id });
    const next = previous.then(async () => {
      if (!taken) return this.#release(row.call_id);
      const refused = this.#waitingTurn.get(row.call_id)?.refused;
      this.#waitingTurn.delete(row.call_id);
      // answered not_owner as its host stopped serving or lost the session's lease
      if (refused && (await refused).has(row.call_id)) return;
      // begun only once marked so: until then its sender may take it back and send it elsewhere
      if (!(await this.#start(row.call_id))) return;
      // taken while serving: a caller told at once re-resolves the owner rather than wait it out
      const handler = this.#served.get(hostId);
      // a body that does not decode is answered as the fault it is, and holds nothing after
      const reply: ForwardReply = handler
        ? await Promise.resolve()
            .then(() => handler(forwardedCall(row)))
            .catch((err: unknown) => asReply(err))
        : { status: "not_owner" };
      const encoded = encodeReply(reply);
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

/** The call a claimed row holds (its body as the sender encoded it). */
function forwardedCall(row: ClaimedRow): ForwardedCall {
  return {
    callId: row.call_id,
    fromHost: row.from_host,
    sessionId: row.session_id,
    ...decodeCallBody(row.body),
  };
}
