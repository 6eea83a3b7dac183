import type { NewEvent, SessionEvent } from "../../../protocol/index.js";
import { clearRefusal } from "../cleared-epoch.js";
import { encodeValue } from "../event-codec.js";
import { heldElsewhere } from "../lease-rules.js";
import { type QueueRow, queueItemFromRow } from "../live-rows.js";
import { stillAsRead } from "../live-state-operations.js";
import { decodeRow, type StoredRow } from "../log-writer.js";
import { withoutEndsOfClosedTurns } from "../open-turn-ends.js";
import { applyAck } from "../projection.js";
import { promptRecordAfterAppend } from "../prompt-record.js";
import { createdSession, forkedEnds, forkedSession, newEpoch } from "../session-creation.js";
import { headerOf } from "../session-state.js";
import type {
  AppendOptions,
  AppendOutcome,
  ClearOutcome,
  CreateInput,
  CreateOutcome,
  ForkInput,
  ForkOutcome,
  PromptRecord,
} from "../session-store.js";
import { fenceHolds, type PgLeaseOperations, readLease } from "./pg-lease-operations.js";
import { findPrompt, LOCK_OWNER } from "./pg-live-operations.js";
import { DB_NOW, QUEUE_ITEM, queueChanged } from "./pg-live-rows.js";
import { logKeyOf } from "./pg-log-key.js";
import type { PgLogWriter } from "./pg-log-writer.js";
import type { PgWriteBatch } from "./pg-write-batch.js";

/** One write: the sessions it locks up front (in one statement per batch) and its steps. */
export interface PgWriteOperation<R> {
  sessions: readonly string[];
  /** Worth running on kept session states (it is expected to need no read before COMMIT). */
  keptStates?: boolean;
  run(batch: PgWriteBatch): Promise<R>;
}

const INSERT_PROMPT = `INSERT INTO prompt_keys (session_id, client_message_id, record) VALUES ($1, $2, $3)
  ON CONFLICT DO NOTHING`;
const EVENTS_UP_TO =
  "SELECT seq, at, type, data FROM events WHERE session_id = $1 AND seq <= $2 ORDER BY seq";
/**
 * The first event at which a fork's prefix passes `ForkInput.maxDataBytes` ($3), if any: the
 * running sum stops there, so a refusal reads what the bound does, however long the log is
 * (`octet_length` of a stored value reads its size, not its content).
 */
const PREFIX_PASSES = `SELECT seq FROM (SELECT seq, sum(octet_length(data)) OVER (ORDER BY seq ROWS UNBOUNDED PRECEDING) AS total
  FROM events WHERE session_id = $1 AND seq <= $2) AS prefix WHERE total > $3 LIMIT 1`;
// open turns not parked on a person, and running jobs: what a restart or a dead owner leaves; not
// of sessions whose unexpired lease a host other than $1 (any, when null) holds: their agent runs
// there, and locking their rows would hold up its appends for nothing (each one found is checked
// again under its lock)
const OPEN_WORK = `SELECT w.session_id FROM (
    SELECT p.session_id FROM projections p WHERE p.open_turn_id IS NOT NULL
      AND NOT EXISTS (SELECT 1 FROM interactions i WHERE i.session_id = p.session_id
                      AND i.turn_id = p.open_turn_id AND i.state = 'pending')
    UNION SELECT session_id FROM jobs WHERE state = 'running') w
  WHERE NOT EXISTS (SELECT 1 FROM leases l WHERE l.session_id = w.session_id AND l.host_id IS NOT NULL
    AND l.expires_at > ${DB_NOW} AND l.host_id IS DISTINCT FROM $1::text)
  ORDER BY 1`;
const DELETE_ITEM = "DELETE FROM queue_items WHERE session_id = $1 AND item_id = $2";
const UPDATE_PROMPT = "UPDATE prompt_keys SET record = $3 WHERE session_id = $1 AND client_message_id = $2";
const PENDING_OF_SESSION =
  "SELECT interaction_id FROM interactions WHERE session_id = $1 AND state = 'pending'";
