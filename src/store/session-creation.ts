import { randomBytes } from "node:crypto";
import type { SessionEvent } from "../../protocol/index.js";
import type { TimedEvent } from "./log-writer.js";
import { DEFAULT_TITLE, type ProjectionBase } from "./projection.js";
import type { SessionState } from "./session-state.js";
import type { CreateInput, ForkInput } from "./session-store.js";

/** Epochs are opaque to clients; 96 random bits make a reused one practically impossible. */
export function newEpoch(): string {
  return randomBytes(12).toString("base64url");
}

/** The new session's base and the `session/created` event that starts its log, for `create`. */
export function createdSession(
  input: CreateInput,
  at: number,
): { base: ProjectionBase; created: TimedEvent } {
  const data: { title?: string; model: string; origin?: string } = { model: input.model };
  if (input.title !== undefined) data.title = input.title;
  if (input.origin !== undefined) data.origin = input.origin;
  return {
    base: {
      sessionId: input.sessionId,
      owner: input.owner,
      epoch: newEpoch(),
      createdAt: at,
      title: input.title ?? DEFAULT_TITLE,
      titleExplicit: input.title !== undefined,
      model: input.model,
      ackedSettledAt: null,
    },
    created: { type: "session/created", data },
  };
}

/**
 * A fork's base (the source's title and model) and its log up to `atSeq`: its own
 * `session/created`, then the source's events as they were written (its `session/created` left out).
 */
export function forkedSession(
  input: ForkInput,
  source: SessionState,
  atSeq: number,
  sourceEvents: readonly SessionEvent[],
  at: number,
): { base: ProjectionBase; forkOf: { sessionId: string; seq: number }; events: TimedEvent[] } {
  const forkOf = { sessionId: input.sourceId, seq: atSeq };
  const { title, model } = source.projection;
  const events: TimedEvent[] = [{ type: "session/created", data: { forkOf, title, model }, at }];
  for (const event of sourceEvents)
    if (event.type !== "session/created")
      events.push({ type: event.type, data: event.data, at: event.at } as TimedEvent);
  return {
    base: {
      sessionId: input.targetId,
      owner: input.owner,
      epoch: newEpoch(),
      createdAt: at,
      title,
      titleExplicit: true,
      model,
      ackedSettledAt: null,
    },
    forkOf,
    events,
  };
}

/** The `turn/end` closing a fork's copied turn that was still open at `atSeq` (none when closed). */
export function forkedTurnEnd(state: SessionState): TimedEvent | null {
  const openTurn = state.projection.openTurnId;
  return openTurn === null ? null : { type: "turn/end", data: { turnId: openTurn, state: "interrupted" } };
}
