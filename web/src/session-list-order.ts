import type { SessionRow } from "../../protocol/index.js";

/** How many rows one page of the list holds, and how many parked sessions are pinned at the top. */
export const LIST_SIZE = 50;
export const MAX_PINNED = 20;

export interface OrderedList {
  pinned: SessionRow[];
  recent: SessionRow[];
}

/** Where a row stands in the host's list order (`session.list`: newest first, ties by id). */
export type ListPosition = Pick<SessionRow, "updatedAt" | "sessionId">;

const newestFirst = (a: ListPosition, b: ListPosition) =>
  b.updatedAt - a.updatedAt || (a.sessionId < b.sessionId ? -1 : a.sessionId > b.sessionId ? 1 : 0);

/**
 * Newest `updatedAt` first, with sessions waiting on the operator (`input-required`) pinned on top.
 * Pins are capped so a pile of parked chats never pushes the newest ones out of the list.
 *
 * `end`: the last row of the last page loaded, while older pages are not. A row known to stand
 * past it (a restored or renamed old session, a parked one beyond the pins) waits for its page,
 * so the list is always an unbroken run of the host's order, never one with holes above its end.
 */
export function orderSessions(
  rows: Iterable<SessionRow>,
  end?: ListPosition,
  maxPinned = MAX_PINNED,
): OrderedList {
  const all = [...rows].sort(newestFirst);
  const pinned = all.filter((r) => r.lastState === "input-required").slice(0, maxPinned);
  const pinnedIds = new Set(pinned.map((r) => r.sessionId));
  const recent = all.filter(
    (r) => !pinnedIds.has(r.sessionId) && (end === undefined || newestFirst(r, end) <= 0),
  );
  return { pinned, recent };
}