const DELETE_QUEUE = "DELETE FROM queue_items WHERE session_id = $1 RETURNING item_id";
const LIVE_SESSIONS = "SELECT session_id FROM sessions WHERE retired_at IS NULL ORDER BY session_id";
// Under the table's lock no other transaction moves a count until this one commits, and what any
// transaction waiting for it wrote is not in this count's snapshot yet: it adds its own after.
const RECOUNT_OWNER_USAGE = `LOCK TABLE owner_usage IN EXCLUSIVE MODE;
  DELETE FROM owner_usage;
  INSERT INTO owner_usage (owner, stored_bytes)
    SELECT owner, sum(bytes) FROM (
      SELECT p.owner, octet_length(e.data)::bigint AS bytes FROM events e
        JOIN projections p ON e.session_id = ${logKeyOf("p")}
      UNION ALL SELECT owner, size FROM attachments a
        WHERE NOT EXISTS (SELECT 1 FROM purges g WHERE g.session_id = a.session_id)
    ) u GROUP BY owner`;

/** Another host created (and maybe already retired) the id since this batch looked. */
async function lostCreateRace(
  batch: PgWriteBatch,
  sessionId: string,
): Promise<{ status: "retired" } | { status: "exists" }> {
  return (await batch.reload(sessionId)) === "retired" ? { status: "retired" } : { status: "exists" };
}

/**
 * The store's writes as PostgreSQL group-commit operations. Each checks its preconditions on rows
 * it holds locked inside the shared transaction (so check and write are atomic on every host) and
 * returns a result value for every expected refusal. Mirrors the SQLite `WriteOperations`.
 */
export class PgWriteOperations {
  constructor(
    private readonly writer: PgLogWriter,
    private readonly leases: PgLeaseOperations,
    private readonly now: () => number,
  ) {}

  create(input: CreateInput): PgWriteOperation<CreateOutcome> {
    return {
      sessions: [input.sessionId],
      run: async (batch) => {
        const at = input.at ?? this.now();
        const existing = await batch.load(input.sessionId);
        if (existing === "retired") return { status: "retired" };
        if (existing) return { status: "exists" };
        const full = await ownerFull(batch, input.owner, input.maxOwnerSessions);
        if (full) return full;
        const { base, created } = createdSession(input, at);
        const state = await this.writer.insertSession(batch, base, null);
        if (!state) return lostCreateRace(batch, input.sessionId);
        const events = await this.writer.appendEvents(batch, state, [created], at);
        batch.notify(state.sessionId, { kind: "create", epoch: state.epoch, events }, batch.snapshot(state));
        return { status: "created", header: headerOf(state), events };
      },
    };
  }

  append(
    sessionId: string,
    events: NewEvent[],
    options: AppendOptions = {},
  ): PgWriteOperation<AppendOutcome> {
    return {
      sessions: [sessionId],
      keptStates: !options.prompt && !options.dequeue,
      run: async (batch) => {
        const state = await batch.load(sessionId);
        if (state === "retired") return { status: "retired" };
        if (!state) return { status: "not_found" };
        if (options.expectedEpoch !== undefined && options.expectedEpoch !== state.epoch) {
          return { status: "epoch_mismatch", epoch: state.epoch };
        }
        if (options.fence && !(await fenceHolds(batch, sessionId, options.fence)))
          return { status: "fenced" };
        const prompt = options.prompt;
        if (prompt) {
          const found = await findPrompt(batch, sessionId, prompt.clientMessageId);
          if (found) return { status: "duplicate", record: found };
        }
        const dequeue = options.dequeue;
        const dequeued = dequeue && (await batch.read<QueueRow>(QUEUE_ITEM, [sessionId, dequeue.itemId]))[0];
        if (dequeue && !(dequeued && stillAsRead(queueItemFromRow(dequeued).input, dequeue.read)))
          return { status: "queue_item_gone" };
        const written = withoutEndsOfClosedTurns(state.projection.openTurnId, events);
        const appended = await this.writer.appendEvents(batch, state, written, options.at ?? this.now());
        if (dequeue && dequeued) await this.dequeued(batch, state.owner, dequeued, dequeue.turnId, appended);
        if (prompt) {
          const record = promptRecordAfterAppend(prompt.record, appended);
          batch.addPrompt(sessionId, prompt.clientMessageId, record, encodeValue(record));
        }
        if (appended.length > 0) {
          batch.notify(
            sessionId,
            { kind: "append", epoch: state.epoch, events: appended },
            batch.snapshot(state),
          );
        }
        return { status: "appended", epoch: state.epoch, events: appended };
      },
    };
  }

