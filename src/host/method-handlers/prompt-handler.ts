import { randomUUID } from "node:crypto";
import type { ParamsOf, ResultOf } from "../../../protocol/index.js";
import type { PromptRecord } from "../../store/session-store.js";
import type { Resolvers } from "../activation-policy.js";
import type { HostContext, MethodHandler } from "../host-context.js";
import type { PromptInput } from "../live/prompt-queue.js";
import type { Principal } from "../principal.js";

type PromptResult = ResultOf<"session.prompt">;

/**
 * §4 `session.prompt`, idempotent on `(sessionId, clientMessageId)`: concurrent repeats share the
 * in-flight answer, later ones find the store's prompt record (written in the turn's own append).
 */
export const prompt: MethodHandler<"session.prompt"> = async (ctx, resolvers, principal, params) => {
  // authorise before dedupe, so another principal never learns an answer through the key
  if (!ctx.agents.get(params.sessionId)) await resolvers.inspect(principal, params.sessionId);
  else await resolvers.live(principal, params.sessionId);
  const key = `${params.sessionId}\u0000${params.clientMessageId}`;
  const inFlight = ctx.prompts.get(key);
  if (inFlight) return inFlight;
  const answer = answerPrompt(ctx, resolvers, principal, params);
  ctx.prompts.set(key, answer);
  const forget = () => {
    if (ctx.prompts.get(key) === answer) ctx.prompts.delete(key);
  };
  answer.then(forget, forget);
  return answer;
};

async function answerPrompt(
  ctx: HostContext,
  resolvers: Resolvers,
  principal: Principal,
  params: ParamsOf<"session.prompt">,
): Promise<PromptResult> {
  const recorded = await ctx.store.findPrompt(params.sessionId, params.clientMessageId);
  if (recorded) return fromRecord(recorded);
  const session = await resolvers.resume(principal, params.sessionId);
  const input: PromptInput = {
    clientMessageId: params.clientMessageId,
    text: params.text,
    ...(params.display !== undefined ? { display: params.display } : {}),
    ...(params.hidden !== undefined ? { hidden: params.hidden } : {}),
    ...(params.attachments !== undefined ? { attachments: params.attachments } : {}),
    ...(params.meta !== undefined ? { meta: params.meta } : {}),
  };
  // no await between this check and claiming the turn or queueing: prompts keep their order
  if (session.turn || ctx.live.promptQueue.size(session.sessionId) > 0) {
    const itemId = randomUUID();
    ctx.live.promptQueue.enqueue(session.sessionId, { itemId, queuedAt: ctx.now(), input });
    await ctx.store.recordPrompt(session.sessionId, params.clientMessageId, { queued: true, itemId });
    return { queued: true, itemId };
  }
  const begun = await ctx.runner.begin(session, input, "prompt");
  if (begun.status === "duplicate") return fromRecord(begun.record);
  return { queued: false, seq: begun.seq, turnId: begun.turnId };
}

function fromRecord(record: PromptRecord): PromptResult {
  const result: PromptResult = { queued: record.queued };
  if (record.seq !== undefined) result.seq = record.seq;
  if (record.turnId !== undefined) result.turnId = record.turnId;
  if (record.itemId !== undefined) result.itemId = record.itemId;
  return result;
}
