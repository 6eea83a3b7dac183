import type { NewEvent } from "../../../protocol/index.js";
import type { HostContext, MethodHandler } from "../host-context.js";
import { deletedMeanwhile, refusal } from "../store-outcomes.js";
import { chooseModel } from "./model-choice.js";

export const rename: MethodHandler<"session.rename"> = async (ctx, resolvers, principal, params) => {
  await resolvers.inspect(principal, params.sessionId);
  return {
    seq: await appendOne(ctx, params.sessionId, { type: "session/renamed", data: { title: params.title } }),
  };
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
  const seq = await appendOne(ctx, params.sessionId, { type: "session/model", data: { model } });
  session.model = model;
  return { seq };
};

async function appendOne(ctx: HostContext, sessionId: string, event: NewEvent): Promise<number> {
  const outcome = await ctx.store.append(sessionId, [event], { at: ctx.now() });
  if (outcome.status !== "appended") throw refusal(sessionId, outcome);
  return outcome.events.at(-1)?.seq ?? 0;
}
