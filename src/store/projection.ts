import type { SessionEvent } from "../../protocol/index.js";
import type { SessionProjection } from "./session-store.js";

/** Title of a session that was never named and has no operator message yet. */
export const DEFAULT_TITLE = "New chat";
/** A derived title is the first operator message, on one line, cut to this many characters. */
export const DERIVED_TITLE_CHARS = 80;

/**
 * The projection row plus the bookkeeping the fold needs. Incremental updates and
 * `rebuildProjections()` both run `projectEvent`, so the two cannot disagree.
 */
export interface ProjectionState extends SessionProjection {
  /** Set by an explicit title at create or by a rename; a derived title never overrides it. */
  titleExplicit: boolean;
  /** The open turn already counted its assistant message. */
  turnHasText: boolean;
  /**
   * Interactions of the open turn still waiting for an answer: a step's approvals are asked all at
   * once, and the turn waits on the operator until the last of them is answered.
   */
  pendingInteractions: number;
  /** Newest completion an ack covered (acks are not events, so this travels with the base). */
  ackedSettledAt: number | null;
}

/** What the projection of an epoch starts from: the header as it stood when the epoch began. */
export interface ProjectionBase {
  sessionId: string;
  owner: string;
  epoch: string;
  createdAt: number;
  title: string;
  titleExplicit: boolean;
  model: string;
  ackedSettledAt: number | null;
}

export function initialProjection(base: ProjectionBase): ProjectionState {
  return {
    sessionId: base.sessionId,
    owner: base.owner,
    title: base.title,
    model: base.model,
    createdAt: base.createdAt,
    updatedAt: base.createdAt,
    lastPromptAt: null,
    turnCount: 0,
    blank: true,
    lastState: "idle",
    messageCount: 0,
    seq: 0,
    epoch: base.epoch,
    openTurnId: null,
    hasUnseenCompletion: false,
    completionSettledAt: null,
    titleExplicit: base.titleExplicit,
    turnHasText: false,
    pendingInteractions: 0,
    ackedSettledAt: base.ackedSettledAt,
  };
}

/**
 * Folds one committed event into the row. Rules:
 * - title: explicit (create or rename) wins; otherwise the first visible operator message, cut to
 *   80 characters; otherwise "New chat".
 * - `lastPromptAt`: newest `user/message` with `source:"user"`; `updatedAt = max(createdAt, lastPromptAt)`.
 * - `blank`: no operator (`source:"user"`) message yet.
 * - `messageCount`: every `user/message`, plus one per turn that produced assistant text.
 * - `lastState`: `working` after `turn/start`, `input-required` while any interaction of the open
 *   turn waits (until the last of them is resolved), then the state of `turn/end`; each `turn/end`
 *   marks an unseen completion settled at its `at`.
 */
export function projectEvent(row: ProjectionState, event: SessionEvent): ProjectionState {
  const next = copyProjection(row);
  foldEvent(next, event);
  return next;
}

/**
 * `projectEvent` applied to `next` itself: an append of many events copies the row once and
 * folds each event into that copy, which nothing else has seen yet.
 */
export function foldEvent(next: ProjectionState, event: SessionEvent): void {
  next.seq = event.seq;
  switch (event.type) {
    case "session/created":
      if (event.data.title !== undefined) {
        next.title = event.data.title;
        next.titleExplicit = true;
      }
      if (event.data.model !== undefined) next.model = event.data.model;
      break;
    case "session/renamed":
      next.title = event.data.title;
      next.titleExplicit = true;
      break;
    case "session/model":
      next.model = event.data.model;
      break;
    case "turn/start":
      next.turnCount += 1;
      next.openTurnId = event.data.turnId;
      next.turnHasText = false;
      next.pendingInteractions = 0;
      next.lastState = "working";
      break;
    case "user/message":
      next.messageCount += 1;
      if (event.data.source === "user") {
        if (next.blank && !next.titleExplicit && !event.data.hidden) {
          const derived = deriveTitle(event.data.text);
          if (derived) next.title = derived;
        }
        next.blank = false;
        next.lastPromptAt = event.at;
        next.updatedAt = Math.max(next.createdAt, event.at);
      }
      break;
    case "assistant/delta":
      if (next.openTurnId !== null && !next.turnHasText && event.data.text.length > 0) {
        next.turnHasText = true;
        next.messageCount += 1;
      }
      break;
    case "interaction/requested":
      if (next.openTurnId !== null) {
        next.pendingInteractions += 1;
        next.lastState = "input-required";
      }
      break;
    case "interaction/resolved":
      if (next.openTurnId !== null && next.pendingInteractions > 0) {
        next.pendingInteractions -= 1;
        if (next.pendingInteractions === 0 && next.lastState === "input-required") next.lastState = "working";
      }
      break;
    case "turn/end":
      next.lastState = event.data.state;
      next.openTurnId = null;
      next.turnHasText = false;
      next.pendingInteractions = 0;
      next.completionSettledAt = event.at;
      next.hasUnseenCompletion = !(next.ackedSettledAt !== null && next.ackedSettledAt >= event.at);
      break;
    default:
      break;
  }
}

