import type { Interaction, Resolution, SessionEvent } from "../../protocol/index.js";
import { decodeValue, encodeValue } from "./event-codec.js";
import type {
  EnqueueInput,
  InteractionState,
  LiveStatePage,
  QueuedPromptInput,
  SessionLiveState,
  StoredInteraction,
  StoredJob,
  StoredQueueItem,
} from "./live-state-store.js";
import type { LeaseHolder } from "./session-lease.js";
import type { Statements } from "./sqlite-statements.js";
import type { WriteBatch } from "./write-batch.js";

export interface QueueRow {
  item_id: string;
  session_id: string;
  owner: string;
  queued_at: number;
  input: Uint8Array;
  client_message_id?: string | null;
}

interface InteractionRow {
  interaction_id: string;
  session_id: string;
  turn_id: string;
  kind: Interaction["kind"];
  body: Uint8Array;
  requested_at: number;
  state: InteractionState;
  resolution: Uint8Array | null;
  owner: string;
}

type InteractionBody = Pick<Interaction, "action" | "question" | "options" | "toolCallId">;

export function queueItemFromRow(row: QueueRow): StoredQueueItem {
  return {
    itemId: row.item_id,
    sessionId: row.session_id,
    owner: row.owner,
    queuedAt: row.queued_at,
    input: decodeValue<QueuedPromptInput>(row.input),
  };
}

/** The item a queued prompt became, as both stores answer its `enqueuePrompt`. */
export function queuedItem(input: EnqueueInput, owner: string): StoredQueueItem {
  return {
    itemId: input.itemId,
    sessionId: input.sessionId,
    owner,
    queuedAt: input.queuedAt,
    input: input.input,
  };
}

/**
 * An `interaction/requested` event as the interaction it announces and the encoded body its row
 * keeps (every field but the row's own columns): one reading for both stores.
 */
export function requestedInteraction(
  sessionId: string,
  event: Extract<SessionEvent, { type: "interaction/requested" }>,
): { interaction: Interaction; body: Uint8Array } {
  const { turnId, interactionId, kind, ...rest } = event.data;
  const interaction: Interaction = { interactionId, sessionId, turnId, kind, requestedAt: event.at, ...rest };
  return { interaction, body: encodeValue(rest) };
}

export function interactionFromRow(row: InteractionRow): StoredInteraction {
  const body = decodeValue<InteractionBody>(row.body);
  const interaction: Interaction = {
    interactionId: row.interaction_id,
    sessionId: row.session_id,
    turnId: row.turn_id,
    kind: row.kind,
    requestedAt: row.requested_at,
    ...body,
  };
  const stored: StoredInteraction = { interaction, owner: row.owner, state: row.state };
  if (row.resolution) stored.resolution = decodeValue<Resolution>(row.resolution);
  return stored;
}

/** Bytes a queued prompt holds: what the per-owner queue limit counts. */
export function queuedBytes(input: QueuedPromptInput): number {
  let bytes = Buffer.byteLength(input.text) + Buffer.byteLength(input.display ?? "");
  // inline payloads count, raw or as a `data:` URL
  for (const a of input.attachments ?? [])
    bytes += (a.bytes?.byteLength ?? 0) + Buffer.byteLength(a.url ?? "");
  return bytes;
}

/**
 * The live-state rows of the SQLite store, written only inside group-commit transactions. The
 * interaction rows follow the log: the events that change them are appended in the same
 * transaction, so the log and the rows can never disagree.
 */
export class LiveRows {
  constructor(private readonly statements: Statements) {}

  queue(sessionId: string): StoredQueueItem[] {
    return (this.statements.queueItems.all(sessionId) as QueueRow[]).map(queueItemFromRow);
  }

  queueItem(sessionId: string, itemId: string): (StoredQueueItem & { clientMessageId?: string }) | undefined {
    const row = this.statements.queueItem.get(sessionId, itemId) as QueueRow | undefined;
    if (!row) return undefined;
    const item = queueItemFromRow(row);
    return row.client_message_id ? { ...item, clientMessageId: row.client_message_id } : item;
  }

  interaction(interactionId: string): StoredInteraction | undefined {
    const row = this.statements.interactionRow.get(interactionId) as InteractionRow | undefined;
    return row ? interactionFromRow(row) : undefined;
  }

