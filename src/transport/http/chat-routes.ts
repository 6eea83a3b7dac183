import type { LastState } from "../../../protocol/index.js";
import { turnRows } from "./a2a-turns.js";
import { sendJson, sendJsonParts } from "./http-reply.js";
import { boolQuery, idParam, intQuery, type Route } from "./route-context.js";
import { readSessionTranscript } from "./session-transcript.js";

/** One row of `GET /api/chat/sessions`. */
export interface ChatSessionRow {
  session_id: string;
  title: string;
  /** ISO 8601 of `updatedAt` (max of creation and the newest operator prompt), like A2A timestamps. */
  last_updated: string;
  turn_count: number;
  last_state: LastState;
}

/** `/api/chat/*`: the session list, turns as A2A tasks, retire and clear. */
export const chatRoutes: Route[] = [
  {
    method: "GET",
    pattern: /^\/api\/chat\/sessions$/,
    name: "GET /api/chat/sessions",
    async handle(ctx) {
      const limit = intQuery(ctx, "limit", 1, 200, 50);
      const parked = boolQuery(ctx, "parked");
      // the caller's dismissed sessions are left out unless asked for (`dismissed=true`: only them)
      const dismissed = boolQuery(ctx, "dismissed") === true;
      const key = `${limit}\u0000${parked === true}\u0000${dismissed}`;
      const body = await ctx.sessionLists.get(ctx.principal, key, async () => {
        const params = { limit, ...(parked ? { parked } : {}), ...(dismissed ? { dismissed } : {}) };
        const { sessions } = await ctx.host.call(ctx.principal, "session.list", params);
        const rows: ChatSessionRow[] = sessions.map((r) => ({
          session_id: r.sessionId,
          title: r.title,
          last_updated: new Date(r.updatedAt).toISOString(),
          turn_count: r.turnCount,
          last_state: r.lastState,
        }));
        return Buffer.from(JSON.stringify({ sessions: rows }), "utf8");
      });
      sendJsonParts(ctx.res, 200, [body]);
    },
  },
  {
    method: "GET",
    pattern: /^\/api\/chat\/sessions\/([^/]+)\/turns$/,
    name: "GET /api/chat/sessions/:id/turns",
    async handle(ctx) {
      const sessionId = idParam(ctx, 0, "sessionId");
      const limit = intQuery(ctx, "limit", 1, 200, 50);
      const snap = await readSessionTranscript(ctx.host, ctx.principal, sessionId, ctx.transcripts);
      sendJson(ctx.res, 200, {
        turns: turnRows(sessionId, snap.transcript, ctx.host.live.queue(sessionId), limit),
      });
    },
  },
  {
    method: "DELETE",
    pattern: /^\/api\/chat\/sessions\/([^/]+)$/,
    name: "DELETE /api/chat/sessions/:id",
    async handle(ctx) {
      const sessionId = idParam(ctx, 0, "sessionId");
      const retire = boolQuery(ctx, "retire") ?? true;
      if (retire) {
        await ctx.host.call(ctx.principal, "session.delete", { sessionId });
        sendJson(ctx.res, 200, { deleted: true });
        return;
      }
      const { epoch } = await ctx.host.call(ctx.principal, "session.clear", { sessionId });
      sendJson(ctx.res, 200, { cleared: true, epoch });
    },
  },
];
