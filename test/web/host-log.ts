import type { SessionEvent } from "../../protocol/index.js";
import type { SessionmuxClient } from "../../src/client/index.js";

/** The whole durable log of a session, read over the wire the way any client would. */
export async function readLog(client: SessionmuxClient, sessionId: string): Promise<SessionEvent[]> {
  const events: SessionEvent[] = [];
  for (;;) {
    const page = await client.call("session.page", { sessionId, afterSeq: events.length, limit: 1000 });
    events.push(...(page.events as SessionEvent[]));
    if (!page.hasMore || page.events.length === 0) return events;
  }
}

/** Every assistant delta of the log joined: what the transcript must show, chunk for chunk. */
export function assistantText(events: SessionEvent[]): string {
  return events.flatMap((e) => (e.type === "assistant/delta" ? [e.data.text] : [])).join("");
}

export function turnEnds(events: SessionEvent[]): number {
  return events.filter((e) => e.type === "turn/end").length;
}
