import { SqliteSessionStore, type SqliteStoreOptions } from "../../src/store/sqlite-store.js";
import { tempDir } from "../support/temp-dir.js";

/** A store on a real SQLite file in a fresh temp folder; `dispose()` closes it and deletes the folder. */
export function openTempStore(options: SqliteStoreOptions = {}) {
  const dir = tempDir("sessionmux-store-");
  const path = dir.file("sessions.db");
  const store = SqliteSessionStore.open(path, options);
  return {
    store,
    path,
    dir,
    async dispose() {
      await store.close();
      dir.remove();
    },
  };
}

export function userMessage(text: string, messageId = `m-${Math.random().toString(36).slice(2)}`) {
  return {
    type: "user/message" as const,
    data: { messageId, source: "user" as const, text, attachments: [], meta: {} },
  };
}

export function turnStart(turnId: string) {
  return { type: "turn/start" as const, data: { turnId, trigger: "prompt" as const } };
}

export function turnEnd(
  turnId: string,
  state: "completed" | "failed" | "cancelled" | "interrupted" = "completed",
) {
  return { type: "turn/end" as const, data: { turnId, state } };
}

export function delta(turnId: string, text: string) {
  return { type: "assistant/delta" as const, data: { turnId, text } };
}
