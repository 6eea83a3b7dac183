import type { Resolution } from "../../protocol/index.js";
import { decodeValue, encodeValue } from "./event-codec.js";
import { answerToSettled } from "./first-answer.js";
import type { WriteOperation } from "./group-commit.js";
import { type LiveRows, queuedBytes, queuedItem } from "./live-rows.js";
import type {
  EnqueueInput,
  EnqueueOutcome,
  QueueChangeOutcome,
  QueuedPromptInput,
  QueueEditOutcome,
  ResolveOutcome,
} from "./live-state-store.js";
import type { LogWriter } from "./log-writer.js";
import type { PromptRecord, QueuedText } from "./session-store.js";
import type { Statements } from "./sqlite-statements.js";

/**
 * The live-state writes as group-commit operations: each checks its preconditions inside the
 * shared transaction, writes the rows (and the log events they imply) and queues the notices.
 */
export class LiveStateOperations {
  constructor(
    private readonly writer: LogWriter,
    private readonly rows: LiveRows,
    private readonly statements: Statements,
    private readonly now: () => number,
  ) {}

  enqueue(input: EnqueueInput): WriteOperation<EnqueueOutcome> {
    return (batch) => {
      const state = this.writer.load(input.sessionId);
      if (state === "retired") return { status: "retired" };
      if (!state) return { status: "not_found" };
      const key = input.input.clientMessageId;
      if (key !== undefined) {
        const stored = this.statements.findPrompt.get(input.sessionId, key) as Uint8Array | undefined;
        if (stored) return { status: "duplicate", record: decodeValue<PromptRecord>(stored) };
      }
      const bytes = queuedBytes(input.input);
      const limits = input.limits;
      if (limits) {
        const items = this.statements.queueCount.get(input.sessionId) as number;
        if (items >= limits.maxItemsPerSession)
          return { status: "queue_full", limit: "items_per_session", max: limits.maxItemsPerSession };
        const held = this.statements.queuedBytesOfOwner.get(state.owner) as number;
        const refused = overOwnerBytes(held, bytes, limits.maxBytesPerOwner);
        if (refused) return refused;
      }
      const position = this.statements.queueNextPosition.get(input.sessionId) as number;
      this.statements.insertQueueItem.run(
        input.sessionId,
        input.itemId,
        position,
        key ?? null,
        encodeValue(input.input),
        bytes,
        input.queuedAt,
        state.owner,
      );
      if (key !== undefined) {
        const record: PromptRecord = { queued: true, itemId: input.itemId };
        this.statements.insertPrompt.run(input.sessionId, key, encodeValue(record));
      }
      for (const attachmentId of namedUploads(input.input))
        this.statements.linkAttachment.run(input.sessionId, attachmentId);
      this.rows.queueChanged(batch, input.sessionId, state.owner);
      return { status: "queued", item: queuedItem(input, state.owner) };
    };
  }

  /** The stored message shows what the operator typed last, so an edit replaces both texts. */
  edit(
    sessionId: string,
    itemId: string,
    text: string,
    maxBytesPerOwner?: number,
  ): WriteOperation<QueueEditOutcome> {
    return this.changeQueue<OwnerBytesRefusal>(sessionId, (owner) => {
      const item = this.rows.queueItem(sessionId, itemId);
      if (!item) return false;
      const edit = editedInput(item.input, text);
      if (maxBytesPerOwner !== undefined && edit.grows > 0) {
        const held = this.statements.queuedBytesOfOwner.get(owner) as number;
        const refused = overOwnerBytes(held, edit.grows, maxBytesPerOwner);
        if (refused) return refused;
      }
      this.statements.updateQueueInput.run(encodeValue(edit.input), edit.bytes, sessionId, itemId);
      return true;
    });
  }

  remove(sessionId: string, itemId: string): WriteOperation<QueueChangeOutcome> {
    return this.changeQueue(
      sessionId,
      () => this.statements.deleteQueueItem.run(sessionId, itemId).changes > 0,
    );
  }

