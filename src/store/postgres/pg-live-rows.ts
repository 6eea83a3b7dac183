import type pg from "pg";
import type { Interaction } from "../../../protocol/index.js";
import { interactionFromRow, type QueueRow, queueItemFromRow } from "../live-rows.js";
import type {
  LiveStatePage,
  SessionLiveState,
  StoredInteraction,
  StoredJob,
  StoredQueueItem,
} from "../live-state-store.js";
import type { HeldLease, LeaseHolder } from "../session-lease.js";
import { logKeyOf } from "./pg-log-key.js";
import { readOn, readQuery } from "./pg-read-query.js";
import type { PgWriteBatch } from "./pg-write-batch.js";

/**
 * Epoch milliseconds by the database clock (the transaction's start, see migration 11): lease
 * expiry is judged by it on every host.
 */
export const DB_NOW = "sessionmux_now()";

export const QUEUE_ITEMS = `SELECT item_id, session_id, owner, queued_at, input FROM queue_items
  WHERE session_id = $1 ORDER BY position`;
const OWNER_QUEUED_BYTES =
  "SELECT coalesce(sum(bytes), 0)::bigint AS bytes FROM queue_items WHERE owner = $1";
export const QUEUE_ITEM = `SELECT item_id, session_id, owner, queued_at, input, client_message_id FROM queue_items
  WHERE session_id = $1 AND item_id = $2`;
const BUMP_QUEUE = `INSERT INTO queue_versions (session_id, version) VALUES ($1, 1)
  ON CONFLICT (session_id) DO UPDATE SET version = queue_versions.version + 1 RETURNING version`;
/** The queue, its version and the session's owner in one statement (one snapshot). */
export const VERSIONED_QUEUE = `SELECT v.version, v.owner, q.item_id, q.session_id, q.owner AS item_owner, q.queued_at, q.input
  FROM (SELECT coalesce((SELECT version FROM queue_versions WHERE session_id = $1), 0) AS version,
               (SELECT owner FROM sessions WHERE session_id = $1) AS owner) v
  LEFT JOIN LATERAL (SELECT * FROM queue_items WHERE session_id = $1 ORDER BY position) q ON true`;
const INTERACTION_COLUMNS = `i.interaction_id, i.session_id, i.turn_id, i.kind, i.body, i.requested_at, i.state,
  i.resolution, s.owner`;
// The interactions found: those asked in their session's current log. A cleared epoch's and a
// deleted session's wait for the purger (migration 17); a row from before that has no key, and is
// found while its session lives, as it was.
const CURRENT_INTERACTIONS = `interactions i JOIN projections s ON s.session_id = i.session_id
  AND (i.log_key IS NULL OR i.log_key = ${logKeyOf("s")})`;
export const INTERACTION = `SELECT ${INTERACTION_COLUMNS} FROM ${CURRENT_INTERACTIONS} WHERE i.interaction_id = $1`;
const TURN_INTERACTIONS = `SELECT ${INTERACTION_COLUMNS} FROM ${CURRENT_INTERACTIONS}
  WHERE i.session_id = $1 AND i.turn_id = $2 ORDER BY i.requested_at, i.interaction_id`;
// a queue's change bumps its row: its `xmin` is the transaction of the latest change
const QUEUE_VERSIONS = `SELECT session_id, version FROM queue_versions
  WHERE ($1::xid IS NULL OR age(xmin) <= age($1::xid)) AND session_id > $2 ORDER BY session_id LIMIT $3`;
// a retired session's row was last written by the transaction that retired it (migration 14's index)
const RETIRED_SINCE = `SELECT session_id, owner FROM sessions WHERE retired_at IS NOT NULL
  AND age(xmin) <= age($1::xid) AND session_id > $2 ORDER BY session_id LIMIT $3`;
// an answer or a withdrawal is the row's last write: its `xmin` is the transaction that settled it
const SETTLED_SINCE = `SELECT ${INTERACTION_COLUMNS} FROM ${CURRENT_INTERACTIONS}
  WHERE i.state <> 'pending' AND age(i.xmin) <= age($1::xid) AND i.interaction_id > $2
  ORDER BY i.interaction_id LIMIT $3`;
const PENDING_AFTER = `SELECT ${INTERACTION_COLUMNS} FROM interactions i
  JOIN sessions s ON s.session_id = i.session_id
  WHERE i.state = 'pending' AND (i.session_id, i.requested_at, i.interaction_id) > ($1, $2, $3)
  ORDER BY i.session_id, i.requested_at, i.interaction_id LIMIT $4`;
/** A pending interaction's place in `PENDING_AFTER`'s order. */
export interface PendingKey {
  sessionId: string;
  requestedAt: number;
  interactionId: string;
}
/** Before every row of `PENDING_AFTER`: session ids are never empty. */
export const FIRST_PENDING: PendingKey = { sessionId: "", requestedAt: 0, interactionId: "" };
export const PENDING_IN_TURN = `SELECT count(*)::int AS n FROM interactions
  WHERE session_id = $1 AND turn_id = $2 AND state = 'pending'`;
