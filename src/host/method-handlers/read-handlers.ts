import { type ParamsOf, SessionmuxError } from "../../../protocol/index.js";
import { readWhole } from "../../store/attachment-chunks.js";
import type { AttachmentBody, SessionStore } from "../../store/session-store.js";
import type { Resolvers } from "../activation-policy.js";
import type { MethodHandler } from "../host-context.js";
import type { Principal } from "../principal.js";
import { visibleAttachment } from "../session-read-handle.js";
import { toRow } from "../session-row.js";
import { attachmentNotFound, refusal } from "../store-outcomes.js";

/** Cold reads: every one goes to persistence only. */

export const list: MethodHandler<"session.list"> = async (ctx, _r, principal, params) => {
  const { rows, next } = await ctx.store.list({
    limit: params.limit ?? 50,
    ...(params.parked !== undefined ? { parked: params.parked } : {}),
    ...(params.before !== undefined ? { before: params.before } : {}),
    ...(principal.admin ? {} : { owner: principal.name }),
    dismissals: { principal: principal.name, dismissed: params.dismissed === true },
  });
  const sessions = rows.map((row) => toRow(row, ctx.live));
  return next === undefined ? { sessions } : { sessions, next };
};

export const page: MethodHandler<"session.page"> = async (ctx, resolvers, principal, params) => {
  if (params.afterSeq !== undefined && params.beforeSeq !== undefined) {
    throw new SessionmuxError("bad_request", "give afterSeq or beforeSeq, not both", {
      data: { field: "/beforeSeq" },
    });
  }
  await resolvers.inspect(principal, params.sessionId);
  const outcome = await ctx.store.page(params.sessionId, {
    limit: params.limit ?? 200,
    ...(params.afterSeq !== undefined ? { afterSeq: params.afterSeq } : {}),
    ...(params.beforeSeq !== undefined ? { beforeSeq: params.beforeSeq } : {}),
  });
  if (outcome.status !== "ok") throw refusal(params.sessionId, outcome);
  return {
    header: outcome.header,
    epoch: outcome.epoch,
    headSeq: outcome.headSeq,
    events: outcome.events,
    hasMore: outcome.hasMore,
    projection: toRow(outcome.projection, ctx.live),
  };
};

/** Searches take their turns by principal, and one whose caller left while it waited is dropped. */
export const search: MethodHandler<"session.search"> = async (ctx, _r, principal, params, signal) => {
  const hits = await ctx.store.search(
    params.query,
    params.limit ?? 20,
    principal.admin ? undefined : principal.name,
    signal ? { name: principal.name, signal } : { name: principal.name },
  );
  return { hits };
};

export const models: MethodHandler<"session.models"> = async (ctx) => ({
  models: ctx.agent.models(),
  default: ctx.agent.defaultModel,
});

/**
 * §4 `session.attachment`'s checks (a session the caller may read, an upload it may read), with
 * the body read chunk by chunk as it is iterated: the mux streams it from here.
 */
export async function openAttachment(
  store: SessionStore,
  resolvers: Resolvers,
  principal: Principal,
  params: ParamsOf<"session.attachment">,
): Promise<AttachmentBody> {
  await resolvers.inspect(principal, params.sessionId);
  const found = await visibleAttachment(store, principal, params.attachmentId);
  if (!found) throw attachmentNotFound(params.attachmentId);
  return found;
}

/** The answer in one value, for callers of `HostApi.call`; the mux sends it streamed instead. */
export const attachment: MethodHandler<"session.attachment"> = async (ctx, resolvers, principal, params) => {
  const found = await openAttachment(ctx.store, resolvers, principal, params);
  const whole = await readWhole(found, () => found.chunks());
  if (!whole) throw attachmentNotFound(params.attachmentId);
  return { name: whole.name, type: whole.type, size: whole.size, bytes: whole.bytes };
};
