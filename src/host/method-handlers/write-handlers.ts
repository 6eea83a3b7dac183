import type { NewEvent } from "../../../protocol/index.js";
import type { AppendOutcome } from "../../store/session-store.js";
import type { HostContext, MethodHandler } from "../host-context.js";
import { assertStorageRoom } from "../storage-quota.js";
import { deletedMeanwhile, refusal } from "../store-outcomes.js";
import { chooseModel } from "./model-choice.js";

export const rename: MethodHandler<"session.rename"> = async (ctx, resolvers, principal, params) => {
  await resolvers.inspect(principal, params.sessionId);
  // each rename is an event of its own: without the quota, renames in a loop grew a principal's
  // log (and the database) past its quota without end
  await assertStorageRoom(ctx, principal);
  const event: NewEvent = { type: "session/renamed", data: { title: params.title } };
  return { seq: appendedSeq(params.sessionId, await appendOne(ctx, params.sessionId, event)) };
};

export const ack: MethodHandler<"session.ack"> = async (ctx, resolvers, principal, params) => {
  await resolvers.inspect(principal, params.sessionId);
  const outcome = await ctx.store.ack(params.sessionId, params.completionSettledAt);
  if (outcome.status !== "ok") throw deletedMeanwhile(params.sessionId);
  return { hasUnseenCompletion: outcome.hasUnseenCompletion };
};

export const selectModel: MethodHandler<"session.selectModel"> = async (
  ctx,
  resolvers,
  principal,
  params,
) => {
  const model = chooseModel(ctx.agent, params.model);
  const session = await resolvers.resume(principal, params.sessionId);
  await assertStorageRoom(ctx, principal);
  const seq = appendedSeq(
    params.sessionId,
    await appendOne(ctx, params.sessionId, { type: "session/model", data: { model } }),
  );
  session.model = model;
  return { seq };
};

/**
 * The store's own promise, awaited by the handler: an async function here cost every rename a
 * promise more and the microtasks of handing one to the other.
 */
function appendOne(
  ctx: HostContext,
  sessionId: string,
  event: NewEvent,
): Promise<AppendOutcome<{ at: number }>> {
  return ctx.store.append(sessionId, [event], { at: ctx.now() });
}

function appendedSeq(sessionId: string, outcome: AppendOutcome<{ at: number }>): number {
  if (outcome.status !== "appended") throw refusal(sessionId, outcome);
  return outcome.events.at(-1)?.seq ?? 0;
}
