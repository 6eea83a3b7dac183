import { type Resolution, SessionmuxError } from "../../protocol/index.js";

/** Turns an expected store outcome that refuses the call into the §7 error the caller sees. */
export function refusal(
  sessionId: string,
  outcome:
    | { status: "not_found" }
    | { status: "retired" }
    | { status: "epoch_mismatch"; epoch: string }
    | { status: "busy" }
    | { status: "exists" }
    | { status: "queue_full"; limit: "items_per_session" | "bytes_per_owner"; max: number },
): SessionmuxError {
  switch (outcome.status) {
    case "queue_full":
      return new SessionmuxError(
        "queue_full",
        outcome.limit === "items_per_session"
          ? `session ${sessionId} already has ${outcome.max} queued prompts; wait for them to run or remove some`
          : `your queued prompts hold the most bytes allowed (${outcome.max}); wait for them to run or remove some`,
        { data: { sessionId, limit: outcome.limit, max: outcome.max } },
      );
    case "not_found":
      return notFound(sessionId);
    case "retired":
      return new SessionmuxError(
        "session_retired",
        `session ${sessionId} was deleted; create a new session`,
        {
          data: { sessionId },
        },
      );
    case "epoch_mismatch":
      return new SessionmuxError("epoch_mismatch", `session ${sessionId} is at another epoch; reload it`, {
        data: { sessionId, epoch: outcome.epoch },
      });
    case "busy":
      return new SessionmuxError(
        "session_busy",
        `session ${sessionId} is running a turn; cancel it or wait`,
        {
          data: { sessionId },
        },
      );
    case "exists":
      return new SessionmuxError("session_exists", `session ${sessionId} already exists; pick another id`, {
        data: { sessionId },
      });
  }
}

/** Also the answer for another principal's session: it must read exactly like a missing one. */
export function notFound(sessionId: string): SessionmuxError {
  return new SessionmuxError("session_not_found", `no session ${sessionId}`, { data: { sessionId } });
}

export function attachmentNotFound(attachmentId: string): SessionmuxError {
  return new SessionmuxError("attachment_not_found", `no attachment ${attachmentId}`, {
    data: { attachmentId },
  });
}

export function interactionNotFound(interactionId: string): SessionmuxError {
  return new SessionmuxError("interaction_not_found", `no pending interaction ${interactionId}`, {
    data: { interactionId },
  });
}

/** A different answer than the one that won; `resolution` is the winner's. */
export function interactionAlreadyResolved(interactionId: string, resolution: Resolution): SessionmuxError {
  return new SessionmuxError(
    "interaction_already_resolved",
    `interaction ${interactionId} was already answered`,
    {
      data: { interactionId, resolution },
    },
  );
}

/**
 * Also the answer when the session's turn still shows running: its host stopped (the lease ran
 * out) and the sweep has not ended that turn yet. Nothing runs in either case, so the message
 * says what will happen to such a turn as well as what starts an agent.
 */
export function agentNotLive(sessionId: string): SessionmuxError {
  return new SessionmuxError(
    "agent_not_live",
    `session ${sessionId} has no agent running: a turn left by a host that stopped is ended as interrupted within the lease time, and a prompt starts an agent`,
    { data: { sessionId } },
  );
}

/**
 * A steer into a turn parked since its host stopped: no agent runs it until its interactions are
 * answered (an agent attached since only holds it), so nothing would take the item. The message
 * says what lets the turn go on.
 */
export function parkedTurnTakesNoSteer(sessionId: string): SessionmuxError {
  return new SessionmuxError(
    "agent_not_live",
    `session ${sessionId} has no agent to take a steer: its turn waits on an answer asked before its host stopped; answer it and the agent continues the turn, which can take a steer, while the prompt stays queued`,
    { data: { sessionId } },
  );
}

/**
 * The call's check found the session, and then a store write no longer did: its delete landed in
 * between, and §7 answers every write to a deleted session `session_retired`.
 */
export function deletedMeanwhile(sessionId: string): SessionmuxError {
  return refusal(sessionId, { status: "retired" });
}