const JOB_COLUMNS = `job_id AS "jobId", session_id AS "sessionId", turn_id AS "turnId", label, progress,
  started_at AS "startedAt"`;
export const RUNNING_JOBS_OF = `SELECT ${JOB_COLUMNS} FROM jobs WHERE session_id = $1 AND state = 'running'
  ORDER BY started_at, job_id`;
const LEASE_COLUMNS = `session_id AS "sessionId", host_id AS "hostId", generation, expires_at AS "expiresAt"`;
const HELD_LEASES = `SELECT l.session_id AS "sessionId", l.host_id AS "hostId", l.generation,
    l.expires_at AS "expiresAt", s.owner FROM leases l JOIN sessions s ON s.session_id = l.session_id
  WHERE l.host_id IS NOT NULL AND l.expires_at > ${DB_NOW} AND l.session_id > $1 ORDER BY l.session_id LIMIT $2`;
const UNOWNED_QUEUES = `SELECT DISTINCT q.session_id FROM queue_items q
    LEFT JOIN leases l ON l.session_id = q.session_id AND l.host_id IS NOT NULL AND l.expires_at > ${DB_NOW}
  WHERE l.session_id IS NULL AND NOT EXISTS (SELECT 1 FROM projections p JOIN interactions i
      ON i.session_id = p.session_id AND i.turn_id = p.open_turn_id AND i.state = 'pending'
    WHERE p.session_id = q.session_id)
  ORDER BY q.session_id LIMIT $1`;
const LIVE_SESSION_IDS = `SELECT session_id FROM (
    SELECT session_id FROM queue_items WHERE session_id > $1
    UNION SELECT session_id FROM interactions WHERE state = 'pending' AND session_id > $1
    UNION SELECT session_id FROM jobs WHERE state = 'running' AND session_id > $1) ids
  ORDER BY session_id LIMIT $2`;

type InteractionRow = Parameters<typeof interactionFromRow>[0];

/** Announces a session's whole queue and bumps its version, inside the transaction. */
export async function queueChanged(batch: PgWriteBatch, sessionId: string, owner: string): Promise<void> {
  const version = (await batch.read<{ version: number }>(BUMP_QUEUE, [sessionId]))[0]!.version;
  const items = (await batch.read<QueueRow>(QUEUE_ITEMS, [sessionId])).map(queueItemFromRow);
  batch.notifyLive({ kind: "queue", sessionId, owner, items }, version);
}

/** Live-state reads outside write transactions; nothing is cached (other hosts write too). */
export class PgLiveReads {
  constructor(private readonly pool: pg.Pool) {}

  async queue(sessionId: string): Promise<StoredQueueItem[]> {
    return (await readQuery<QueueRow>(this.pool, QUEUE_ITEMS, [sessionId])).rows.map(queueItemFromRow);
  }

  async queuedBytes(owner: string): Promise<number> {
    return (await readQuery<{ bytes: number }>(this.pool, OWNER_QUEUED_BYTES, [owner])).rows[0]!.bytes;
  }

  /** The queue with its version and the session's owner (null owner: no such session). */
  async versionedQueue(
    sessionId: string,
  ): Promise<{ version: number; owner: string | null; items: StoredQueueItem[] }> {
    const rows = (
      await readQuery<QueueRow & { version: number; item_owner: string }>(this.pool, VERSIONED_QUEUE, [
        sessionId,
      ])
    ).rows;
    const first = rows[0]!;
    const items = rows
      .filter((row) => row.item_id !== null)
      .map((row) => queueItemFromRow({ ...row, owner: row.item_owner }));
    return { version: first.version, owner: first.owner, items };
  }

  async interaction(interactionId: string): Promise<StoredInteraction | null> {
    const row = (await readQuery<InteractionRow>(this.pool, INTERACTION, [interactionId])).rows[0];
    return row ? interactionFromRow(row) : null;
  }

  async turnInteractions(sessionId: string, turnId: string): Promise<StoredInteraction[]> {
    return (await readQuery<InteractionRow>(this.pool, TURN_INTERACTIONS, [sessionId, turnId])).rows.map(
      interactionFromRow,
    );
  }

  async leaseHolder(sessionId: string): Promise<LeaseHolder | null> {
    const sql = `SELECT ${LEASE_COLUMNS} FROM leases WHERE session_id = $1 AND host_id IS NOT NULL
      AND expires_at > ${DB_NOW}`;
    return (await readQuery<LeaseHolder>(this.pool, sql, [sessionId])).rows[0] ?? null;
  }

  async leasePage(
    after: string | null,
    limit: number,
  ): Promise<{ leases: HeldLease[]; next: string | null }> {
    const leases = (await readQuery<HeldLease>(this.pool, HELD_LEASES, [after ?? "", limit])).rows;
    return { leases, next: leases.length < limit ? null : (leases.at(-1)?.sessionId ?? null) };
  }

  async unownedQueues(limit: number): Promise<string[]> {
    const rows = (await readQuery<{ session_id: string }>(this.pool, UNOWNED_QUEUES, [limit])).rows;
    return rows.map((row) => row.session_id);
  }

