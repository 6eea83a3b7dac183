import { SessionmuxError } from "../../protocol/index.js";

/** The position after the last row of a list page: rows strictly older come next. */
export interface ListPosition {
  updatedAt: number;
  sessionId: string;
}

/** `session.list` cursors are opaque to clients; this is the only place that formats them. */
export function encodeListCursor(position: ListPosition): string {
  return Buffer.from(`${position.updatedAt}:${position.sessionId}`, "utf8").toString("base64url");
}

export function decodeListCursor(cursor: string): ListPosition {
  const text = Buffer.from(cursor, "base64url").toString("utf8");
  const colon = text.indexOf(":");
  const updatedAt = Number(text.slice(0, colon));
  const sessionId = text.slice(colon + 1);
  if (colon <= 0 || !Number.isSafeInteger(updatedAt) || sessionId.length === 0) {
    throw new SessionmuxError(
      "bad_request",
      "`before` is not a cursor this host issued; list again without it",
      {
        data: { field: "/before" },
      },
    );
  }
  return { updatedAt, sessionId };
}
