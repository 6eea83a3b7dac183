import type { IncomingMessage } from "node:http";
import { fail } from "./http-reply.js";
import { JSON_BODY_MAX_VALUES, jsonValuesOver } from "./json-values.js";

/**
 * Reads a request body up to `limit` bytes. A declared or streamed size above the limit fails
 * `payload_too_large` as soon as it is known; the caller answers and closes the connection
 * instead of reading the rest. `keep: false` reads the body to its end and drops it (an empty
 * buffer), for a request refused for another reason whose client should still get the answer.
 * `keep` may also be asked at each chunk, with the bytes read so far: once it answers false, what
 * was kept is dropped and the rest is read the same way.
 */
export function readBody(
  req: IncomingMessage,
  limit: number,
  keep: boolean | ((size: number) => boolean) = true,
): Promise<Buffer> {
  const declared = req.headers["content-length"];
  if (declared !== undefined && Number(declared) > limit) {
    return Promise.reject(fail("payload_too_large", `body over ${limit} bytes`));
  }
  // Ended before this read began: something in front of the mount consumed the body (a body
  // parser such as express.json() before mux.handler), so no byte of it will ever arrive. The
  // app's set-up is at fault, not the client's request: an internal error, logged with the cure.
  if (req.readableEnded) {
    return Promise.reject(
      new Error(
        "the request body was read before sessionmux got the request: mount mux.handler before any body parser (express.json(), body-parser)",
      ),
    );
  }
  // A request is read after awaits (its turn behind the connection's earlier answers, an upload's
  // quota read): one whose connection went meanwhile emitted its 'close' already, and waiting for
  // an event of it would wait for ever, holding what its body was counted at
  if (req.destroyed) {
    return Promise.reject(fail("bad_request", "the connection closed before the body ended"));
  }
  return new Promise((resolve, reject) => {
    const parts: Buffer[] = [];
    let size = 0;
    let keeping = keep !== false;
    let settled = false;
    const finish = (err: unknown, value?: Buffer) => {
      if (settled) return;
      settled = true;
      req.off("data", onData);
      req.off("end", onEnd);
      req.off("error", onError);
      req.off("close", onClose);
      if (err) reject(err);
      else resolve(value!);
    };
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size > limit) {
        req.pause();
        finish(fail("payload_too_large", `body over ${limit} bytes`));
        return;
      }
      if (keeping && typeof keep === "function" && !keep(size)) {
        keeping = false;
        parts.length = 0;
      }
      if (keeping) parts.push(chunk);
    };
    const onEnd = () => finish(undefined, keeping ? Buffer.concat(parts, size) : Buffer.alloc(0));
    const onError = (err: Error) => finish(fail("bad_request", `body unreadable: ${err.message}`));
    // A peer that goes away mid-body must not leave the read pending forever.
    const onClose = () => finish(fail("bad_request", "the connection closed before the body ended"));
    req.on("data", onData);
    req.on("close", onClose);
    req.on("end", onEnd);
    req.on("error", onError);
  });
}

/** The size a request declares for its body, at most `limit`; 0 for a chunked body. */
export function declaredBytes(req: IncomingMessage, limit: number): number {
  const declared = Number(req.headers["content-length"] ?? 0);
  return Number.isFinite(declared) ? Math.min(declared, limit) : 0;
}

/** A JSON object body; anything else (malformed, an array, a number) is `bad_request`. */
export async function readJsonObject(req: IncomingMessage, limit: number): Promise<Record<string, unknown>> {
  return parseJsonObject(await readBody(req, limit));
}

/** `bytes` as a JSON object; anything else, or one of more values than the bound, is `bad_request`. */
export function parseJsonObject(bytes: Buffer): Record<string, unknown> {
  const max = JSON_BODY_MAX_VALUES;
  if (jsonValuesOver(bytes, max)) {
    throw fail("bad_request", `body holds more than ${max} JSON values`, { field: "/" });
  }
  let value: unknown;
  try {
    value = JSON.parse(bytes.toString("utf8"));
  } catch {
    throw fail("bad_request", "body is not valid JSON", { field: "/" });
  }
  if (value === null || typeof value !== "object" || Array.isArray(value)) {
    throw fail("bad_request", "body must be a JSON object", { field: "/" });
  }
  return value as Record<string, unknown>;
}
