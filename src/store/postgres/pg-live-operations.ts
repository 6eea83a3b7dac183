import type { Resolution } from "../../../protocol/index.js";
import { decodeValue, encodeValue } from "../event-codec.js";
import { answerToSettled } from "../first-answer.js";
import {
  interactionFromRow,
  type QueueRow,
  queuedBytes,
  queuedItem,
  queueItemFromRow,
} from "../live-rows.js";
import {
  editedInput,
  namedUploads,
  type OwnerBytesRefusal,
  overOwnerBytes,
} from "../live-state-operations.js";
import type {
  EnqueueInput,
  EnqueueOutcome,
  QueueChangeOutcome,
  QueueEditOutcome,
  ResolveOutcome,
} from "../live-state-store.js";
import type { PromptRecord } from "../session-store.js";
import { INTERACTION, PENDING_IN_TURN, QUEUE_ITEM, QUEUE_ITEMS, queueChanged } from "./pg-live-rows.js";
import type { PgLogWriter } from "./pg-log-writer.js";
import type { PgWriteBatch } from "./pg-write-batch.js";
import type { PgWriteOperation } from "./pg-write-operations.js";

const FIND_PROMPT = "SELECT record FROM prompt_keys WHERE session_id = $1 AND client_message_id = $2";
const QUEUE_SHAPE = `SELECT count(*)::int AS items, coalesce(max(position), 0) + 1 AS next,
  coalesce(min(position), 1) - 1 AS first FROM queue_items WHERE session_id = $1`;
// queue and session-count limits span an owner's sessions: one lock per owner keeps concurrent
// hosts from overshooting
export const LOCK_OWNER = "SELECT pg_advisory_xact_lock(hashtextextended($1, 7347))";
const OWNER_BYTES = "SELECT coalesce(sum(bytes), 0)::bigint AS bytes FROM queue_items WHERE owner = $1";
const INSERT_ITEM = `INSERT INTO queue_items (session_id, item_id, position, client_message_id, input, bytes, queued_at, owner)
  VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`;
const UPDATE_INPUT = "UPDATE queue_items SET input = $3, bytes = $4 WHERE session_id = $1 AND item_id = $2";
const DELETE_ITEM = "DELETE FROM queue_items WHERE session_id = $1 AND item_id = $2 RETURNING item_id";
const DELETE_QUEUE = "DELETE FROM queue_items WHERE session_id = $1";
const STEER = `UPDATE queue_items SET steered_turn = $3, position = $4 WHERE session_id = $1 AND item_id = $2
  RETURNING item_id`;
const RESOLVE = `UPDATE interactions SET state = 'resolved', resolution = $2, resolved_at = $3
  WHERE interaction_id = $1 AND state = 'pending'`;
const JOB_PROGRESS = `UPDATE jobs j SET progress = $2 FROM projections p
  WHERE j.job_id = $1 AND j.state = 'running' AND p.session_id = j.session_id RETURNING j.session_id, p.owner`;

type InteractionRow = Parameters<typeof interactionFromRow>[0];

/** The live-state writes on PostgreSQL, with the SQLite `LiveStateOperations` semantics. */
export class PgLiveOperations {
  constructor(
    private readonly writer: PgLogWriter,
    private readonly now: () => number,
  ) {}

  enqueue(input: EnqueueInput): PgWriteOperation<EnqueueOutcome> {
    return {
      sessions: [input.sessionId],
      run: async (batch) => {
        const { sessionId } = input;
        const state = await batch.load(sessionId);
        if (state === "retired") return { status: "retired" };
        if (!state) return { status: "not_found" };
        const key = input.input.clientMessageId;
        if (key !== undefined) {
          const found = await findPrompt(batch, sessionId, key);
          if (found) return { status: "duplicate", record: found };
        }
        const bytes = queuedBytes(input.input);
        const shape = (await batch.read<{ items: number; next: number }>(QUEUE_SHAPE, [sessionId]))[0]!;
        const limits = input.limits;
        if (limits) {
          if (shape.items >= limits.maxItemsPerSession)
            return { status: "queue_full", limit: "items_per_session", max: limits.maxItemsPerSession };
          const held = await ownerQueuedBytes(batch, state.owner);
          const refused = overOwnerBytes(held, bytes, limits.maxBytesPerOwner);
          if (refused) return refused;
        }
        await batch.execute(INSERT_ITEM, [
          sessionId,
          input.itemId,
          shape.next,
          key ?? null,
          encodeValue(input.input),
          bytes,
          input.queuedAt,
          state.owner,
        ]);
        if (key !== undefined) {
          const record: PromptRecord = { queued: true, itemId: input.itemId };
          batch.addPrompt(sessionId, key, record, encodeValue(record));
        }
        for (const attachmentId of namedUploads(input.input)) batch.linkAttachment(sessionId, attachmentId);
        await queueChanged(batch, sessionId, state.owner);
        return { status: "queued", item: queuedItem(input, state.owner) };
      },
    };
  }

