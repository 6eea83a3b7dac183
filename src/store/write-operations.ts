import type { NewEvent } from "../../protocol/index.js";
import { clearRefusal } from "./cleared-epoch.js";
import type { EncodedRow } from "./encoded-event-arrays.js";
import { decodeValue, encodeValue } from "./event-codec.js";
import type { WriteOperation } from "./group-commit.js";
import { heldElsewhere, leaseIsCurrent } from "./lease-rules.js";
import type { LiveRows } from "./live-rows.js";
import { stillAsRead } from "./live-state-operations.js";
import { decodeRow, type LogWriter, type StoredRow } from "./log-writer.js";
import { withoutEndsOfClosedTurns } from "./open-turn-ends.js";
import { applyAck } from "./projection.js";
import { promptRecordAfterAppend } from "./prompt-record.js";
import { createdSession, forkedEnds, forkedSession, newEpoch } from "./session-creation.js";
import { headerOf } from "./session-state.js";
import type {
  AppendOptions,
  AppendOutcome,
  ClearOutcome,
  CreateInput,
  CreateOutcome,
  ForkInput,
  ForkOutcome,
  PromptRecord,
} from "./session-store.js";
import type { SqliteLeaseOperations } from "./sqlite-lease-operations.js";
import type { Statements } from "./sqlite-statements.js";

/**
 * The store's writes as group-commit operations. Each runs synchronously inside the shared
 * transaction, checks its preconditions there (so the check and the write are atomic), and
 * returns a result value for every expected refusal.
 */
export class WriteOperations {
  constructor(
    private readonly writer: LogWriter,
    private readonly statements: Statements,
    private readonly liveRows: LiveRows,
    private readonly leases: SqliteLeaseOperations,
    private readonly now: () => number,
  ) {}

  create(input: CreateInput): WriteOperation<CreateOutcome> {
    return (batch) => {
      const existing = this.writer.load(input.sessionId);
      if (existing === "retired") return { status: "retired" };
      if (existing) return { status: "exists" };
      const full = this.ownerFull(input.owner, input.maxOwnerSessions);
      if (full) return full;
      const { base, created } = createdSession(input, input.at ?? this.now());
      const state = this.writer.insertSession(batch, base, null);
      const events = this.writer.appendEvents(batch, state, [created], base.createdAt);
      batch.notify(
        state.sessionId,
        { kind: "create", epoch: state.epoch, events },
        this.writer.snapshot(state),
      );
      return { status: "created", header: headerOf(state), events };
    };
  }

  append(sessionId: string, events: NewEvent[], options: AppendOptions = {}): WriteOperation<AppendOutcome> {
    return (batch) => {
      const state = this.writer.load(sessionId);
      if (state === "retired") return { status: "retired" };
      if (!state) return { status: "not_found" };
      if (options.expectedEpoch !== undefined && options.expectedEpoch !== state.epoch) {
        return { status: "epoch_mismatch", epoch: state.epoch };
      }
      const fence = options.fence;
      if (fence && !leaseIsCurrent(this.leases.row(sessionId), fence, this.now()))
        return { status: "fenced" };
      const prompt = options.prompt;
      if (prompt) {
        const stored = this.statements.findPrompt.get(sessionId, prompt.clientMessageId) as
          | Uint8Array
          | undefined;
        if (stored) return { status: "duplicate", record: decodeValue<PromptRecord>(stored) };
      }
      const dequeued = options.dequeue && this.liveRows.queueItem(sessionId, options.dequeue.itemId);
      if (options.dequeue && !(dequeued && stillAsRead(dequeued.input, options.dequeue.read)))
        return { status: "queue_item_gone" };
      const at = options.at ?? this.now();
      const stored: EncodedRow[] = [];
      const written = withoutEndsOfClosedTurns(state.projection.openTurnId, events);
      const appended = this.writer.appendEvents(batch, state, written, at, stored);
      if (options.dequeue && dequeued) {
        this.statements.deleteQueueItem.run(sessionId, dequeued.itemId);
        const message = appended.find((event) => event.type === "user/message");
        // a retry of the queued prompt now answers with the turn it became, never a stale itemId
        if (dequeued.clientMessageId !== undefined) {
          const started: PromptRecord = { queued: false, turnId: options.dequeue.turnId };
          if (message) started.seq = message.seq;
          this.statements.updatePrompt.run(encodeValue(started), sessionId, dequeued.clientMessageId);
        }
        this.liveRows.queueChanged(batch, sessionId, state.owner);
      }
      if (prompt) {
        const record = promptRecordAfterAppend(prompt.record, appended);
        this.statements.insertPrompt.run(sessionId, prompt.clientMessageId, encodeValue(record));
      }
      if (appended.length > 0) {
        batch.notify(
          sessionId,
          { kind: "append", epoch: state.epoch, events: appended, stored },
          this.writer.snapshot(state),
        );
      }
      return { status: "appended", epoch: state.epoch, events: appended };
    };
  }

