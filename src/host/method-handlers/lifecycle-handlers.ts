import { randomUUID } from "node:crypto";
import { Limits, SessionmuxError } from "../../../protocol/index.js";
import type { Resolvers } from "../activation-policy.js";
import type { HostContext, MethodHandler } from "../host-context.js";
import type { Principal } from "../principal.js";
import { toRow } from "../session-row.js";
import { assertStorageRoom } from "../storage-quota.js";
import { notFound, refusal } from "../store-outcomes.js";
import { chooseModel } from "./model-choice.js";

export const create: MethodHandler<"session.create"> = async (ctx, resolvers, principal, params) => {
  const sessionId = params.sessionId ?? randomUUID();
  await assertStorageRoom(ctx, principal);
  const outcome = await ctx.store.create({
    sessionId,
    owner: principal.name,
    model: chooseModel(ctx.agent, params.model),
    at: ctx.now(),
    ...(params.title !== undefined ? { title: params.title } : {}),
    ...(params.origin !== undefined ? { origin: params.origin } : {}),
    ...sessionLimit(ctx, principal),
  });
  if (outcome.status === "too_many_sessions") throw tooManySessions(principal, outcome.max);
  if (outcome.status !== "created") throw refusal(sessionId, outcome);
  await attachNew(ctx, resolvers, principal, sessionId);
  await announce(ctx, principal, sessionId);
  return { header: outcome.header };
};

/** The admin is exempt, as from the other per-principal limits: it is the operator's own token. */
function sessionLimit(ctx: HostContext, principal: Principal): { maxOwnerSessions?: number } {
  return principal.admin ? {} : { maxOwnerSessions: ctx.limits.sessionsPerPrincipal };
}

function tooManySessions(principal: Principal, max: number): SessionmuxError {
  return new SessionmuxError(
    "too_many_sessions",
    `${principal.name} already has ${max} sessions; delete one before creating another`,
    { data: { max } },
  );
}

/**
 * Attaches the agent of a session just created. The session is written already, so no failure
 * to attach (the principal's agents all at work, the host shutting down) may turn the call into
 * an error: that would report a create that happened as refused, and a retry would create a
 * second session. It stays without an agent; its first prompt attaches one, or is refused.
 */
async function attachNew(
  ctx: HostContext,
  resolvers: Resolvers,
  principal: Principal,
  sessionId: string,
): Promise<void> {
  try {
    await resolvers.resume(principal, sessionId);
  } catch (err) {
    // the principal's agents all at work, or a shutdown begun: expected, the first prompt attaches
    const expected =
      err instanceof SessionmuxError && (err.code === "too_many_agents" || err.code === "host_shutting_down");
    if (expected) ctx.logger.debug({ err, sessionId }, "session created without an agent");
    else ctx.logger.error({ err, sessionId }, "session created without an agent: its agent failed to attach");
  }
}

/** Reads the source cold; only the new target gets an agent. */
export const fork: MethodHandler<"session.fork"> = async (ctx, resolvers, principal, params) => {
  await resolvers.inspect(principal, params.sourceId);
  const targetId = params.sessionId ?? randomUUID();
  await assertStorageRoom(ctx, principal);
  const outcome = await ctx.forks.run(principal.name, () =>
    ctx.store.fork({
      sourceId: params.sourceId,
      targetId,
      owner: principal.name,
      at: ctx.now(),
      ...(params.atSeq !== undefined ? { atSeq: params.atSeq } : {}),
      ...sessionLimit(ctx, principal),
      maxDataBytes: ctx.limits.transcriptBytes,
      maxEvents: Limits.maxForkEvents,
    }),
  );
  if (outcome.status === "source_not_found") throw notFound(params.sourceId);
  if (outcome.status === "too_many_sessions") throw tooManySessions(principal, outcome.max);
  if (outcome.status === "source_retired") throw refusal(params.sourceId, { status: "retired" });
  if (outcome.status === "seq_past_head") throw seqPastHead(params.sourceId, params.atSeq, outcome.headSeq);
  if (outcome.status === "too_large") throw prefixTooLarge(params.sourceId, ctx.limits.transcriptBytes);
  if (outcome.status !== "created") throw refusal(targetId, outcome);
  await attachNew(ctx, resolvers, principal, targetId);
  await announce(ctx, principal, targetId);
  return { header: outcome.header };
};

