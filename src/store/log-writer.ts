import type { NewEvent, SessionEvent } from "../../protocol/index.js";
import { clearedBase, clearedLogKey, enterEpoch } from "./cleared-epoch.js";
import type { EncodedRow } from "./encoded-event-arrays.js";
import { decodeValue } from "./event-codec.js";
import { EventRows } from "./event-rows.js";
import type { LiveRows } from "./live-rows.js";
import {
  copyProjection,
  foldEvent,
  initialProjection,
  onlySeqMoved,
  type ProjectionBase,
  projectEvent,
  publicProjection,
} from "./projection.js";
import type { SessionState, SessionStateRow } from "./session-state.js";
import {
  newSessionState,
  progressParams,
  projectionParams,
  projectionUpdateParams,
  stateFromRow,
} from "./session-state.js";
import type { Statements } from "./sqlite-statements.js";
import { storedEvent } from "./storable-data.js";
import { turnSearchDocument } from "./turn-search-document.js";
import type { WriteBatch } from "./write-batch.js";

/** An event to store; fork copies carry their own `at`, others take the append's. */
export type TimedEvent = NewEvent & { at?: number };

export interface StoredRow {
  seq: number;
  at: number;
  type: string;
  data: Uint8Array;
}

export function decodeRow(row: StoredRow): SessionEvent {
  return { seq: row.seq, at: row.at, type: row.type, data: decodeValue(row.data) } as SessionEvent;
}

/**
 * The log's write path, run only inside a group-commit transaction. It keeps the writer's view of
 * each session (head, epoch, projection) in a cache whose entries are written back once per
 * transaction; if a transaction fails the owner drops the cache, so the next one reloads what is
 * actually on disk and the head resumes at the last committed seq.
 */
export class LogWriter {
  private readonly cache = new Map<string, SessionState | "retired">();
  private readonly eventRows: EventRows;

  constructor(
    private readonly statements: Statements,
    private readonly liveRows: LiveRows,
    private readonly maxCached = 20_000,
  ) {
    this.eventRows = new EventRows(statements);
  }

  /** Called between transactions only: a state loaded in a transaction must stay cached until COMMIT. */
  trimCache(): void {
    if (this.cache.size > this.maxCached) this.cache.clear();
  }

  dropCache(): void {
    this.cache.clear();
  }

  /**
   * The session as of the last COMMIT, when this writer holds it: every write to a session's
   * header, head and projection goes through this cache (and `writeBack` writes it out), and a
   * failed transaction drops it, so between transactions it is what the database holds. Reads use
   * it instead of querying; they run synchronously, never inside a transaction.
   */
  committed(sessionId: string): SessionState | undefined {
    const cached = this.cache.get(sessionId);
    return cached === "retired" ? undefined : cached;
  }

  load(sessionId: string): SessionState | "retired" | null {
    const cached = this.cache.get(sessionId);
    if (cached !== undefined) return cached;
    const row = this.statements.sessionState.get(sessionId) as SessionStateRow | undefined;
    if (row) {
      const state = stateFromRow(row);
      // the row's count lags its head by what appends that left the projection alone added
      if ((row.data_bytes_seq ?? 0) < state.headSeq)
        state.dataBytes += this.statements.tailDataBytes.get(state.logKey, row.data_bytes_seq ?? 0) as number;
      this.cache.set(sessionId, state);
      return state;
    }
    if (this.statements.tombstone.get(sessionId) !== undefined) {
      this.cache.set(sessionId, "retired");
      return "retired";
    }
    return null;
  }

  /** Inserts the header and an empty projection; the caller appends `session/created`. */
  insertSession(batch: WriteBatch, base: ProjectionBase, forkOf: SessionState["forkOf"]): SessionState {
    this.statements.insertSession.run({
      sessionId: base.sessionId,
      owner: base.owner,
      epoch: base.epoch,
      createdAt: base.createdAt,
      forkOfSession: forkOf?.sessionId ?? null,
      forkOfSeq: forkOf?.seq ?? null,
      title: base.title,
      titleExplicit: base.titleExplicit ? 1 : 0,
      model: base.model,
    });
    const state = newSessionState(base, forkOf);
    this.statements.insertProjection.run(projectionParams(state.projection));
    this.cache.set(base.sessionId, state);
    batch.touch(state);
    return state;
  }