  clear(sessionId: string, expectedEpoch: string | undefined): WriteOperation<ClearOutcome> {
    return (batch) => {
      const state = this.writer.load(sessionId);
      if (state === "retired") return { status: "retired" };
      if (!state) return { status: "not_found" };
      const refused = clearRefusal(state, expectedEpoch);
      if (refused) return refused;
      this.writer.resetEpoch(batch, state, newEpoch(), this.now());
      batch.notify(sessionId, { kind: "clear", epoch: state.epoch }, this.writer.snapshot(state));
      return { status: "cleared", epoch: state.epoch };
    };
  }

  delete(
    sessionId: string,
  ): WriteOperation<{ status: "deleted" } | { status: "not_found" } | { status: "retired" }> {
    return (batch) => {
      const state = this.writer.load(sessionId);
      if (state === "retired") return { status: "retired" };
      if (!state) return { status: "not_found" };
      this.writer.retire(batch, state, this.now());
      batch.notify(sessionId, { kind: "delete" }, null);
      return { status: "deleted" };
    };
  }

  /**
   * The fork's seq 1 records its lineage; the source's events up to `atSeq` follow, re-sequenced
   * (its own `session/created` is not copied). An `atSeq` past the source's head forks nothing. A prefix
   * that ends inside a turn gets that turn closed as interrupted, and so do the jobs it leaves
   * running (they run on in the source only). The source is only read.
   */
  fork(input: ForkInput): WriteOperation<ForkOutcome> {
    return (batch) => {
      const source = this.writer.load(input.sourceId);
      if (source === "retired") return { status: "source_retired" };
      if (!source) return { status: "source_not_found" };
      if (input.atSeq !== undefined && input.atSeq > source.headSeq)
        return { status: "seq_past_head", headSeq: source.headSeq };
      const existing = this.writer.load(input.targetId);
      if (existing === "retired") return { status: "retired" };
      if (existing) return { status: "exists" };
      const full = this.ownerFull(input.owner, input.maxOwnerSessions);
      if (full) return full;
      const atSeq = Math.max(0, input.atSeq ?? source.headSeq);
      const { maxDataBytes, maxEvents } = input;
      if (maxEvents !== undefined && atSeq > maxEvents)
        return { status: "too_large", maxDataBytes: maxDataBytes ?? 0 };
      if (maxDataBytes !== undefined && this.prefixPasses(source.logKey, atSeq, maxDataBytes))
        return { status: "too_large", maxDataBytes };
      const at = input.at ?? this.now();
      const copied = (this.statements.eventsRange.all(source.logKey, 1, atSeq) as StoredRow[]).map(decodeRow);
      const { base, forkOf, events } = forkedSession(input, source, atSeq, copied, at);
      const state = this.writer.insertSession(batch, base, forkOf);
      const stored = this.writer.appendEvents(batch, state, events, at);
      const ends = forkedEnds(state, events);
      if (ends.length > 0) stored.push(...this.writer.appendEvents(batch, state, ends, at));
      batch.notify(
        state.sessionId,
        { kind: "create", epoch: state.epoch, events: stored },
        this.writer.snapshot(state),
      );
      return { status: "created", header: headerOf(state), events: stored };
    };
  }

