import type { SessionStore } from "../store/session-store.js";
import type { LiveState } from "./live/live-state.js";
import type { NotificationHub } from "./notifications.js";
import { toRow } from "./session-row.js";

/**
 * §6 `session.updated`: a commit that moves a session in the list (an operator message) or
 * renames it. Driven by the store's commit notices, so every writer path is covered once.
 */
export function watchListChanges(store: SessionStore, live: LiveState, hub: NotificationHub): () => void {
  return store.subscribeAll((_sessionId, notice, projection) => {
    if (!projection || notice.kind !== "append") return;
    const moved = notice.events.some(
      (e) => e.type === "session/renamed" || (e.type === "user/message" && e.data.source === "user"),
    );
    if (moved)
      hub.publish(projection.owner, { name: "session.updated", value: { row: toRow(projection, live) } });
  });
}