  /**
   * Pending interactions (for a re-read after missed wake-ups) by session, each session's in the
   * order they were asked, after `after` (`FIRST_PENDING`: from the first), at most `limit`.
   */
  async pendingInteractions(after: PendingKey, limit: number): Promise<StoredInteraction[]> {
    const { sessionId, requestedAt, interactionId } = after;
    return (
      await readQuery<InteractionRow>(this.pool, PENDING_AFTER, [
        sessionId,
        requestedAt,
        interactionId,
        limit,
      ])
    ).rows.map(interactionFromRow);
  }

  /**
   * Interactions no longer pending whose row the transaction `since` (a 32-bit id) or a younger
   * one wrote (answered or withdrawn since), in id order after `afterId`, at most `limit`.
   */
  async settledSince(since: string, afterId: string, limit: number): Promise<StoredInteraction[]> {
    return (await readQuery<InteractionRow>(this.pool, SETTLED_SINCE, [since, afterId, limit])).rows.map(
      interactionFromRow,
    );
  }

  /**
   * The queues' versions in session id order after `afterSessionId`, at most `limit`: those the
   * transaction `since` (a 32-bit id) or a younger one bumped, every one when `since` is null.
   */
  async queueVersions(
    since: string | null,
    afterSessionId: string,
    limit: number,
  ): Promise<{ session_id: string; version: number }[]> {
    return (
      await readQuery<{ session_id: string; version: number }>(this.pool, QUEUE_VERSIONS, [
        since,
        afterSessionId,
        limit,
      ])
    ).rows;
  }

  /**
   * The sessions the transaction `since` (a 32-bit id) or a younger one deleted, with their owner,
   * in session id order after `afterSessionId`, at most `limit`.
   */
  async retiredSince(
    since: string,
    afterSessionId: string,
    limit: number,
  ): Promise<{ session_id: string; owner: string }[]> {
    return (
      await readQuery<{ session_id: string; owner: string }>(this.pool, RETIRED_SINCE, [
        since,
        afterSessionId,
        limit,
      ])
    ).rows;
  }

  /** See `LiveStateStore.liveStatePage`: one repeatable-read snapshot, so the page is one cut. */
  page(after: string | null, limit: number): Promise<LiveStatePage> {
    return readOn(this.pool, (client) => livePage(client, after, limit));
  }
}

/** See `PgLiveReads.page`: its statements, on one connection. */
async function livePage(client: pg.PoolClient, after: string | null, limit: number): Promise<LiveStatePage> {
  try {
    await client.query("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY");
    const ids = (await client.query<{ session_id: string }>(LIVE_SESSION_IDS, [after ?? "", limit])).rows.map(
      (row) => row.session_id,
    );
    // one after the other: a connection runs one query at a time (the snapshot is the same)
    const headers = await client.query<{
      session_id: string;
      owner: string;
      model: string;
      open_turn_id: string | null;
    }>("SELECT session_id, owner, model, open_turn_id FROM projections WHERE session_id = ANY($1)", [ids]);
    const queues = await client.query<QueueRow>(
      "SELECT item_id, session_id, owner, queued_at, input FROM queue_items WHERE session_id = ANY($1) ORDER BY session_id, position",
      [ids],
    );
    const interactions = await client.query<InteractionRow>(
      `SELECT ${INTERACTION_COLUMNS} FROM interactions i JOIN sessions s ON s.session_id = i.session_id
          WHERE i.session_id = ANY($1) AND i.state = 'pending' ORDER BY i.requested_at, i.interaction_id`,
      [ids],
    );
    const jobs = await client.query<StoredJob>(
      `SELECT ${JOB_COLUMNS} FROM jobs WHERE session_id = ANY($1) AND state = 'running' ORDER BY started_at, job_id`,
      [ids],
    );
    const leases = await client.query<LeaseHolder>(
      `SELECT ${LEASE_COLUMNS} FROM leases WHERE session_id = ANY($1) AND host_id IS NOT NULL AND expires_at > ${DB_NOW}`,
      [ids],
    );
    await client.query("COMMIT");
    const sessions: SessionLiveState[] = [];
    for (const header of headers.rows.sort((a, b) => (a.session_id < b.session_id ? -1 : 1))) {
      const sessionId = header.session_id;
      const pending: Interaction[] = interactions.rows
        .filter((row) => row.session_id === sessionId)
        .map((row) => interactionFromRow(row).interaction);
      const open = header.open_turn_id;
      sessions.push({
        sessionId,
        owner: header.owner,
        model: header.model,
        queue: queues.rows.filter((row) => row.session_id === sessionId).map(queueItemFromRow),
        interactions: pending,
        parkedTurnId: open !== null && pending.some((i) => i.turnId === open) ? open : null,
        jobs: jobs.rows.filter((job) => job.sessionId === sessionId),
        lease: leases.rows.find((lease) => lease.sessionId === sessionId) ?? null,
      });
    }
    return { sessions, next: ids.length < limit ? null : (ids.at(-1) ?? null) };
  } catch (err) {
    await client.query("ROLLBACK").catch(() => undefined);
    throw err;
  }
}
