import type { NewEvent } from "../../protocol/index.js";

/**
 * A turn ends once: each `turn/end` naming a turn that is not the log's open one where it would
 * land (ended already, or never opened) is left out of the append. Decided inside the append's
 * transaction, from the session's projection as it stands under its lock, so no writer makes a
 * second end: a host that wrote an end again because it lost the first one's answer (PostgreSQL:
 * its connection died after its COMMIT went out), or a takeover's `interrupted` end racing the
 * owner's own, or a late end of a turn a restart closed.
 */
export function withoutEndsOfClosedTurns(openTurnId: string | null, events: NewEvent[]): NewEvent[] {
  let open = openTurnId;
  let kept: NewEvent[] | undefined;
  for (const [index, event] of events.entries()) {
    if (event.type === "turn/start") open = event.data.turnId;
    else if (event.type === "turn/end") {
      if (event.data.turnId === open) open = null;
      else {
        kept ??= events.slice(0, index);
        continue;
      }
    }
    kept?.push(event);
  }
  return kept ?? events;
}
