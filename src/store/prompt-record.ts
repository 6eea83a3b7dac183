import type { SessionEvent } from "../../protocol/index.js";
import type { PromptRecord } from "./session-store.js";

/**
 * The prompt record as stored with its append: a prompt that started a turn gets the seq of its
 * stored `user/message`, known only once the events are sequenced. Every store writes this one.
 */
export function promptRecordAfterAppend(
  record: PromptRecord,
  appended: readonly SessionEvent[],
): PromptRecord {
  const stored = { ...record };
  const message = appended.find((event) => event.type === "user/message");
  if (stored.seq === undefined && !stored.queued && message) stored.seq = message.seq;
  return stored;
}
