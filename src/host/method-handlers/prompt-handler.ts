import { randomUUID } from "node:crypto";
import type { ParamsOf, ResultOf } from "../../../protocol/index.js";
import { queuedBytes } from "../../store/live-rows.js";
import { overOwnerBytes } from "../../store/live-state-operations.js";
import type { EnqueueOutcome } from "../../store/live-state-store.js";
import type { PromptRecord } from "../../store/session-store.js";
import type { Resolvers } from "../activation-policy.js";
import type { HostContext, MethodHandler } from "../host-context.js";
import type { PromptInput } from "../live/prompt-queue.js";
import type { LiveSession } from "../live-session.js";
import type { Principal } from "../principal.js";
import { assertAttachmentsReadable } from "../prompt-attachments.js";
import { assertStorageRoom } from "../storage-quota.js";
import { refusal } from "../store-outcomes.js";

type PromptResult = ResultOf<"session.prompt">;
type EnqueueRefusal = Extract<EnqueueOutcome, { status: "queue_full" }>;

/**
 * §4 `session.prompt`, idempotent on `(sessionId, clientMessageId)`: concurrent repeats share the
 * in-flight answer, later ones find the store's prompt record (written in the turn's own append).
 */
export const prompt: MethodHandler<"session.prompt"> = async (ctx, resolvers, principal, params) => {
  // authorise before dedupe, so another principal never learns an answer through the key
  const owner = ctx.agents.get(params.sessionId)
    ? (await resolvers.live(principal, params.sessionId)).owner
    : (await resolvers.inspect(principal, params.sessionId)).header.owner;
  const key = `${params.sessionId}\u0000${params.clientMessageId}`;
  const inFlight = ctx.prompts.get(key);
  if (inFlight) return inFlight;
  const answer = answerPrompt(ctx, resolvers, principal, owner, params);
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
  owner: string,
  params: ParamsOf<"session.prompt">,
): Promise<PromptResult> {
  const recorded = await ctx.store.findPrompt(params.sessionId, params.clientMessageId);
  if (recorded) return fromRecord(recorded);
  // before the agent starts: a refused prompt resumes nothing
  const attachmentBytes = await assertAttachmentsReadable(ctx.store, owner, params.attachments);
  // one that could never start is refused before it is written, queued or not
  ctx.attachmentBudget.assertFitsAlone(attachmentBytes);
  await assertStorageRoom(ctx, principal);
  const input: PromptInput = {
    clientMessageId: params.clientMessageId,
    text: params.text,
    ...(params.display !== undefined ? { display: params.display } : {}),
    ...(params.hidden !== undefined ? { hidden: params.hidden } : {}),
    ...(params.attachments !== undefined ? { attachments: params.attachments } : {}),
    ...(params.meta !== undefined ? { meta: params.meta } : {}),
  };
  const repeated = await answerToFullQueue(ctx, owner, params, input);
  if (repeated) return repeated;
  const session = await resolvers.resume(principal, params.sessionId);
  // no await between this check and claiming the turn or starting to queue: prompts keep their order
  if (session.turn || session.pendingEnqueues > 0 || ctx.live.promptQueue.size(session.sessionId) > 0) {
    return enqueue(ctx, session, input);
  }
  const begun = await ctx.runner.begin(session, input, "prompt");
  if (begun.status === "duplicate") return fromRecord(begun.record);
  return { queued: false, seq: begun.seq, turnId: begun.turnId };
}

/**
 * A prompt the store would refuse `queue_full` is refused here, before a cold session's agent is
 * attached for nothing, unless, as in the store, a repeat recorded meanwhile answers its record.
 * Undefined while there is room; the store still decides at its write, where a concurrent prompt
 * may have taken the room (`ActivationPolicy.run` then lets the agent go again).
 */
async function answerToFullQueue(
  ctx: HostContext,
  owner: string,
  params: ParamsOf<"session.prompt">,
  input: PromptInput,
): Promise<PromptResult | undefined> {
  const refused = await queueRefusal(ctx, owner, params.sessionId, input);
  if (!refused) return undefined;
  const recorded = await ctx.store.findPrompt(params.sessionId, params.clientMessageId);
  if (recorded) return fromRecord(recorded);
  throw refusal(params.sessionId, refused);
}

/**
 * The store's queue limits, checked ahead of its write. The owner's queued bytes are read only
 * for a session without an agent whose prompt will queue (behind a parked turn or queued
 * prompts): a live session's agent is attached already, and the store's own check suffices.
 */
async function queueRefusal(
  ctx: HostContext,
  owner: string,
  sessionId: string,
  input: PromptInput,
): Promise<EnqueueRefusal | undefined> {
  const { maxItemsPerSession, maxBytesPerOwner } = ctx.limits.queue;
  const items = ctx.live.promptQueue.size(sessionId);
  if (items >= maxItemsPerSession)
    return { status: "queue_full", limit: "items_per_session", max: maxItemsPerSession };
  if (ctx.agents.get(sessionId)) return undefined;
  if (items === 0 && ctx.live.interactionRegistry.parkedTurn(sessionId) === undefined) return undefined;
  return overOwnerBytes(await ctx.store.queuedBytes(owner), queuedBytes(input), maxBytesPerOwner);
}

/** The queue item and the prompt key commit together; the runner starts it when the session is free. */
async function enqueue(ctx: HostContext, session: LiveSession, input: PromptInput): Promise<PromptResult> {
  const itemId = randomUUID();
  session.pendingEnqueues++;
  let outcome: EnqueueOutcome | undefined;
  try {
    outcome = await ctx.store.enqueuePrompt({
      sessionId: session.sessionId,
      itemId,
      queuedAt: ctx.now(),
      input,
      limits: ctx.limits.queue,
    });
  } finally {
    session.pendingEnqueues--;
    // the turn may have ended while the write was in flight: nobody else would start the item, or
    // tell the agent idle. A refused prompt starts none queued earlier: a turn's end or a retry
    // starts those, and on an agent this call attached they wait for a prompt that is accepted
    const accepted = outcome?.status === "queued" || outcome?.status === "duplicate";
    if (accepted || ctx.live.promptQueue.size(session.sessionId) === 0) ctx.runner.kick(session);
  }
  switch (outcome.status) {
    case "queued":
      return { queued: true, itemId };
    case "duplicate":
      return fromRecord(outcome.record);
    default:
      throw refusal(session.sessionId, outcome);
  }
}

function fromRecord(record: PromptRecord): PromptResult {
  const result: PromptResult = { queued: record.queued };
  if (record.seq !== undefined) result.seq = record.seq;
  if (record.turnId !== undefined) result.turnId = record.turnId;
  if (record.itemId !== undefined) result.itemId = record.itemId;
  return result;
}
