import type { AttachmentInput, QueueItem, UserMessageMeta } from "../../../protocol/index.js";

/** What a queued prompt needs to become a turn later; the wire sees only `QueueItem`. */
export interface PromptInput {
  clientMessageId?: string;
  text: string;
  display?: string;
  hidden?: boolean;
  attachments?: AttachmentInput[];
  meta?: UserMessageMeta;
}

export interface QueuedPrompt {
  readonly itemId: string;
  readonly queuedAt: number;
  input: PromptInput;
}

/**
 * Per-session FIFO of prompts that arrived while a turn ran. Every change reports the complete
 * snapshot of that session's queue (control deltas are snapshots, last wins).
 */
export class PromptQueue {
  readonly #queues = new Map<string, QueuedPrompt[]>();
  readonly #onChange: (sessionId: string, items: QueueItem[]) => void;

  constructor(onChange: (sessionId: string, items: QueueItem[]) => void) {
    this.#onChange = onChange;
  }

  enqueue(sessionId: string, prompt: QueuedPrompt): void {
    const queue = this.#queues.get(sessionId) ?? [];
    queue.push(prompt);
    this.#queues.set(sessionId, queue);
    this.#changed(sessionId);
  }

  /** Removes and returns the oldest item, if any. */
  shift(sessionId: string): QueuedPrompt | undefined {
    const queue = this.#queues.get(sessionId);
    const first = queue?.shift();
    if (first) this.#changed(sessionId);
    return first;
  }

  /** Removes and returns one item; undefined when it is not queued. */
  take(sessionId: string, itemId: string): QueuedPrompt | undefined {
    const queue = this.#queues.get(sessionId);
    const index = queue?.findIndex((p) => p.itemId === itemId) ?? -1;
    if (!queue || index < 0) return undefined;
    const [taken] = queue.splice(index, 1);
    this.#changed(sessionId);
    return taken;
  }

  edit(sessionId: string, itemId: string, text: string): boolean {
    const item = this.#queues.get(sessionId)?.find((p) => p.itemId === itemId);
    if (!item) return false;
    // the stored message shows what the operator typed last, so an edit replaces both texts
    item.input = { ...item.input, text, display: undefined };
    this.#changed(sessionId);
    return true;
  }

  clear(sessionId: string): void {
    const had = (this.#queues.get(sessionId)?.length ?? 0) > 0;
    this.#queues.delete(sessionId);
    if (had) this.#changed(sessionId);
  }

  /** Drops a detached session's queue without a delta: `detached` already tells clients. */
  forget(sessionId: string): void {
    this.#queues.delete(sessionId);
  }

  items(sessionId: string): QueueItem[] {
    return (this.#queues.get(sessionId) ?? []).map(toItem);
  }

  size(sessionId: string): number {
    return this.#queues.get(sessionId)?.length ?? 0;
  }

  all(): { sessionId: string; items: QueueItem[] }[] {
    const out: { sessionId: string; items: QueueItem[] }[] = [];
    for (const [sessionId, queue] of this.#queues)
      if (queue.length > 0) out.push({ sessionId, items: queue.map(toItem) });
    return out;
  }

  #changed(sessionId: string): void {
    const queue = this.#queues.get(sessionId);
    if (queue && queue.length === 0) this.#queues.delete(sessionId);
    this.#onChange(sessionId, this.items(sessionId));
  }
}

function toItem(prompt: QueuedPrompt): QueueItem {
  return {
    itemId: prompt.itemId,
    text: prompt.input.display ?? prompt.input.text,
    queuedAt: prompt.queuedAt,
  };
}