/**
 * An ack covers the completion the client saw; it is ignored when a newer completion has settled
 * since, so a stale ack cannot hide it. The row comes back as it was (nothing to write, nobody to
 * tell) unless the ack changes it: every tab of a session acks the same completion.
 */
export function applyAck(row: ProjectionState, completionSettledAt: number): ProjectionState {
  if (row.completionSettledAt === null || completionSettledAt < row.completionSettledAt) return row;
  if (row.ackedSettledAt === row.completionSettledAt && !row.hasUnseenCompletion) return row;
  const next = copyProjection(row);
  next.hasUnseenCompletion = false;
  next.ackedSettledAt = row.completionSettledAt;
  return next;
}

/**
 * A copy with every field named, in `initialProjection`'s order: every row then has one shape. A
 * spread copied rows of several shapes (read from the database, folded, acked) on V8's slow path,
 * 3% of the CPU of a store append, and made the field reads of every fold megamorphic.
 */
export function copyProjection(row: ProjectionState): ProjectionState {
  return {
    sessionId: row.sessionId,
    owner: row.owner,
    title: row.title,
    model: row.model,
    createdAt: row.createdAt,
    updatedAt: row.updatedAt,
    lastPromptAt: row.lastPromptAt,
    turnCount: row.turnCount,
    blank: row.blank,
    lastState: row.lastState,
    messageCount: row.messageCount,
    seq: row.seq,
    epoch: row.epoch,
    openTurnId: row.openTurnId,
    hasUnseenCompletion: row.hasUnseenCompletion,
    completionSettledAt: row.completionSettledAt,
    titleExplicit: row.titleExplicit,
    turnHasText: row.turnHasText,
    pendingInteractions: row.pendingInteractions,
    ackedSettledAt: row.ackedSettledAt,
  };
}

/**
 * Whether `after` differs from `before` only in `seq`: what an event that changes nothing a list
 * shows (an assistant delta) leaves, so the stores need not rewrite the row for it. It runs for
 * every session of every transaction, so each field is compared by name (a loop over the field
 * names is a keyed lookup per field, several times the cost); `projection-copy.test.ts` fails if a
 * field of `ProjectionState` is left out.
 */
export function onlySeqMoved(before: ProjectionState, after: ProjectionState): boolean {
  return (
    before.sessionId === after.sessionId &&
    before.owner === after.owner &&
    before.title === after.title &&
    before.model === after.model &&
    before.createdAt === after.createdAt &&
    before.updatedAt === after.updatedAt &&
    before.lastPromptAt === after.lastPromptAt &&
    before.turnCount === after.turnCount &&
    before.blank === after.blank &&
    before.lastState === after.lastState &&
    before.messageCount === after.messageCount &&
    before.epoch === after.epoch &&
    before.openTurnId === after.openTurnId &&
    before.hasUnseenCompletion === after.hasUnseenCompletion &&
    before.completionSettledAt === after.completionSettledAt &&
    before.titleExplicit === after.titleExplicit &&
    before.turnHasText === after.turnHasText &&
    before.pendingInteractions === after.pendingInteractions &&
    before.ackedSettledAt === after.ackedSettledAt
  );
}

export function publicProjection(row: ProjectionState): SessionProjection {
  return {
    sessionId: row.sessionId,
    owner: row.owner,
    title: row.title,
    model: row.model,
    createdAt: row.createdAt,
    updatedAt: row.updatedAt,
    lastPromptAt: row.lastPromptAt,
    turnCount: row.turnCount,
    blank: row.blank,
    lastState: row.lastState,
    messageCount: row.messageCount,
    seq: row.seq,
    epoch: row.epoch,
    openTurnId: row.openTurnId,
    hasUnseenCompletion: row.hasUnseenCompletion,
    completionSettledAt: row.completionSettledAt,
  };
}

function deriveTitle(text: string): string {
  const oneLine = text.replace(/\s+/g, " ").trim();
  return Array.from(oneLine).slice(0, DERIVED_TITLE_CHARS).join("").trimEnd();
}