  clear(sessionId: string, expectedEpoch: string | undefined): PgWriteOperation<ClearOutcome> {
    return {
      sessions: [sessionId],
      run: async (batch) => {
        const state = await batch.load(sessionId);
        if (state === "retired") return { status: "retired" };
        if (!state) return { status: "not_found" };
        const refused = clearRefusal(state, expectedEpoch);
        if (refused) return refused;
        await this.writer.resetEpoch(batch, state, newEpoch(), this.now());
        batch.notify(sessionId, { kind: "clear", epoch: state.epoch }, batch.snapshot(state));
        return { status: "cleared", epoch: state.epoch };
      },
    };
  }

  delete(
    sessionId: string,
  ): PgWriteOperation<{ status: "deleted" } | { status: "not_found" } | { status: "retired" }> {
    return {
      sessions: [sessionId],
      run: async (batch) => {
        const state = await batch.load(sessionId);
        if (state === "retired") return { status: "retired" };
        if (!state) return { status: "not_found" };
        await forgetLiveState(batch, sessionId, state.owner);
        await this.writer.retire(batch, state, this.now());
        batch.notify(sessionId, { kind: "delete" }, null);
        return { status: "deleted" };
      },
    };
  }

  /** As the SQLite store: lineage at seq 1, the source prefix re-sequenced, an open turn closed. */
  fork(input: ForkInput): PgWriteOperation<ForkOutcome> {
    return {
      sessions: [input.sourceId, input.targetId],
      run: async (batch) => {
        const source = await batch.load(input.sourceId);
        if (source === "retired") return { status: "source_retired" };
        if (!source) return { status: "source_not_found" };
        if (input.atSeq !== undefined && input.atSeq > source.headSeq)
          return { status: "seq_past_head", headSeq: source.headSeq };
        const existing = await batch.load(input.targetId);
        if (existing === "retired") return { status: "retired" };
        if (existing) return { status: "exists" };
        const full = await ownerFull(batch, input.owner, input.maxOwnerSessions);
        if (full) return full;
        const atSeq = Math.max(0, input.atSeq ?? source.headSeq);
        const { maxDataBytes, maxEvents } = input;
        if (maxEvents !== undefined && atSeq > maxEvents)
          return { status: "too_large", maxDataBytes: maxDataBytes ?? 0 };
        if (
          maxDataBytes !== undefined &&
          (await batch.read(PREFIX_PASSES, [source.logKey, atSeq, maxDataBytes])).length > 0
        )
          return { status: "too_large", maxDataBytes };
        const at = input.at ?? this.now();
        const copied = (await batch.read<StoredRow>(EVENTS_UP_TO, [source.logKey, atSeq])).map(decodeRow);
        const { base, forkOf, events } = forkedSession(input, source, atSeq, copied, at);
        const state = await this.writer.insertSession(batch, base, forkOf);
        if (!state) return lostCreateRace(batch, input.targetId);
        const stored = await this.writer.appendEvents(batch, state, events, at);
        const ends = forkedEnds(state, events);
        if (ends.length > 0) stored.push(...(await this.writer.appendEvents(batch, state, ends, at)));
        batch.notify(
          state.sessionId,
          { kind: "create", epoch: state.epoch, events: stored },
          batch.snapshot(state),
        );
        return { status: "created", header: headerOf(state), events: stored };
      },
    };
  }

  ack(
    sessionId: string,
    completionSettledAt: number,
  ): PgWriteOperation<{ status: "ok"; hasUnseenCompletion: boolean } | { status: "not_found" }> {
    return {
      sessions: [sessionId],
      run: async (batch) => {
        const state = await batch.load(sessionId);
        if (!state || state === "retired") return { status: "not_found" };
        const acked = applyAck(state.projection, completionSettledAt);
        if (acked !== state.projection && acked.ackedSettledAt !== null) {
          state.projection = acked;
          await this.writer.setAcked(batch, state, acked.ackedSettledAt);
          batch.notify(sessionId, { kind: "meta" }, batch.snapshot(state));
        }
        return { status: "ok", hasUnseenCompletion: state.projection.hasUnseenCompletion };
      },
    };
  }

