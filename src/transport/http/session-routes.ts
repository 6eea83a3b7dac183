import { ResponseInput, SessionmuxError, validator } from "../../../protocol/index.js";
import { Limits } from "../../../protocol/limits.js";
import { refusal } from "../../host/store-outcomes.js";
import { readReachedHead } from "../../store/read-head.js";
import { fail, sendJson, sendJsonParts, sendJsonText } from "./http-reply.js";
import { readJsonBody } from "./json-body.js";
import { idParam, intQuery, type Route } from "./route-context.js";
import { holdViewSending, readSessionTranscript } from "./session-transcript.js";
import { renderSessionView } from "./session-view.js";

const resolution = validator(ResponseInput);

/** `/v1/sessions/*` and `/v1/interactions/*`: the session view, answers, and seen marks. */
export const sessionRoutes: Route[] = [
  {
    method: "GET",
    pattern: /^\/v1\/sessions\/([^/]+)$/,
    name: "GET /v1/sessions/:id",
    async handle(ctx) {
      const sessionId = idParam(ctx, 0, "sessionId");
      const snap = await readSessionTranscript(ctx.host, ctx.principal, sessionId, ctx.transcripts);
      holdViewSending(ctx.res, ctx.principal, snap, ctx.transcripts);
      const live = ctx.host.live.interactions().filter((i) => i.sessionId === sessionId);
      sendJsonParts(ctx.res, 200, await renderSessionView(sessionId, snap, live));
    },
  },
  {
    method: "GET",
    pattern: /^\/v1\/sessions\/([^/]+)\/events$/,
    name: "GET /v1/sessions/:id/events",
    // The log itself, a page at a time: what a client without the mux reads of a session of any
    // size (the views above fold the whole log and stop at the transcript bound).
    async handle(ctx) {
      const sessionId = idParam(ctx, 0, "sessionId");
      const afterSeq = intQuery(ctx, "after_seq", 0, Number.MAX_SAFE_INTEGER, 0);
      const limit = intQuery(ctx, "limit", 1, Limits.replayBatch, Limits.replayBatch);
      const epoch = ctx.query.get("epoch");
      const reader = await ctx.host.openRead(ctx.principal, sessionId);
      const read = await reader.readAfter(afterSeq, limit);
      if (epoch !== null && epoch !== read.epoch)
        throw refusal(sessionId, { status: "epoch_mismatch", epoch: read.epoch });
      if (afterSeq > read.headSeq)
        throw fail("cursor_ahead", `after_seq ${afterSeq} is past the head ${read.headSeq}`, {
          afterSeq,
          headSeq: read.headSeq,
          epoch: read.epoch,
        });
      const page = {
        session_id: sessionId,
        epoch: read.epoch,
        head_seq: read.headSeq,
        events: read.events.map((event) => ({
          seq: event.seq,
          at_ms: event.at,
          type: event.type,
          data: event.data,
        })),
        has_more: !readReachedHead(read),
        next_after_seq: read.events.at(-1)?.seq ?? afterSeq,
      };
      sendJsonText(ctx.res, 200, JSON.stringify(page, binaryAsBase64));
    },
  },
  {
    method: "POST",
    pattern: /^\/v1\/interactions\/([^/]+)\/answer$/,
    name: "POST /v1/interactions/:id/answer",
    async handle(ctx) {
      const interactionId = idParam(ctx, 0, "interactionId");
      const body = await readJsonBody(ctx);
      const response = resolution.parse(body, "body");
      const result = await ctx.host
        .call(ctx.principal, "session.respond", { interactionId, response })
        .catch((err: unknown) => {
          throw bodyIsTheResponse(err);
        });
      sendJson(ctx.res, 200, result);
    },
  },
  {
    method: "POST",
    pattern: /^\/v1\/sessions\/([^/]+)\/seen$/,
    name: "POST /v1/sessions/:id/seen",
    async handle(ctx) {
      const sessionId = idParam(ctx, 0, "sessionId");
      const body = await readJsonBody(ctx);
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

/**
 * The route's body is the call's `response`: a refusal naming `/response` (an answer of the
 * other kind) names the whole body here.
 */
function bodyIsTheResponse(err: unknown): unknown {
  if (!(err instanceof SessionmuxError) || err.code !== "bad_request") return err;
  const data = err.data as { field?: unknown } | undefined;
  if (data?.field !== "/response") return err;
  return new SessionmuxError("bad_request", err.message, { data: { ...data, field: "/" } });
}

/**
 * Binary values in event data (an agent's tool result may hold bytes) go out as base64 strings.
 * The holder's own value is checked: a `Buffer` reaches the replacer already turned into `{type, data}`.
 */
function binaryAsBase64(this: Record<string, unknown>, key: string, value: unknown): unknown {
  const raw = this[key];
  return raw instanceof Uint8Array
    ? Buffer.from(raw.buffer, raw.byteOffset, raw.byteLength).toString("base64")
    : value;
}