  /**
   * Appends at head+1…, indexing text and folding the projection (the host shapes user messages).
   * `rows`, if given, receives each event as stored, for a commit notice to carry.
   */
  appendEvents(
    batch: WriteBatch,
    state: SessionState,
    events: readonly TimedEvent[],
    at: number,
    rows?: EncodedRow[],
  ): SessionEvent[] {
    const stored: SessionEvent[] = [];
    // one copy of the row for the whole append; rows handed out earlier are never changed
    const projection = copyProjection(state.projection);
    state.projection = projection;
    let dataBytes = 0;
    try {
      for (const input of events) {
        const { event, bytes } = storedEvent(state.headSeq + 1, input, at);
        dataBytes += bytes.length;
        this.eventRows.add(state.logKey, event.seq, event.type, event.at, bytes);
        rows?.push([event.seq, event.at, event.type, bytes]);
        state.headSeq = event.seq;
        foldEvent(projection, event);
        // indexing a turn at its end reads the turn's events back
        if (event.type === "turn/end") this.eventRows.flush();
        this.afterInsert(state, event);
        this.liveRows.afterEvent(batch, state.owner, state.sessionId, state.logKey, event);
        stored.push(event);
      }
      this.eventRows.flush();
    } catch (err) {
      // rows of an append that failed part way are never inserted by a later one
      this.eventRows.discard();
      throw err;
    }
    batch.appendedEvents += stored.length;
    state.dataBytes += dataBytes;
    batch.ownerDataBytes.add(state.owner, dataBytes);
    batch.touch(state);
    return stored;
  }

  /**
   * Writes the projection of every touched session; runs last in each transaction. A row whose
   * projection moved only its head (`seq`) is left as it is: the head is the log's (`max(seq)`),
   * which every read of a row takes instead, so a stream of deltas writes only its events. A row
   * written holds the log's data bytes as of the head it was written at (`data_bytes_seq`).
   * Then each owner's stored data moves by what the transaction added and removed: one row per
   * owner, all in one statement, not one write per append.
   */
  writeBack(batch: WriteBatch): void {
    for (const state of batch.dirty.values()) {
      const { projection, persisted } = state;
      if (onlySeqMoved(persisted, projection)) continue;
      const listOrderUnchanged =
        projection.updatedAt === persisted.updatedAt &&
        projection.lastState === persisted.lastState &&
        projection.epoch === persisted.epoch;
      if (listOrderUnchanged)
        this.statements.updateProjectionProgress.run(...progressParams(projection, state));
      else this.statements.updateProjection.run(projectionUpdateParams(projection, state));
      state.persisted = projection;
    }
    const moved = batch.ownerDataBytes.moved();
    if (moved.length > 0) this.statements.addOwnersStoredBytes.run(JSON.stringify(moved));
  }

  /**
   * Starts a new epoch whose projection begins from the current header, its log under a fresh key.
   * The old epoch's events and search rows stay where they are, under a key no session has any
   * more, and are deleted by the purger afterwards (see SqlitePurger): the clear costs the same
   * however long the log was. Its data leaves the owner's usage here.
   */
  resetEpoch(batch: WriteBatch, state: SessionState, epoch: string, at: number): void {
    this.abandonLog(batch, state, null, at);
    state.logKey = clearedLogKey(state.sessionId, epoch);
    state.dataBytes = 0;
    this.statements.moveLog.run(state.logKey, state.sessionId);
    // a clear is refused while a turn is open, so its interactions are settled: they stay under the
    // old key for the purger, found by no read (migration 12); the queue stays
    this.statements.deletePendingInteractions.run(state.sessionId);
    const base = clearedBase(state, epoch);
    this.statements.resetEpoch.run({
      sessionId: state.sessionId,
      epoch,
      title: base.title,
      titleExplicit: base.titleExplicit ? 1 : 0,
      model: base.model,
    });
    enterEpoch(state, base);
    batch.touch(state);
  }