/** A fork at a seq the source does not have: clamping it would fork another prefix than asked. */
function seqPastHead(sourceId: string, atSeq: number | undefined, headSeq: number): SessionmuxError {
  return new SessionmuxError(
    "bad_request",
    `params/atSeq: ${atSeq} is past the head of session ${sourceId} (seq ${headSeq}); fork at or before it`,
    { data: { field: "/atSeq", headSeq } },
  );
}

/**
 * A prefix longer than one read of a whole log, or of more events than one fork copies: the fork
 * would hold it all in the host's memory at once, and copy it in one turn of the event loop.
 */
function prefixTooLarge(sourceId: string, maxDataBytes: number): SessionmuxError {
  const maxEvents = Limits.maxForkEvents;
  return new SessionmuxError(
    "transcript_too_large",
    `session ${sourceId} holds more than ${maxDataBytes} bytes of event data or ${maxEvents} events up to the fork's seq, more than one fork copies; fork at an earlier seq`,
    { data: { sessionId: sourceId, maxDataBytes, maxEvents } },
  );
}

/** Stops a live agent (its turn is aborted and not closed: the log goes away), then retires the id. */
export const remove: MethodHandler<"session.delete"> = async (ctx, resolvers, principal, params) => {
  const { sessionId } = params;
  const cold = await resolvers.inspect(principal, sessionId);
  stopLive(ctx, sessionId);
  const outcome = await ctx.store.delete(sessionId);
  // a prompt that resolved the session just before the tombstone may have attached meanwhile
  stopLive(ctx, sessionId);
  if (outcome.status !== "deleted") throw refusal(sessionId, outcome);
  ctx.notifications.publish(cold.header.owner, { name: "session.removed", value: { sessionId } });
  return { deleted: true };
};

export const clear: MethodHandler<"session.clear"> = async (ctx, resolvers, principal, params) => {
  const { sessionId } = params;
  await resolvers.inspect(principal, sessionId);
  // the live check covers a turn whose opening append is still in flight
  if (ctx.agents.get(sessionId)?.turn) throw refusal(sessionId, { status: "busy" });
  const outcome = await ctx.store.clear(sessionId, {
    at: ctx.now(),
    ...(params.expectedEpoch !== undefined ? { expectedEpoch: params.expectedEpoch } : {}),
  });
  if (outcome.status !== "cleared") throw refusal(sessionId, outcome);
  return { epoch: outcome.epoch };
};

function stopLive(ctx: HostContext, sessionId: string): void {
  const session = ctx.agents.get(sessionId);
  if (!session) return;
  session.turn?.stop("delete");
  ctx.agents.detach(sessionId);
}

/**
 * Tells the principal's sockets of a session just written. The session stands whatever this read
 * does: a failed read (a PostgreSQL connection lost) must not answer the create as failed, or a
 * retry without a `sessionId` would create a second session. Notifications carry no sequence, so
 * the other tabs see it at their next `session.list`.
 */
async function announce(ctx: HostContext, principal: Principal, sessionId: string): Promise<void> {
  let projection: Awaited<ReturnType<typeof ctx.store.projection>>;
  try {
    projection = await ctx.store.projection(sessionId);
  } catch (err) {
    ctx.logger.warn({ err, sessionId }, "session created; announcing it failed, other sockets list it later");
    return;
  }
  if (projection)
    ctx.notifications.publish(principal.name, {
      name: "session.added",
      value: { row: toRow(projection, ctx.live) },
    });
}