  /** The stored message shows what the operator typed last, so an edit replaces both texts. */
  edit(
    sessionId: string,
    itemId: string,
    text: string,
    maxBytesPerOwner?: number,
  ): PgWriteOperation<QueueEditOutcome> {
    return this.changeQueue<OwnerBytesRefusal>(sessionId, async (batch, owner) => {
      const row = (await batch.read<QueueRow>(QUEUE_ITEM, [sessionId, itemId]))[0];
      if (!row) return false;
      const edit = editedInput(queueItemFromRow(row).input, text);
      if (maxBytesPerOwner !== undefined && edit.grows > 0) {
        const held = await ownerQueuedBytes(batch, owner);
        const refused = overOwnerBytes(held, edit.grows, maxBytesPerOwner);
        if (refused) return refused;
      }
      await batch.execute(UPDATE_INPUT, [sessionId, itemId, encodeValue(edit.input), edit.bytes]);
      return true;
    });
  }

  remove(sessionId: string, itemId: string): PgWriteOperation<QueueChangeOutcome> {
    return this.changeQueue(
      sessionId,
      async (batch) => (await batch.read(DELETE_ITEM, [sessionId, itemId])).length > 0,
    );
  }

  clear(sessionId: string): PgWriteOperation<QueueChangeOutcome> {
    return this.changeQueue(sessionId, async (batch) => {
      await batch.execute(DELETE_QUEUE, [sessionId]);
      return true;
    });
  }

  steer(sessionId: string, itemId: string, turnId: string): PgWriteOperation<QueueChangeOutcome> {
    return this.changeQueue(sessionId, async (batch) => {
      const first = (await batch.read<{ first: number }>(QUEUE_SHAPE, [sessionId]))[0]!.first;
      return (await batch.read(STEER, [sessionId, itemId, turnId, first])).length > 0;
    });
  }

  /** First responder wins: the interaction's session row is locked, then its state decides. */
  resolve(interactionId: string, resolution: Resolution, at?: number): PgWriteOperation<ResolveOutcome> {
    return {
      sessions: [],
      run: async (batch) => {
        const before = (await batch.read<InteractionRow>(INTERACTION, [interactionId]))[0];
        if (!before) return { status: "not_found" };
        const state = await batch.load(before.session_id);
        // read again under the session's lock: another host may have answered meanwhile
        const row = (await batch.read<InteractionRow>(INTERACTION, [interactionId]))[0];
        if (!row) return { status: "not_found" };
        const stored = interactionFromRow(row);
        const settled = answerToSettled(stored, resolution);
        if (settled) return settled;
        if (!state || state === "retired") return { status: "not_found" };
        const { sessionId, turnId } = stored.interaction;
        const when = at ?? this.now();
        await batch.execute(RESOLVE, [interactionId, encodeValue(resolution), when]);
        const events = await this.writer.appendEvents(
          batch,
          state,
          [{ type: "interaction/resolved", data: { interactionId, resolution } }],
          when,
        );
        batch.notify(sessionId, { kind: "append", epoch: state.epoch, events }, batch.snapshot(state));
        batch.notifyLive({
          kind: "interaction.resolved",
          owner: state.owner,
          sessionId,
          interactionId,
          resolution,
        });
        const pending = (await batch.read<{ n: number }>(PENDING_IN_TURN, [sessionId, turnId]))[0]!.n;
        return { status: "resolved", interaction: stored.interaction, events, pendingInTurn: pending };
      },
    };
  }

  setJobProgress(
    jobId: string,
    progress: number,
  ): PgWriteOperation<{ status: "ok" } | { status: "not_found" }> {
    return {
      sessions: [],
      run: async (batch) => {
        const row = (
          await batch.read<{ session_id: string; owner: string }>(JOB_PROGRESS, [jobId, progress])
        )[0];
        if (!row) return { status: "not_found" };
        batch.notifyLive({
          kind: "job.progress",
          owner: row.owner,
          sessionId: row.session_id,
          jobId,
          progress,
        });
        return { status: "ok" };
      },
    };
  }

  /** `change` says whether the item was there (and changed), or why the change was refused. */
  private changeQueue<Refusal = never>(
    sessionId: string,
    change: (batch: PgWriteBatch, owner: string) => Promise<NoInfer<boolean | Refusal>>,
  ): PgWriteOperation<QueueChangeOutcome | Refusal> {
    return {
      sessions: [sessionId],
      run: async (batch) => {
        const state = await batch.load(sessionId);
        if (!state || state === "retired") return { status: "not_found" };
        const changed = await change(batch, state.owner);
        if (changed === false) return { status: "item_not_found" };
        if (changed !== true) return changed;
        await queueChanged(batch, sessionId, state.owner);
        const items = (await batch.read<QueueRow>(QUEUE_ITEMS, [sessionId])).map(queueItemFromRow);
        return { status: "ok", items };
      },
    };
  }
}

/** The owner's queued bytes, read under the owner's lock so no other host's write overshoots the bound. */
async function ownerQueuedBytes(batch: PgWriteBatch, owner: string): Promise<number> {
  await batch.read(LOCK_OWNER, [owner]);
  return (await batch.read<{ bytes: number }>(OWNER_BYTES, [owner]))[0]!.bytes;
}

/** A prompt key this batch recorded already, or the stored one. */
export async function findPrompt(
  batch: PgWriteBatch,
  sessionId: string,
  clientMessageId: string,
): Promise<PromptRecord | null> {
  const pending = batch.pendingPrompt(sessionId, clientMessageId);
  if (pending) return pending;
  const rows = await batch.read<{ record: Buffer }>(FIND_PROMPT, [sessionId, clientMessageId]);
  return rows[0] ? decodeValue<PromptRecord>(rows[0].record) : null;
}
