import type { SessionEvent } from "../../protocol/index.js";
import type { TurnContext } from "./agent.js";

export interface ChatMessage {
  role: "system" | "user" | "assistant";
  content: string;
}

/**
 * Rebuilds the chat from the log for a model: operator messages (interjections included) and
 * each turn's assistant text. The current turn is left out; its prompt is sent as the model saw it.
 * Of the earlier turns, only the newest whose messages fit in `maxChars` together are kept, each
 * whole (a model never reads half a turn): older ones are left out, and a newest turn over the
 * budget on its own leaves no history.
 */
export function chatHistory(
  events: SessionEvent[],
  currentTurnId: string,
  maxChars = Number.POSITIVE_INFINITY,
): ChatMessage[] {
  const turns: ChatMessage[][] = [[]];
  let messages = turns[0]!;
  let turnId: string | undefined;
  let assistant = "";
  const flush = () => {
    if (assistant) messages.push({ role: "assistant", content: assistant });
    assistant = "";
  };
  for (const event of events) {
    if (event.type === "turn/start") {
      flush();
      turnId = event.data.turnId;
      messages = [];
      turns.push(messages);
    }
    if (turnId === currentTurnId) continue;
    if (event.type === "user/message" && event.data.text) {
      flush();
      messages.push({ role: "user", content: event.data.text });
    } else if (event.type === "assistant/delta") {
      assistant += event.data.text;
    }
  }
  flush();
  let kept = turns.length;
  let chars = 0;
  while (kept > 0) {
    const size = turns[kept - 1]!.reduce((sum, m) => sum + m.content.length, 0);
    if (chars + size > maxChars) break;
    chars += size;
    kept--;
  }
  return turns.slice(kept).flat();
}

/** What a chat shows of an earlier turn (see `chatHistory`); the rest of it is not kept. */
const CHAT_EVENTS: ReadonlySet<string> = new Set(["turn/start", "user/message", "assistant/delta"]);

/** Characters a chat takes from an event (see `chatHistory`). */
function chatChars(event: SessionEvent): number {
  if (event.type === "user/message" || event.type === "assistant/delta") return event.data.text?.length ?? 0;
  return 0;
}

/**
 * The log a turn's model call needs, read from the head back a page at a time: the current turn
 * whole, and before it the earlier turns until their chat passed `maxChars` (the turn that passed
 * it included, for `chatHistory` to leave out), keeping of them only what a chat shows. A long
 * session costs the pages back to there, never the whole log, and holds about `maxChars` of it.
 */
export async function recentHistory(
  turn: Pick<TurnContext, "turnId" | "historyPage">,
  maxChars: number,
): Promise<SessionEvent[]> {
  const newestFirst: SessionEvent[] = [];
  let inCurrentTurn = true;
  let chars = 0;
  let before: number | undefined;
  for (;;) {
    const page = await turn.historyPage(before);
    for (let i = page.events.length - 1; i >= 0; i--) {
      const event = page.events[i]!;
      if (inCurrentTurn) {
        newestFirst.push(event);
        if (event.type === "turn/start" && event.data.turnId === turn.turnId) inCurrentTurn = false;
        continue;
      }
      if (!CHAT_EVENTS.has(event.type)) continue;
      newestFirst.push(event);
      chars += chatChars(event);
      if (event.type === "turn/start" && chars > maxChars) return newestFirst.reverse();
    }
    const oldest = page.events[0];
    if (!page.hasMore || !oldest) return newestFirst.reverse();
    before = oldest.seq;
  }
}
