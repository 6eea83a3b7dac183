import { Type } from "@sinclair/typebox";

/** §1: 1–128 chars of [A-Za-z0-9_-]. */
export const SESSION_ID_PATTERN = "^[A-Za-z0-9_-]{1,128}$";
const sessionIdRegex = new RegExp(SESSION_ID_PATTERN);

export const SessionIdSchema = Type.String({ pattern: SESSION_ID_PATTERN, minLength: 1, maxLength: 128 });

export function isSessionId(value: unknown): value is string {
  return typeof value === "string" && sessionIdRegex.test(value);
}

/** Interaction, queue item, turn and message ids share the session id alphabet. */
export const OpaqueIdSchema = Type.String({ pattern: SESSION_ID_PATTERN, minLength: 1, maxLength: 128 });
