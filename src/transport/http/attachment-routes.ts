import { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { hasVisibleText, type SessionmuxError } from "../../../protocol/index.js";
import { UPLOAD_MIN_COUNTED_BYTES } from "../../store/upload-counted-bytes.js";
import type { BodyReceipt } from "./bodies-receiving.js";
import { fail, sendJson } from "./http-reply.js";
import { declaredBytes, readBody } from "./request-body.js";
import { idParam, type Route, type RouteContext } from "./route-context.js";

/** Header values are latin-1 on the wire; names outside it arrive percent-encoded. */
function filenameOf(raw: string | string[] | undefined): string {
  if (raw === undefined) return "attachment";
  if (Array.isArray(raw)) throw fail("bad_request", "one X-Filename header only", { field: "x-filename" });
  let name: string;
  try {
    name = decodeURIComponent(raw.trim());
  } catch {
    name = raw.trim();
  }
  // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what is refused
  if (!hasVisibleText(name) || name.length > 256 || /[\u0000-\u001f\u007f/\\]/.test(name)) {
    throw fail(
      "bad_request",
      "X-Filename must be 1-256 characters, one of them visible, without control characters or slashes",
      { field: "x-filename" },
    );
  }
  return name;
}

function contentTypeOf(raw: string | undefined): string {
  const type = (raw ?? "application/octet-stream").trim();
  if (type.length === 0 || type.length > 256) {
    throw fail("bad_request", "Content-Type must be 1-256 characters", { field: "content-type" });
  }
  return type;
}

/** The bytes of the principal's stored uploads no prompt references yet (none without a ledger). */
function storedPending(ctx: RouteContext): Promise<number> {
  return ctx.uploads.ledger?.pendingBytes(ctx.principal.name) ?? Promise.resolve(0);
}

function quotaExceeded(quotaBytes: number): SessionmuxError {
  return fail(
    "upload_quota_exceeded",
    `uploads not yet used by a prompt may total ${quotaBytes} bytes, those being sent included; use or wait for older ones to expire`,
    { limit: quotaBytes },
  );
}

/**
 * Receives an upload's body, counted among its owner's uploads from its declared size (or, chunked,
 * from each byte read) until it is stored. It is refused when the owner's stored uploads and those
 * arriving would pass the quota, or when the bodies the host holds for the owner would (those read
 * and being stored included: the ledger may count them already, and a sum of both would count
 * them twice). A refused body is still read (and dropped): a client sends it whole before it
 * reads the answer, and a connection closed under it loses the 413.
 */
async function receiveUpload(ctx: RouteContext, receipt: BodyReceipt, stored: number): Promise<Buffer> {
  const { maxBytes, quotaBytes } = ctx.uploads;
  // without a ledger there is no quota
  if (!ctx.uploads.ledger) return readBody(ctx.req, maxBytes);
  const within = (storedNow: number) =>
    storedNow + receipt.ownerArriving() <= quotaBytes && receipt.ownerHeld() <= quotaBytes;
  const admitted = within(stored);
  if (!admitted) receipt.release();
  const bytes = await readBody(
    ctx.req,
    maxBytes,
    admitted &&
      ((size) => {
        receipt.count(size);
        if (within(stored)) return true;
        receipt.release();
        return false;
      }),
  );
  if (receipt.released) throw quotaExceeded(quotaBytes);
  // Again with the stored ones now: another upload of the same owner may have been stored meanwhile.
  if (!within(await storedPending(ctx))) throw quotaExceeded(quotaBytes);
  receipt.markRead();
  return bytes;
}

/**
 * `POST /v1/attachments` (raw body up to 10 MiB) and `GET /v1/attachments/{id}` for its owner,
 * streamed from the store chunk by chunk.
 */
export const attachmentRoutes: Route[] = [
  {
    method: "POST",
    pattern: /^\/v1\/attachments$/,
    name: "POST /v1/attachments",
    async handle(ctx) {
      const name = filenameOf(ctx.req.headers["x-filename"]);
      const type = contentTypeOf(ctx.req.headers["content-type"]);
      const stored = await storedPending(ctx);
      // Counted from here until stored, with no await before the check: uploads sent at once each
      // see the ones admitted before them.
      // An upload is counted at least `UPLOAD_MIN_COUNTED_BYTES`, as the ledger counts it once stored.
      const receipt = ctx.uploads.receiving.receive(
        ctx.principal.name,
        Math.max(declaredBytes(ctx.req, ctx.uploads.maxBytes), UPLOAD_MIN_COUNTED_BYTES),
      );
      try {
        const bytes = await receiveUpload(ctx, receipt, stored);
        const attachmentId = await ctx.host.putAttachment(ctx.principal, {
          name,
          type,
          bytes: new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength),
        });
        sendJson(ctx.res, 200, { attachmentId });
      } finally {
        receipt.release();
      }
    },
  },
  {
    method: "GET",
    pattern: /^\/v1\/attachments\/([^/]+)$/,
    name: "GET /v1/attachments/:id",
    async handle(ctx) {
      const attachmentId = idParam(ctx, 0, "attachmentId");
      const found = await ctx.host.readAttachment(ctx.principal, attachmentId);
      // Someone else's attachment answers exactly like a missing one.
      if (!found) throw fail("attachment_not_found", "no such attachment");
      ctx.res.writeHead(200, {
        "content-type": found.type,
        "content-length": found.size,
        "content-disposition": `attachment; filename*=UTF-8''${encodeURIComponent(found.name)}`,
        // Stored bytes are untrusted: never let a browser run them as a page of this origin.
        "content-security-policy": "sandbox",
        "x-content-type-options": "nosniff",
        "cache-control": "private, no-store",
      });
      // One stored chunk is read only when the socket has taken the one before: a reader that
      // stops reading holds the host to a chunk and the socket's backlog, never a whole body.
      // A body deleted while sent (session deleted, upload expired) ends the connection early,
      // so the client sees fewer bytes than Content-Length announced.
      await pipeline(Readable.from(found.chunks(), { objectMode: false }), ctx.res).catch(() => undefined);
    },
  },
];