  /** The first record under a key wins; later ones are ignored (as the SQLite store does). */
  recordPrompt(sessionId: string, clientMessageId: string, record: PromptRecord): PgWriteOperation<void> {
    return {
      sessions: [],
      run: (batch) => batch.execute(INSERT_PROMPT, [sessionId, clientMessageId, encodeValue(record)]),
    };
  }

  /** See `SessionStore.interruptOpenTurns`; each session is re-checked under its lock. */
  interruptOpenTurns(at: number, hostId: string | undefined): PgWriteOperation<string[]> {
    return {
      sessions: [],
      run: async (batch) => {
        const open = await batch.read<{ session_id: string }>(OPEN_WORK, [hostId ?? null]);
        await batch.lock(open.map((row) => row.session_id));
        const closed: string[] = [];
        for (const { session_id: sessionId } of open) {
          const state = await batch.load(sessionId);
          if (!state || state === "retired") continue;
          const { now, row } = await readLease(batch, sessionId);
          if (heldElsewhere(row, hostId, now)) continue;
          if ((await this.leases.closeRunningWork(batch, state, at)) !== null) closed.push(sessionId);
        }
        return closed;
      },
    };
  }

  rebuildProjections(): PgWriteOperation<void> {
    return {
      sessions: [],
      run: async (batch) => {
        const live = await batch.read<{ session_id: string }>(LIVE_SESSIONS, []);
        await batch.lock(live.map((row) => row.session_id));
        for (const { session_id: sessionId } of live) {
          const state = await batch.load(sessionId);
          if (state && state !== "retired") await this.writer.rebuild(batch, state);
        }
        await batch.execute(RECOUNT_OWNER_USAGE, []);
        // the count read this transaction's earlier appends too: their deltas must not be added again
        batch.ownerDataBytes.clear();
      },
    };
  }

  /** The started item leaves the queue; a retry of its prompt now finds the turn it became. */
  private async dequeued(
    batch: PgWriteBatch,
    owner: string,
    item: QueueRow,
    turnId: string,
    appended: readonly SessionEvent[],
  ): Promise<void> {
    await batch.execute(DELETE_ITEM, [item.session_id, item.item_id]);
    if (item.client_message_id) {
      const started: PromptRecord = { queued: false, turnId };
      const message = appended.find((event) => event.type === "user/message");
      if (message) started.seq = message.seq;
      await batch.execute(UPDATE_PROMPT, [item.session_id, item.client_message_id, encodeValue(started)]);
    }
    await queueChanged(batch, item.session_id, owner);
  }
}

/** Everything live of a deleted session goes with its log; watchers learn it from the notices. */
async function forgetLiveState(batch: PgWriteBatch, sessionId: string, owner: string): Promise<void> {
  const pending = await batch.read<{ interaction_id: string }>(PENDING_OF_SESSION, [sessionId]);
  for (const { interaction_id: interactionId } of pending)
    batch.notifyLive({ kind: "interaction.withdrawn", owner, sessionId, interactionId });
  const removed = await batch.read(DELETE_QUEUE, [sessionId]);
  if (removed.length > 0) await queueChanged(batch, sessionId, owner);
}

const OWNER_SESSIONS = "SELECT count(*)::int AS n FROM projections WHERE owner = $1";

/**
 * The refusal when `owner` already holds `max` live sessions, counted under the owner's lock (so
 * two hosts creating for one owner at once cannot both pass): the committed ones, and those this
 * transaction created, whose projection rows are written only at COMMIT.
 */
async function ownerFull(
  batch: PgWriteBatch,
  owner: string,
  max: number | undefined,
): Promise<{ status: "too_many_sessions"; max: number } | null> {
  if (max === undefined) return null;
  await batch.read(LOCK_OWNER, [owner]);
  const committed = (await batch.read<{ n: number }>(OWNER_SESSIONS, [owner]))[0]!.n;
  return committed + batch.createdFor(owner) >= max ? { status: "too_many_sessions", max } : null;
}
