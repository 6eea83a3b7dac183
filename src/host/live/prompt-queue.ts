import type { QueueItem } from "../../../protocol/index.js";
import type { QueuedPromptInput, StoredQueueItem } from "../../store/live-state-store.js";
import type { QueuedText } from "../../store/session-store.js";

/** What a queued prompt needs to become a turn later; the wire sees only `QueueItem`. */
export type PromptInput = QueuedPromptInput;

/**
 * A cache of the store's durable queues, kept by the store's live-state notices (each carries a
 * session's whole queue, last wins). It answers synchronous questions (is anything queued, which
 * item is next) without an await; every change goes through the store.
 */
export class PromptQueue {
  readonly #queues = new Map<string, StoredQueueItem[]>();
  readonly #onChange: (sessionId: string, owner: string, items: QueueItem[]) => void;

  constructor(onChange: (sessionId: string, owner: string, items: QueueItem[]) => void) {
    this.#onChange = onChange;
  }

  /** A session's queue as read from the store (at start), without a delta. */
  load(sessionId: string, items: StoredQueueItem[]): void {
    if (items.length > 0) this.#queues.set(sessionId, items);
  }

  /** A committed change of one session's queue. */
  apply(sessionId: string, owner: string, items: StoredQueueItem[]): void {
    if (items.length > 0) this.#queues.set(sessionId, items);
    else this.#queues.delete(sessionId);
    this.#onChange(sessionId, owner, items.map(toItem));
  }

  first(sessionId: string): StoredQueueItem | undefined {
    return this.#queues.get(sessionId)?.[0];
  }

  find(sessionId: string, itemId: string): StoredQueueItem | undefined {
    return this.#queues.get(sessionId)?.find((item) => item.itemId === itemId);
  }

  items(sessionId: string): QueueItem[] {
    return (this.#queues.get(sessionId) ?? []).map(toItem);
  }

  size(sessionId: string): number {
    return this.#queues.get(sessionId)?.length ?? 0;
  }

  all(): { sessionId: string; owner: string; items: QueueItem[] }[] {
    const out: { sessionId: string; owner: string; items: QueueItem[] }[] = [];
    for (const [sessionId, queue] of this.#queues)
      out.push({ sessionId, owner: queue[0]!.owner, items: queue.map(toItem) });
    return out;
  }
}

/**
 * A queued prompt's text as the host read it, which an edit changes: its start or its take as an
 * interjection carries it, so one edited meanwhile is not run with the old text.
 */
export function queuedText(input: PromptInput): QueuedText {
  return input.display === undefined ? { text: input.text } : { text: input.text, display: input.display };
}

export function toItem(prompt: StoredQueueItem): QueueItem {
  return {
    itemId: prompt.itemId,
    text: prompt.input.display ?? prompt.input.text,
    queuedAt: prompt.queuedAt,
  };
}
