import type { LastState, SessionHeader } from "../../protocol/index.js";
import { initialProjection, type ProjectionBase, type ProjectionState } from "./projection.js";

/** One session as the writer knows it: header, head of the log, and its projection. */
export interface SessionState {
  sessionId: string;
  owner: string;
  epoch: string;
  createdAt: number;
  forkOf: { sessionId: string; seq: number } | null;
  headSeq: number;
  /**
   * The key the current epoch's events and search rows are stored under: the session id, until a
   * clear moves the log to a fresh one (the old one's rows are purged afterwards, see SqlitePurger
   * and PgPurger).
   */
  logKey: string;
  /**
   * The data bytes of the log's events up to `headSeq` (the writer's; a state read from a row holds
   * the row's count, which may lag the head): what a clear or a delete counts out of the owner's usage.
   */
  dataBytes: number;
  base: ProjectionBase;
  projection: ProjectionState;
  /**
   * The projection as its row was last written (SQLite): a write is skipped when only `seq` moved
   * since (readers take the head from the log), and skips index upkeep when the list order held.
   */
  persisted: ProjectionState;
}

/** The joined `sessions` + `projections` row read by `sessionState`. */
export interface SessionStateRow {
  session_id: string;
  owner: string;
  epoch: string;
  created_at: number;
  fork_of_session: string | null;
  fork_of_seq: number | null;
  head_seq: number;
  /** The current log's key (SQLite; PostgreSQL from schema 16). */
  log_key?: string;
  /** The data bytes of the log's events up to `data_bytes_seq` (the SQLite writer's count). */
  data_bytes?: number;
  data_bytes_seq?: number;
  base_title: string;
  base_title_explicit: number;
  base_model: string;
  base_acked: number | null;
  title: string;
  title_explicit: number;
  model: string;
  last_prompt_at: number | null;
  updated_at: number;
  turn_count: number;
  blank: number;
  last_state: string;
  message_count: number;
  seq: number;
  open_turn_id: string | null;
  turn_has_text: number;
  pending_interactions: number;
  has_unseen_completion: number;
  completion_settled_at: number | null;
  acked_settled_at: number | null;
}

export function stateFromRow(row: SessionStateRow): SessionState {
  const base: ProjectionBase = {
    sessionId: row.session_id,
    owner: row.owner,
    epoch: row.epoch,
    createdAt: row.created_at,
    title: row.base_title,
    titleExplicit: row.base_title_explicit === 1,
    model: row.base_model,
    ackedSettledAt: row.base_acked,
  };
  const projection = projectionFromRow(row, row.head_seq);
  return {
    sessionId: row.session_id,
    owner: row.owner,
    epoch: row.epoch,
    createdAt: row.created_at,
    forkOf:
      row.fork_of_session === null ? null : { sessionId: row.fork_of_session, seq: row.fork_of_seq ?? 0 },
    headSeq: row.head_seq,
    logKey: row.log_key ?? row.session_id,
    dataBytes: row.data_bytes ?? 0,
    base,
    projection,
    persisted: projection,
  };
}

/** A `projections` row as SQLite returns it. */
export type ProjectionRow = Pick<
  SessionStateRow,
  | "session_id"
  | "owner"
  | "epoch"
  | "created_at"
  | "title"
  | "title_explicit"
  | "model"
  | "last_prompt_at"
  | "updated_at"
  | "turn_count"
  | "blank"
  | "last_state"
  | "message_count"
  | "seq"
  | "open_turn_id"
  | "turn_has_text"
  | "pending_interactions"
  | "has_unseen_completion"
  | "completion_settled_at"
  | "acked_settled_at"
>;

/**
 * A projection row as a state. `head`: the log's head seq, which a SQLite row's own `seq` may
 * lag (the row is not rewritten when only the head moved).
 */
export function projectionFromRow(row: ProjectionRow, head: number): ProjectionState {
  return {
    sessionId: row.session_id,
    owner: row.owner,
    title: row.title,
    model: row.model,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
    lastPromptAt: row.last_prompt_at,
    turnCount: row.turn_count,
    blank: row.blank === 1,
    lastState: row.last_state as LastState,
    messageCount: row.message_count,
    seq: head,
    epoch: row.epoch,
    openTurnId: row.open_turn_id,
    hasUnseenCompletion: row.has_unseen_completion === 1,
    completionSettledAt: row.completion_settled_at,
    titleExplicit: row.title_explicit === 1,
    turnHasText: row.turn_has_text === 1,
    pendingInteractions: row.pending_interactions,
    ackedSettledAt: row.acked_settled_at,
  };
}

/** Named parameters for `insertProjection` / `updateProjection`. */
export function projectionParams(row: ProjectionState) {
  return {
    sessionId: row.sessionId,
    owner: row.owner,
    epoch: row.epoch,
    title: row.title,
    titleExplicit: row.titleExplicit ? 1 : 0,
    model: row.model,
    createdAt: row.createdAt,
    lastPromptAt: row.lastPromptAt,
    updatedAt: row.updatedAt,
    turnCount: row.turnCount,
    blank: row.blank ? 1 : 0,
    lastState: row.lastState,
    messageCount: row.messageCount,
    seq: row.seq,
    openTurnId: row.openTurnId,
    turnHasText: row.turnHasText ? 1 : 0,
    pendingInteractions: row.pendingInteractions,
    hasUnseenCompletion: row.hasUnseenCompletion ? 1 : 0,
    completionSettledAt: row.completionSettledAt,
    ackedSettledAt: row.ackedSettledAt,
  };
}

export function headerOf(state: SessionState): SessionHeader {
  const header: SessionHeader = {
    sessionId: state.sessionId,
    title: state.projection.title,
    model: state.projection.model,
    createdAt: state.createdAt,
    epoch: state.epoch,
    owner: state.owner,
  };
  if (state.forkOf) header.forkOf = { ...state.forkOf };
  return header;
}

/**
 * Named parameters for `updateProjection`: the projection, and the log's data bytes as of its head
 * (the head is the writer's, which the projection's `seq` follows).
 */
export function projectionUpdateParams(row: ProjectionState, state: SessionState) {
  return { ...projectionParams(row), dataBytes: state.dataBytes, dataBytesSeq: state.headSeq };
}

/** Positional parameters for `updateProjectionProgress`, in its column order (the hot path). */
export function progressParams(row: ProjectionState, state: SessionState): unknown[] {
  return [
    row.title,
    row.titleExplicit ? 1 : 0,
    row.model,
    row.turnCount,
    row.blank ? 1 : 0,
    row.messageCount,
    row.seq,
    row.openTurnId,
    row.turnHasText ? 1 : 0,
    row.hasUnseenCompletion ? 1 : 0,
    row.completionSettledAt,
    row.ackedSettledAt,
    row.lastPromptAt,
    row.pendingInteractions,
    state.dataBytes,
    state.headSeq,
    row.sessionId,
  ];
}

/** A just-created session's state: empty log, the initial projection, nothing persisted yet. */
export function newSessionState(base: ProjectionBase, forkOf: SessionState["forkOf"]): SessionState {
  const projection = initialProjection(base);
  return {
    sessionId: base.sessionId,
    owner: base.owner,
    epoch: base.epoch,
    createdAt: base.createdAt,
    forkOf,
    headSeq: 0,
    logKey: base.sessionId,
    dataBytes: 0,
    base,
    projection,
    persisted: projection,
  };
}
