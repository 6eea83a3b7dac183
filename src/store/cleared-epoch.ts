import { initialProjection, type ProjectionBase } from "./projection.js";
import type { SessionState } from "./session-state.js";
import type { ClearOutcome } from "./session-store.js";

/**
 * Why a clear of `state` is refused on either store: the caller expected another epoch, or a turn
 * is still open (the new epoch starts with no turn, and the open one's interactions must be
 * settled before its log is left to the purger). Undefined: the clear goes ahead.
 */
export function clearRefusal(
  state: SessionState,
  expectedEpoch: string | undefined,
): Extract<ClearOutcome, { status: "epoch_mismatch" | "busy" }> | undefined {
  if (expectedEpoch !== undefined && expectedEpoch !== state.epoch) {
    return { status: "epoch_mismatch", epoch: state.epoch };
  }
  if (state.projection.openTurnId !== null) return { status: "busy" };
  return undefined;
}

/**
 * The key a cleared session's new epoch stores its log under. No session id holds ':'
 * (protocol/ids.ts), and an epoch is never reused, so no other log ever had it.
 */
export function clearedLogKey(sessionId: string, epoch: string): string {
  return `${sessionId}:${epoch}`;
}

/**
 * What the new epoch's projection begins from: the header as the session shows it now (title,
 * whether it was named, model), and no completion acked yet.
 */
export function clearedBase(state: SessionState, epoch: string): ProjectionBase {
  return {
    ...state.base,
    epoch,
    title: state.projection.title,
    titleExplicit: state.projection.titleExplicit,
    model: state.projection.model,
    ackedSettledAt: null,
  };
}

/** Moves the writer's view of a session into the epoch `base` begins: an empty log, its projection. */
export function enterEpoch(state: SessionState, base: ProjectionBase): void {
  state.epoch = base.epoch;
  state.headSeq = 0;
  state.base = base;
  state.projection = initialProjection(base);
}