  /**
   * Removes the session and writes its tombstone. Its log, search rows, settled interactions, prompt
   * keys, ended jobs, dismissals and attachments are left to the purger (see `resetEpoch`); their
   * bytes leave the owner's usage here.
   */
  retire(batch: WriteBatch, state: SessionState, at: number): void {
    const { sessionId, owner } = state;
    this.liveRows.forget(batch, sessionId, owner);
    this.abandonLog(batch, state, sessionId, at);
    batch.ownerDataBytes.add(owner, -(this.statements.sessionAttachmentBytes.get(sessionId) as number));
    this.statements.deleteProjection.run(sessionId);
    this.statements.deleteSession.run(sessionId);
    this.statements.insertTombstone.run(sessionId, at);
    this.cache.set(sessionId, "retired");
    batch.forget(sessionId);
  }

  setAcked(batch: WriteBatch, state: SessionState, ackedSettledAt: number): void {
    this.statements.setAcked.run(ackedSettledAt, state.sessionId);
    state.base = { ...state.base, ackedSettledAt };
    batch.touch(state);
  }

  /** Recomputes the projection from the log with the same fold the incremental path uses. */
  rebuild(batch: WriteBatch, state: SessionState): void {
    let projection = initialProjection(state.base);
    let dataBytes = 0;
    for (const row of this.statements.allEvents.iterate(state.logKey) as Iterable<StoredRow>) {
      projection = projectEvent(projection, decodeRow(row));
      dataBytes += row.data.byteLength;
    }
    state.projection = projection;
    state.dataBytes = dataBytes;
    batch.touch(state);
  }

  snapshot(state: SessionState) {
    return publicProjection(state.projection);
  }

  /**
   * Hands the log's key to the purger, with the session's attachments when `attachmentsOf` (a
   * delete), counting its data out of the owner's usage.
   */
  private abandonLog(batch: WriteBatch, state: SessionState, attachmentsOf: string | null, at: number): void {
    batch.ownerDataBytes.add(state.owner, -state.dataBytes);
    this.statements.insertPurge.run(state.logKey, attachmentsOf, state.owner, at);
    batch.purges += 1;
  }

  private afterInsert(state: SessionState, event: SessionEvent): void {
    if (event.type === "user/message") {
      for (const attachment of event.data.attachments) {
        if (attachment.attachmentId)
          this.statements.linkAttachment.run(state.sessionId, attachment.attachmentId);
      }
      if (!event.data.hidden && !event.data.meta.incognito)
        this.index(state.logKey, event.seq, event.data.text);
    } else if (event.type === "turn/end") {
      this.indexTurn(state.logKey, event.data.turnId);
    }
  }

  /** At `turn/end`, the turn's assistant text is indexed as one document (see `turnSearchDocument`). */
  private indexTurn(logKey: string, turnId: string): void {
    const startSeq = (this.statements.lastTurnStart.get(logKey) as number | undefined) ?? 0;
    const prompt = this.statements.turnPrompt.get(logKey, startSeq) as Uint8Array | undefined;
    const deltas = () => this.statements.turnDeltas.iterate(logKey, startSeq) as Iterable<StoredRow>;
    const document = turnSearchDocument(turnId, prompt, deltas);
    if (document) this.index(logKey, document.seq, document.text);
  }

  /** Search rows are stored under the log's key, so a clear leaves them to the purger with it. */
  private index(logKey: string, seq: number, text: string): void {
    if (text.trim().length === 0) return;
    const docId = this.statements.insertSearchDoc.run(logKey, seq).lastInsertRowid;
    this.statements.insertSearchText.run(docId, text);
  }
}
