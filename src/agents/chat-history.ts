import type { SessionEvent } from "../../protocol/index.js";

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
