import { Resolution, validator } from "../../../protocol/index.js";
import { fail, sendJson, sendJsonParts } from "./http-reply.js";
import { readJsonObject } from "./request-body.js";
import { idParam, type Route } from "./route-context.js";
import { readSessionTranscript } from "./session-transcript.js";
import { renderSessionView } from "./session-view.js";

const resolution = validator(Resolution);

/** `/v1/sessions/*` and `/v1/interactions/*`: the session view, answers, and seen marks. */
export const sessionRoutes: Route[] = [
  {
    method: "GET",
    pattern: /^\/v1\/sessions\/([^/]+)$/,
    name: "GET /v1/sessions/:id",
    async handle(ctx) {
      const sessionId = idParam(ctx, 0, "sessionId");
      const snap = await readSessionTranscript(ctx.host, ctx.principal, sessionId, ctx.transcripts);
      const live = ctx.host.live.interactions().filter((i) => i.sessionId === sessionId);
      sendJsonParts(ctx.res, 200, renderSessionView(sessionId, snap, live));
    },
  },
  {
    method: "POST",
    pattern: /^\/v1\/interactions\/([^/]+)\/answer$/,
    name: "POST /v1/interactions/:id/answer",
    async handle(ctx) {
      const interactionId = idParam(ctx, 0, "interactionId");
      const body = await readJsonObject(ctx.req, ctx.maxBodyBytes);
      const response = resolution.parse(body, "body");
      const result = await ctx.host.call(ctx.principal, "session.respond", { interactionId, response });
      sendJson(ctx.res, 200, result);
    },
  },
  {
    method: "POST",
    pattern: /^\/v1\/sessions\/([^/]+)\/seen$/,
    name: "POST /v1/sessions/:id/seen",
    async handle(ctx) {
      const sessionId = idParam(ctx, 0, "sessionId");
      const body = await readJsonObject(ctx.req, ctx.maxBodyBytes);
      const at = body.completion_settled_at_ms;
      if (typeof at !== "number" || !Number.isFinite(at) || at < 0) {
        throw fail("bad_request", "completion_settled_at_ms must be a non-negative number", {
          field: "/completion_settled_at_ms",
        });
      }
      const { hasUnseenCompletion } = await ctx.host.call(ctx.principal, "session.ack", {
        sessionId,
        completionSettledAt: at,
      });
      sendJson(ctx.res, 200, { has_unseen_completion: hasUnseenCompletion });
    },
  },
];