  clear(sessionId: string): WriteOperation<QueueChangeOutcome> {
    return this.changeQueue(sessionId, () => {
      this.statements.deleteQueue.run(sessionId);
      return true;
    });
  }

  /**
   * Marks an item steered into a running turn and moves it first: the agent takes it (appending
   * it with `dequeue`), or, untaken when the turn ends, it is the next prompt to run.
   */
  steer(sessionId: string, itemId: string, turnId: string): WriteOperation<QueueChangeOutcome> {
    return this.changeQueue(sessionId, () => {
      const first = this.statements.queueFirstPosition.get(sessionId) as number;
      return this.statements.steerQueueItem.run(turnId, first, sessionId, itemId).changes > 0;
    });
  }

  resolve(interactionId: string, resolution: Resolution, at?: number): WriteOperation<ResolveOutcome> {
    return (batch) => {
      const stored = this.rows.interaction(interactionId);
      if (!stored) return { status: "not_found" };
      const settled = answerToSettled(stored, resolution);
      if (settled) return settled;
      const { sessionId, turnId } = stored.interaction;
      const state = this.writer.load(sessionId);
      if (!state || state === "retired") return { status: "not_found" };
      const when = at ?? this.now();
      this.statements.resolveInteraction.run(encodeValue(resolution), when, interactionId);
      const events = this.writer.appendEvents(
        batch,
        state,
        [{ type: "interaction/resolved", data: { interactionId, resolution } }],
        when,
      );
      batch.notify(sessionId, { kind: "append", epoch: state.epoch, events }, this.writer.snapshot(state));
      batch.notifyLive({
        kind: "interaction.resolved",
        owner: state.owner,
        sessionId,
        interactionId,
        resolution,
      });
      return {
        status: "resolved",
        interaction: stored.interaction,
        events,
        pendingInTurn: this.rows.pendingInTurn(sessionId, turnId),
      };
    };
  }

  /** `change` says whether the item was there (and changed), or why the change was refused. */
  private changeQueue<Refusal = never>(
    sessionId: string,
    change: (owner: string) => NoInfer<boolean | Refusal>,
  ): WriteOperation<QueueChangeOutcome | Refusal> {
    return (batch) => {
      const state = this.writer.load(sessionId);
      if (!state || state === "retired") return { status: "not_found" };
      const changed = change(state.owner);
      if (changed === false) return { status: "item_not_found" };
      if (changed !== true) return changed;
      this.rows.queueChanged(batch, sessionId, state.owner);
      return { status: "ok", items: this.rows.queue(sessionId) };
    };
  }
}

export type OwnerBytesRefusal = Extract<QueueEditOutcome, { status: "queue_full" }>;

/** Whether a queued prompt's text is still `read`, when given: an edit since changed it. */
export function stillAsRead(input: QueuedText, read: QueuedText | undefined): boolean {
  return read === undefined || (input.text === read.text && input.display === read.display);
}

/** A queued input with its text replaced (the display text goes: it showed the old one). */
export function editedInput(
  input: QueuedPromptInput,
  text: string,
): { input: QueuedPromptInput; bytes: number; grows: number } {
  const { display: _display, ...rest } = input;
  const edited = { ...rest, text };
  const bytes = queuedBytes(edited);
  return { input: edited, bytes, grows: bytes - queuedBytes(input) };
}

/**
 * The uploads a queued prompt names: they belong to its session from its enqueue on, as a started
 * prompt's do. Left unreferenced, they expired while it waited (an hour by default, shorter than
 * a turn parked on a person may wait), and its start then failed on every try, holding every
 * prompt queued behind it.
 */
export function namedUploads(input: QueuedPromptInput): string[] {
  return (input.attachments ?? []).flatMap((a) => (a.attachmentId !== undefined ? [a.attachmentId] : []));
}

/** The refusal of an edit that would take its owner's queued bytes (`held`) past the bound. */
export function overOwnerBytes(held: number, grows: number, max: number): OwnerBytesRefusal | undefined {
  return held + grows > max ? { status: "queue_full", limit: "bytes_per_owner", max } : undefined;
}
