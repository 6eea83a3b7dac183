import type { MethodHandler } from "../host-context.js";

/**
 * Cold writes: they change only the caller's list, never the session or its agent (a dismissed
 * session keeps running). Another principal's session answers `session_not_found`, as any read.
 */

export const dismiss: MethodHandler<"session.dismiss"> = async (ctx, resolvers, principal, params) => {
  await resolvers.inspect(principal, params.sessionId);
  await ctx.dismissals.dismiss(principal, params.sessionId);
  return { dismissed: true };
};

export const restore: MethodHandler<"session.restore"> = async (ctx, resolvers, principal, params) => {
  await resolvers.inspect(principal, params.sessionId);
  await ctx.dismissals.restore(principal, params.sessionId);
  return { dismissed: false };
};