  /**
   * Whether the first `atSeq` events of the session hold more than `max` bytes of data: summed
   * only until they pass it, so a refusal costs what the bound does, however long the log is.
   */
  private prefixPasses(logKey: string, atSeq: number, max: number): boolean {
    let bytes = 0;
    for (const length of this.statements.prefixDataLengths.iterate(logKey, atSeq) as Iterable<number>) {
      bytes += length;
      if (bytes > max) return true;
    }
    return false;
  }

  ack(
    sessionId: string,
    completionSettledAt: number,
  ): WriteOperation<{ status: "ok"; hasUnseenCompletion: boolean } | { status: "not_found" }> {
    return (batch) => {
      const state = this.writer.load(sessionId);
      if (!state || state === "retired") return { status: "not_found" };
      const acked = applyAck(state.projection, completionSettledAt);
      if (acked !== state.projection && acked.ackedSettledAt !== null) {
        state.projection = acked;
        this.writer.setAcked(batch, state, acked.ackedSettledAt);
        batch.notify(sessionId, { kind: "meta" }, this.writer.snapshot(state));
      }
      return { status: "ok", hasUnseenCompletion: state.projection.hasUnseenCompletion };
    };
  }

  recordPrompt(sessionId: string, clientMessageId: string, record: PromptRecord): WriteOperation<void> {
    return () => {
      this.statements.insertPrompt.run(sessionId, clientMessageId, encodeValue(record));
    };
  }

  /** See `SessionStore.interruptOpenTurns`: skips sessions whose lease another host holds. */
  interruptOpenTurns(at: number, hostId?: string): WriteOperation<string[]> {
    return (batch) => {
      const closed: string[] = [];
      const now = this.now();
      const jobSessions = (this.statements.runningJobs.all() as { sessionId: string }[]).map(
        (j) => j.sessionId,
      );
      // (turns waiting on a person are not selected: their answer resumes them, `continueTurn`)
      const turnSessions = this.statements.openTurns.all() as string[];
      for (const sessionId of [...new Set([...jobSessions, ...turnSessions])].sort()) {
        if (heldElsewhere(this.leases.row(sessionId), hostId, now)) continue;
        const state = this.writer.load(sessionId);
        if (!state || state === "retired") continue;
        // jobs outlive turns, so they are ended too: each with an event the transcript shows
        if (this.leases.closeRunningWork(batch, state, at) !== null) closed.push(sessionId);
      }
      return closed;
    };
  }

  /**
   * Row-only: progress is not an event (there may be many), the job's end is. Announced, so other
   * control streams show it.
   */
  setJobProgress(
    jobId: string,
    progress: number,
  ): WriteOperation<{ status: "ok" } | { status: "not_found" }> {
    return (batch) => {
      if (this.statements.setJobProgress.run(progress, jobId).changes === 0) return { status: "not_found" };
      const job = this.statements.jobSession.get(jobId) as { sessionId: string; owner: string };
      batch.notifyLive({ kind: "job.progress", owner: job.owner, sessionId: job.sessionId, jobId, progress });
      return { status: "ok" };
    };
  }

  /** Every projection folded again from its log, and every owner's stored bytes counted again. */
  rebuildProjections(): WriteOperation<void> {
    return (batch) => {
      for (const sessionId of this.statements.allSessionIds.all() as string[]) {
        const state = this.writer.load(sessionId);
        if (state && state !== "retired") this.writer.rebuild(batch, state);
      }
      this.statements.clearOwnerUsage.run();
      this.statements.countOwnerUsage.run();
      // the count read this transaction's earlier appends too: their deltas must not be added again
      batch.ownerDataBytes.clear();
    };
  }

  /** The refusal when `owner` already holds `max` live sessions (every projection row is one). */
  private ownerFull(
    owner: string,
    max: number | undefined,
  ): { status: "too_many_sessions"; max: number } | null {
    if (max === undefined) return null;
    const held = (this.statements.ownerSessions.get(owner) as { n: number }).n;
    return held >= max ? { status: "too_many_sessions", max } : null;
  }
}
