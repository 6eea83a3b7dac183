import { SessionmuxError } from "../../../protocol/index.js";
import type { MethodHandler } from "../host-context.js";
import { canSee } from "../principal.js";
import { toRow } from "../session-row.js";
import { refusal } from "../store-outcomes.js";

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

export const search: MethodHandler<"session.search"> = async (ctx, _r, principal, params) => {
  const hits = await ctx.store.search(
    params.query,
    params.limit ?? 20,
    principal.admin ? undefined : principal.name,
  );
  return { hits };
};

export const models: MethodHandler<"session.models"> = async (ctx) => ({
  models: ctx.agent.models(),
  default: ctx.agent.defaultModel,
});

export const attachment: MethodHandler<"session.attachment"> = async (ctx, resolvers, principal, params) => {
  await resolvers.inspect(principal, params.sessionId);
  const found = await ctx.store.getAttachment(params.attachmentId);
  if (!found || !canSee(principal, found.owner)) {
    throw new SessionmuxError("attachment_not_found", `no attachment ${params.attachmentId}`, {
      data: { attachmentId: params.attachmentId },
    });
  }
  return { name: found.name, type: found.type, size: found.size, bytes: found.bytes };
};
