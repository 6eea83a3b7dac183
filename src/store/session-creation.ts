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

/**
 * What a fork's copied prefix leaves running, closed in the fork as interrupted: the jobs it
 * started and did not end (they run on in the source alone, and nothing would ever end them in
 * the fork), then the turn still open at `atSeq`. None when the prefix left nothing running.
 * Each end says it is the fork's (`byFork`): a fork of this fork copies these ends, and its
 * readers could not tell them from a host stop's by anything else.
 */
export function forkedEnds(state: SessionState, copied: readonly TimedEvent[]): TimedEvent[] {
  const running = new Set<string>();
  for (const event of copied) {
    if (event.type === "job/started") running.add(event.data.jobId);
    else if (event.type === "job/ended") running.delete(event.data.jobId);
  }
  const ends: TimedEvent[] = [...running].map((jobId) => ({
    type: "job/ended",
    data: { jobId, state: "interrupted", byFork: true },
  }));
  const openTurn = state.projection.openTurnId;
  if (openTurn !== null)
    ends.push({ type: "turn/end", data: { turnId: openTurn, state: "interrupted", byFork: true } });
  return ends;
}
