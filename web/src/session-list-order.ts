import type { SessionRow } from "../../protocol/index.js";

/** How many rows the list shows, and how many of them parked sessions may take at the top. */
export const LIST_SIZE = 50;
export const MAX_PINNED = 20;

export interface OrderedList {
  pinned: SessionRow[];
  recent: SessionRow[];
}

const newestFirst = (a: SessionRow, b: SessionRow) =>
  b.updatedAt - a.updatedAt || (a.sessionId < b.sessionId ? -1 : a.sessionId > b.sessionId ? 1 : 0);

/**
 * Newest `updatedAt` first, with sessions waiting on the operator (`input-required`) pinned on top.
 * Pins are capped so a pile of parked chats never pushes the newest ones out of the list.
 */
export function orderSessions(
  rows: Iterable<SessionRow>,
  size = LIST_SIZE,
  maxPinned = MAX_PINNED,
): OrderedList {
  const all = [...rows].sort(newestFirst);
  const pinned = all.filter((r) => r.lastState === "input-required").slice(0, Math.min(maxPinned, size));
  const pinnedIds = new Set(pinned.map((r) => r.sessionId));
  const recent = all.filter((r) => !pinnedIds.has(r.sessionId)).slice(0, size - pinned.length);
  return { pinned, recent };
}
