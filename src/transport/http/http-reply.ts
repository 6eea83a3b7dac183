import type { ServerResponse } from "node:http";
import { type ErrorCode, httpStatus, SessionmuxError } from "../../../protocol/index.js";

/**
 * The parts of a refusal's `data` its body carries, under §8's snake_case names: what a client
 * needs to act on it (the field to fix, the answer that won, the epoch to reload at, the head, the bound it hit).
 * Never an id, so another principal's session answers byte for byte like a missing one.
 */
const BODY_FIELDS: Partial<Record<ErrorCode, Readonly<Record<string, string>>>> = {
  bad_request: { field: "field" },
  interaction_already_resolved: { winner: "resolution" },
  epoch_mismatch: { epoch: "epoch" },
  cursor_ahead: { head_seq: "headSeq", epoch: "epoch" },
  transcript_too_large: { max_data_bytes: "maxDataBytes" },
  storage_quota_exceeded: { max_bytes: "maxBytes", stored_bytes: "storedBytes" },
  upload_quota_exceeded: { max_bytes: "limit" },
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
 * `{"error": code}` with the code's status, and the fields of `BODY_FIELDS`. The message only for
 * `bad_request`: it says what is wrong with the caller's own input, checked before any session is
 * looked up; any other message could tell another principal's session from a missing one.
 */
export function errorBody(err: SessionmuxError): Record<string, unknown> {
  const body: Record<string, unknown> = { error: err.code };
  if (err.code === "bad_request") body.message = err.message;
  const fields = BODY_FIELDS[err.code];
  const data = err.data;
  if (!fields || data === null || typeof data !== "object") return body;
  for (const [bodyKey, dataKey] of Object.entries(fields)) {
    const value = (data as Record<string, unknown>)[dataKey];
    if (value !== undefined) body[bodyKey] = value;
  }
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
