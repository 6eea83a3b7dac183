import { SessionmuxError } from "../../../protocol/index.js";
import type { QueueChangeOutcome, QueueEditOutcome } from "../../store/live-state-store.js";
import type { HostContext, MethodHandler } from "../host-context.js";
import { toItem } from "../live/prompt-queue.js";
import type { LiveSession } from "../live-session.js";
import {
  agentNotLive,
  deletedMeanwhile,
  interactionAlreadyResolved,
  interactionNotFound,
  parkedTurnTakesNoSteer,
  refusal,
} from "../store-outcomes.js";

/** Methods that act on a live agent or a pending item; only `session.respond` may resume one. */

export const cancel: MethodHandler<"session.cancel"> = async (ctx, resolvers, principal, params) => {
  // a turn parked since its host stopped is a pending item: cancelling it needs no prompt first
  const session = await resolvers.liveOrParked(principal, params.sessionId);
  if (!session.turn) return { cancelled: false };
  // a parked turn of a previous process has no agent to stop: it is closed here
  if (await ctx.runner.endParked(session)) return { cancelled: true };
  session.turn.stop("cancel");
  return { cancelled: true };
};

export const updateQueue: MethodHandler<"session.updateQueue"> = async (
  ctx,
  resolvers,
  principal,
  params,
) => {
  const { sessionId, op } = params;
  // queued items are durable pending items: a session parked by a previous process keeps them
  // without a live agent, and they can still be edited, removed or cleared
  const queuedWithoutAgent =
    ctx.agents.get(sessionId) === undefined && ctx.live.promptQueue.size(sessionId) > 0;
  if (queuedWithoutAgent) await resolvers.inspect(principal, sessionId);
  const session = queuedWithoutAgent ? undefined : await resolvers.live(principal, sessionId);
  let outcome: QueueEditOutcome | undefined;
  if ("remove" in op) outcome = await ctx.store.removeQueueItem(sessionId, op.itemId);
  else if ("edit" in op)
    outcome = await ctx.store.editQueueItem(sessionId, op.itemId, op.text, ctx.limits.queue.maxBytesPerOwner);
  else if ("steer" in op) outcome = await steer(ctx, session, sessionId, op.itemId);
  else outcome = await ctx.store.clearQueue(sessionId);
  if (outcome?.status === "item_not_found") throw missing("itemId" in op ? op.itemId : "");
  if (outcome?.status === "not_found") throw deletedMeanwhile(sessionId);
  if (outcome?.status === "queue_full") throw refusal(sessionId, outcome);
  return { items: outcome?.status === "ok" ? outcome.items.map(toItem) : ctx.live.queue(sessionId) };
};

/**
 * Steers a queued item into the running turn: it moves first and is recorded as an interjection
 * when the agent takes it. Between the agent's return and `turn/end` nobody would read it: it then
 * stays queued where it is, and runs next. A turn a previous process left parked has no agent to
 * take it until its interactions are answered: that steer is refused, so the caller is not told
 * of a steer that cannot happen.
 */
async function steer(
  ctx: HostContext,
  session: LiveSession | undefined,
  sessionId: string,
  itemId: string,
): Promise<QueueChangeOutcome | undefined> {
  if (!ctx.live.promptQueue.find(sessionId, itemId)) throw missing(itemId);
  const turn = session?.turn;
  if (session === undefined) {
    if (ctx.live.interactionRegistry.parkedTurn(sessionId) !== undefined)
      throw parkedTurnTakesNoSteer(sessionId);
    throw agentNotLive(sessionId);
  }
  if (turn?.parked) throw parkedTurnTakesNoSteer(sessionId);
  if (!turn || turn.agentReturned) return undefined;
  const outcome = await ctx.store.steerQueueItem(sessionId, itemId, turn.turnId);
  if (outcome.status === "ok" && !turn.agentReturned) turn.steer(itemId);
  return outcome;
}

function missing(itemId: string): SessionmuxError {
  return new SessionmuxError(
    "queue_item_not_found",
    `no queued item ${itemId}; it may have started already`,
    {
      data: { itemId },
    },
  );
}

/**
 * First responder wins, decided by the store in one transaction; the same answer again is
 * idempotent; a different one is refused with the winner. An answer that completes a turn parked
 * by a previous process resumes the session's agent to continue it.
 */
export const respond: MethodHandler<"session.respond"> = async (ctx, resolvers, principal, params) => {
  const { sessionId, interactionId, repeat } = await resolvers.interaction(
    principal,
    params.interactionId,
    params.response,
  );
  if (repeat) return { resolved: true };
  // no turn of this process waits for it: the turn is parked; attaching the agent first adopts it,
  // so no prompt can start another turn between the answer and the continuation
  const parked = ctx.live.interactionRegistry.hasWaiter(interactionId)
    ? undefined
    : await resolvers.resume(principal, sessionId);
  const outcome = await ctx.store.resolveInteraction(interactionId, params.response, ctx.now());
  switch (outcome.status) {
    case "not_found":
      throw interactionNotFound(interactionId);
    case "conflict":
      throw interactionAlreadyResolved(interactionId, outcome.winner);
    case "repeat":
      return { resolved: true };
    case "resolved":
      if (parked && outcome.pendingInTurn === 0)
        await ctx.runner.continueParked(parked, outcome.interaction.turnId);
      return { resolved: true };
  }
};
