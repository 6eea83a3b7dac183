import type { SessionEvent } from "../../protocol/index.js";

export interface ChatMessage {
  role: "system" | "user" | "assistant";
  content: string;
}

/**
 * Rebuilds the chat from the log for a model: operator messages (interjections included) and
 * each turn's assistant text. The current turn is left out; its prompt is sent as the model saw it.
 */
export function chatHistory(events: SessionEvent[], currentTurnId: string): ChatMessage[] {
  const messages: ChatMessage[] = [];
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
  return messages;
}
