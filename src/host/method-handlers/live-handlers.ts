import { SessionmuxError } from "../../../protocol/index.js";
import type { MethodHandler } from "../host-context.js";
import { prepareAttachments } from "../prompt-attachments.js";
import { interactionNotFound, refusal } from "../store-outcomes.js";
import { promptMessage } from "../user-message-shape.js";

/** Live-only methods: each acts on a live agent or a pending item and never starts one. */

export const cancel: MethodHandler<"session.cancel"> = async (_ctx, resolvers, principal, params) => {
  const session = await resolvers.live(principal, params.sessionId);
  if (!session.turn) return { cancelled: false };
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
  const session = await resolvers.live(principal, sessionId);
  const queue = ctx.live.promptQueue;
  const missing = (itemId: string) =>
    new SessionmuxError("queue_item_not_found", `no queued item ${itemId}; it may have started already`, {
      data: { itemId },
    });
  if ("remove" in op) {
    if (!queue.take(sessionId, op.itemId)) throw missing(op.itemId);
  } else if ("edit" in op) {
    if (!queue.edit(sessionId, op.itemId, op.text)) throw missing(op.itemId);
  } else if ("steer" in op) {
    const turn = session.turn;
    if (!queue.items(sessionId).some((i) => i.itemId === op.itemId)) throw missing(op.itemId);
    // between the agent's return and turn/end nobody would read it: the item then stays queued
    if (turn?.acceptsInterjections) {
      const item = queue.take(sessionId, op.itemId)!;
      const attachments = await prepareAttachments(ctx.store, session.owner, item.input);
      const message = promptMessage(item.input, attachments.stored, true);
      const outcome = await ctx.store.append(sessionId, [{ type: "user/message", data: message }], {
        at: ctx.now(),
      });
      if (outcome.status !== "appended" && outcome.status !== "duplicate") throw refusal(sessionId, outcome);
      turn.interjections.push(item.input.text);
    }
  } else {
    queue.clear(sessionId);
  }
  return { items: queue.items(sessionId) };
};

/** First responder wins; the same answer again is idempotent; a different one is refused with the winner. */
export const respond: MethodHandler<"session.respond"> = async (ctx, resolvers, principal, params) => {
  const { sessionId, interactionId } = resolvers.interaction(principal, params.interactionId);
  const claim = ctx.live.interactionRegistry.claim(interactionId, params.response);
  switch (claim.status) {
    case "not_found":
      throw interactionNotFound(interactionId);
    case "conflict":
      throw new SessionmuxError(
        "interaction_already_resolved",
        `interaction ${interactionId} was already answered`,
        {
          data: { interactionId, resolution: claim.winner },
        },
      );
    case "repeat":
      await claim.committed;
      return { resolved: true };
    case "won": {
      const commit = ctx.store
        .append(
          sessionId,
          [{ type: "interaction/resolved", data: { interactionId, resolution: params.response } }],
          {
            at: ctx.now(),
          },
        )
        .then((outcome) => {
          if (outcome.status !== "appended" && outcome.status !== "duplicate")
            throw refusal(sessionId, outcome);
        });
      claim.finish(commit);
      await commit;
      return { resolved: true };
    }
  }
};
