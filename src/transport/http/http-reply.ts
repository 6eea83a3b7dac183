import type { ServerResponse } from "node:http";
import { type ErrorCode, httpStatus, SessionmuxError } from "../../../protocol/index.js";

/** Error codes whose `data` a client needs in the body (the winning answer, the bad field). */
const DATA_FIELD: Partial<Record<ErrorCode, string>> = {
  interaction_already_resolved: "winner",
  bad_request: "field",
};

export function sendJson(res: ServerResponse, status: number, body: unknown): void {
  sendJsonText(res, status, JSON.stringify(body));
}

/** For bodies already serialized. */
export function sendJsonText(res: ServerResponse, status: number, json: string): void {
  sendJsonParts(res, status, [Buffer.from(json, "utf8")]);
}

/** A JSON body assembled from encoded pieces (cached parts are written as they are, not re-encoded). */
export function sendJsonParts(res: ServerResponse, status: number, parts: Buffer[]): void {
  let length = 0;
  for (const part of parts) length += part.length;
  res.writeHead(status, {
    "content-type": "application/json; charset=utf-8",
    "content-length": length,
    "cache-control": "no-store",
  });
  if (parts.length === 1) {
    res.end(parts[0]);
    return;
  }
  res.cork();
  for (const part of parts) res.write(part);
  res.end();
  res.uncork();
}

/**
 * `{"error": code}` with the code's status. The body never carries the message or ids, so another
 * principal's session answers byte for byte like a missing one.
 */
export function errorBody(err: SessionmuxError): Record<string, unknown> {
  const body: Record<string, unknown> = { error: err.code };
  const key = DATA_FIELD[err.code];
  if (key && err.data !== undefined) body[key] = pick(err.data, key);
  return body;
}

export function sendError(res: ServerResponse, err: SessionmuxError): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  sendJson(res, httpStatus(err.code), errorBody(err));
}

export function fail(code: ErrorCode, message: string, data?: unknown): SessionmuxError {
  return new SessionmuxError(code, message, data === undefined ? {} : { data });
}

/** Hosts put the winner either bare or under a named key; the body always names it `winner`. */
function pick(data: unknown, key: string): unknown {
  if (data !== null && typeof data === "object") {
    const record = data as Record<string, unknown>;
    if (key in record) return record[key];
    if (key === "winner" && "resolution" in record) return record.resolution;
  }
  return data;
}
