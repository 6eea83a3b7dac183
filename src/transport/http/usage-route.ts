import { sendJson } from "./http-reply.js";
import type { Route } from "./route-context.js";

/**
 * `GET /v1/usage`: what the caller stores against its quota (protocol-v1 §8), so a client can
 * see `storage_quota_exceeded` coming. The admin is not bound: its `max_stored_bytes` is null.
 */
export const usageRoutes: Route[] = [
  {
    method: "GET",
    pattern: /^\/v1\/usage$/,
    name: "GET /v1/usage",
    async handle(ctx) {
      const { storedBytes, maxBytes } = await ctx.host.storageUsage(ctx.principal);
      sendJson(ctx.res, 200, {
        principal: ctx.principal.name,
        stored_bytes: storedBytes,
        max_stored_bytes: maxBytes,
      });
    },
  },
];