  turnInteractions(sessionId: string, turnId: string): StoredInteraction[] {
    return (this.statements.turnInteractionRows.all(sessionId, turnId) as InteractionRow[]).map(
      interactionFromRow,
    );
  }

  /** See `LiveStateStore.liveStatePage`; the caller runs it in one read. */
  page(after: string | null, limit: number, lease: (sessionId: string) => LeaseHolder | null): LiveStatePage {
    // each list is an index range scan; their merge is the page
    const queued = this.statements.queuedSessionsPage.all(after ?? "", limit) as string[];
    const parked = this.statements.parkedSessionsPage.all(after ?? "", limit) as string[];
    const working = this.statements.jobSessionsPage.all(after ?? "", limit) as string[];
    const ids = [...new Set([...queued, ...parked, ...working])].sort().slice(0, limit);
    const sessions: SessionLiveState[] = [];
    for (const sessionId of ids) {
      const header = this.statements.liveSessionHeader.get(sessionId) as
        | { owner: string; model: string; open_turn_id: string | null }
        | undefined;
      if (!header) continue;
      const interactions = (
        this.statements.pendingInteractionsOfSession.all(sessionId) as InteractionRow[]
      ).map((row) => interactionFromRow(row).interaction);
      const open = header.open_turn_id;
      sessions.push({
        sessionId,
        owner: header.owner,
        model: header.model,
        queue: this.queue(sessionId),
        interactions,
        parkedTurnId: open !== null && interactions.some((i) => i.turnId === open) ? open : null,
        jobs: this.statements.runningJobsOfSession.all(sessionId) as StoredJob[],
        lease: lease(sessionId),
      });
    }
    return { sessions, next: ids.length < limit ? null : (ids.at(-1) ?? null) };
  }

  pendingInTurn(sessionId: string, turnId: string): number {
    return this.statements.pendingInTurn.get(sessionId, turnId) as number;
  }

  /** Announces a session's whole queue (control deltas are snapshots, last wins). */
  queueChanged(batch: WriteBatch, sessionId: string, owner: string): void {
    batch.notifyLive({ kind: "queue", sessionId, owner, items: this.queue(sessionId) });
  }

  /** Keeps interaction rows in step with the events just inserted into the log. */
  afterEvent(batch: WriteBatch, owner: string, sessionId: string, logKey: string, event: SessionEvent): void {
    if (event.type === "interaction/requested") {
      const { interaction, body } = requestedInteraction(sessionId, event);
      const { interactionId, turnId, kind } = interaction;
      const row = [interactionId, sessionId, turnId, kind, body, event.at, logKey];
      // a fork copies its source's events: the interaction stays the source's, never a second one
      if (this.statements.insertInteraction.run(...row).changes === 0) return;
      batch.notifyLive({ kind: "interaction.requested", owner, interaction });
    } else if (event.type === "job/started") {
      const { jobId, turnId, label } = event.data;
      this.statements.insertJob.run(jobId, sessionId, turnId, label, event.at);
    } else if (event.type === "job/ended") {
      const { jobId, state } = event.data;
      // a fork's log ends the jobs it copied running: the job, the source's, is not ended by it
      this.statements.endJob.run(state, event.at, state, jobId, sessionId);
    } else if (event.type === "turn/end") {
      const { turnId } = event.data;
      const ids = this.statements.pendingIdsOfTurn.all(sessionId, turnId) as string[];
      if (ids.length === 0) return;
      this.statements.withdrawTurn.run(event.at, sessionId, turnId);
      for (const interactionId of ids)
        batch.notifyLive({ kind: "interaction.withdrawn", owner, sessionId, interactionId });
    }
  }

  /**
   * Everything of a deleted session goes with its log, its settled interactions and ended jobs with
   * the purger (found by no read from here on); watchers learn it from the notices.
   */
  forget(batch: WriteBatch, sessionId: string, owner: string): void {
    const pending = this.statements.pendingInteractionIds.all(sessionId) as string[];
    for (const interactionId of pending)
      batch.notifyLive({ kind: "interaction.withdrawn", owner, sessionId, interactionId });
    if ((this.statements.queueCount.get(sessionId) as number) > 0)
      batch.notifyLive({ kind: "queue", sessionId, owner, items: [] });
    this.statements.deleteQueue.run(sessionId);
    this.statements.deletePendingInteractions.run(sessionId);
    this.statements.deleteRunningJobs.run(sessionId);
    this.statements.deleteLease.run(sessionId);
  }
}
