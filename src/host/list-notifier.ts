import type { SessionStore } from "../store/session-store.js";
import type { LiveState } from "./live/live-state.js";
import type { NotificationHub } from "./notifications.js";
import { toRow } from "./session-row.js";

/**
 * A failed turn another host ended longer ago than this is not told as `agent.error`: it reached
 * this host late (read back after its LISTEN connection was down), and is no news to a person;
 * the turn's state is in the log and the list.
 */
export const AGENT_ERROR_NEWS_MS = 30_000;

/**
 * §6 `session.updated`: a commit that moves a session in the list (an operator message, a clear)
 * or renames it. Driven by the store's commit notices, so every writer path is covered once.
 * `session.added` and `session.removed` of a session another host created or deleted (the call
 * that did it announced it to that host's sockets only; heard as it happened, or read back after
 * this host's LISTEN connection was down), and `agent.error` of a turn that failed
 * on another host; this host's own calls and turns announce theirs.
 */
export function watchListChanges(
  store: SessionStore,
  live: LiveState,
  hub: NotificationHub,
  now: () => number = Date.now,
): () => void {
  return store.subscribeAll((sessionId, notice, projection) => {
    if (notice.kind === "delete" && notice.remote) {
      hub.publish(notice.remote.owner, { name: "session.removed", value: { sessionId } });
      return;
    }
    if (notice.kind === "clear") {
      // the log and its prompts are gone: the row is emptied and moves back to its creation time
      if (projection)
        hub.publish(projection.owner, { name: "session.updated", value: { row: toRow(projection, live) } });
      return;
    }
    const createdElsewhere = notice.kind === "create" && notice.remote === true;
    // a create read in pages: the first (from seq 1) adds it; the rest are a fork's copied rows,
    // a failed turn among them no news
    const added =
      (createdElsewhere && notice.events[0]?.seq === 1) || (notice.kind === "meta" && notice.created);
    if (added && projection) {
      hub.publish(projection.owner, { name: "session.added", value: { row: toRow(projection, live) } });
      return;
    }
    if (createdElsewhere) return;
    if (!projection || notice.kind !== "append") return;
    if (notice.remote) {
      // the owner's turn runner told its own sockets; this host's hear it from the log
      for (const event of notice.events) {
        if (event.type !== "turn/end" || event.data.state !== "failed") continue;
        if (now() - event.at > AGENT_ERROR_NEWS_MS) continue;
        hub.publish(projection.owner, {
          name: "agent.error",
          value: { sessionId, message: event.data.error ?? "turn failed" },
        });
      }
    }
    const moved = notice.events.some(
      (e) => e.type === "session/renamed" || (e.type === "user/message" && e.data.source === "user"),
    );
    if (moved)
      hub.publish(projection.owner, { name: "session.updated", value: { row: toRow(projection, live) } });
  });
}
