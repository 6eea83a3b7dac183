import type { SessionEvent } from "../../protocol/index.js";
import type { SessionStore } from "../store/session-store.js";

/**
 * The log's newest events searched for an append whose write failed on the store: only writes of
 * other callers (a rename, a running job's end) can follow it, in the moment since.
 */
const LOOKBACK = 500;

/**
 * An append that failed on the store may still have committed (PostgreSQL: its connection died
 * after its COMMIT went out, before the answer came back). Its first event is the one `first`
 * picks out among the log's newest events: found, the `count` events from it (the append's own,
 * which commit together) and the epoch, as the append would have answered; undefined when it is
 * not there, or when the read fails too.
 */
export async function committedAnyway(
  store: Pick<SessionStore, "page">,
  sessionId: string,
  first: (event: SessionEvent) => boolean,
  count: number,
): Promise<{ epoch: string; events: SessionEvent[] } | undefined> {
  const page = await store.page(sessionId, { limit: LOOKBACK }).catch(() => undefined);
  if (page?.status !== "ok") return undefined;
  // the same decoded rows `readAfter` returns; the page's wire schema types them loosely
  const newest = page.events as SessionEvent[];
  const at = newest.findIndex(first);
  if (at < 0) return undefined;
  return { epoch: page.epoch, events: newest.slice(at, at + count) };
}
