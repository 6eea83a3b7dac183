import { SessionmuxError } from "../../protocol/index.js";
import { CountsByKey } from "../store/counts-by-key.js";

const ROOM_LIMIT = "turn_attachment_bytes_per_principal";

/**
 * For the refusal `take` throws past the bound, the bytes the principal's turns held then (room
 * comes back when one of them ends); undefined for any other error.
 */
export function heldWhenRefused(err: unknown): number | undefined {
  if (!(err instanceof SessionmuxError) || err.code !== "overloaded") return undefined;
  const data = err.data as { limit?: unknown; heldBytes?: unknown } | undefined;
  return data?.limit === ROOM_LIMIT && typeof data.heldBytes === "number" ? data.heldBytes : undefined;
}

/**
 * The attachment bytes one principal's running turns hold: each turn's agent receives its
 * prompt's attachments whole, uploads read from the store, and keeps them until the turn ends.
 * One upload may be named by prompts in any number of the principal's sessions, and a named one
 * no longer counts on the upload quota, so without this bound one token made every running turn
 * hold up to 32 uploads of the largest size. Counted from the sizes the upload rows and inline
 * bytes state, before any upload is read; given back once the turn ends, however it ends.
 */
export class TurnAttachmentBudget {
  readonly #held = new CountsByKey();
  /** Per principal, what to call once some of its bytes are given back (see `whenRoom`). */
  readonly #waiting = new Map<string, Set<() => void>>();

  constructor(readonly maxBytes: number) {}

  /** The bytes the principal's running turns hold now. */
  heldBy(owner: string): number {
    return this.#held.get(owner);
  }

  /**
   * A prompt whose attachments alone pass the bound could never run: refused for good with
   * `payload_too_large` (non-retryable), before it is written or queued.
   */
  assertFitsAlone(bytes: number): void {
    if (bytes <= this.maxBytes) return;
    throw new SessionmuxError(
      "payload_too_large",
      `the prompt's attachments hold ${bytes} bytes; a principal's running turns may hold ${this.maxBytes}`,
      { data: { limit: "turn_attachment_bytes", maxBytes: this.maxBytes, bytes } },
    );
  }

  /**
   * Counts `bytes` for the principal and returns what gives them back (once, however often it is
   * called). Past the bound it is `overloaded` (retryable: once a running turn ends there is
   * room). `alone`: taken whatever their size when the principal holds nothing else, so a
   * queued prompt accepted under a larger bound still runs, one at a time, and none waits for good.
   */
  take(owner: string, bytes: number, alone = false): () => void {
    if (bytes === 0) return () => undefined;
    const heldBytes = this.heldBy(owner);
    if (heldBytes + bytes > this.maxBytes && !(alone && heldBytes === 0)) {
      throw new SessionmuxError(
        "overloaded",
        `the principal's running turns hold ${heldBytes} bytes of attachments; this prompt's ${bytes} more would pass ${this.maxBytes}`,
        { data: { limit: ROOM_LIMIT, maxBytes: this.maxBytes, heldBytes, bytes } },
      );
    }
    this.#held.add(owner, bytes);
    let given = false;
    return () => {
      if (given) return;
      given = true;
      this.#held.add(owner, -bytes);
      const waiting = this.#waiting.get(owner);
      if (!waiting) return;
      this.#waiting.delete(owner);
      for (const wake of waiting) wake();
    };
  }

  /**
   * Calls `wake` once the principal's running turns next give bytes back, so a queued prompt
   * refused for room starts when there may be some, not at its next retry (up to 15 s later).
   * `heldWhenRefused` is what they held at the refusal: holding less now, some were given back
   * since (the refusal reaches its caller a few steps after it was thrown), so `wake` runs at once,
   * in a microtask. Holding as much or more, a turn holds bytes and will give them back. Returns
   * what forgets it. Each waiter is one session's next queued prompt, so there are at most as many
   * as the principal has sessions live on this host.
   */
  whenRoom(owner: string, heldWhenRefused: number, wake: () => void): () => void {
    let forgotten = false;
    const forget = () => {
      forgotten = true;
      const set = this.#waiting.get(owner);
      if (!set?.delete(once) || set.size > 0) return;
      this.#waiting.delete(owner);
    };
    const once = () => {
      if (forgotten) return;
      forget();
      wake();
    };
    const waiting = this.#waiting.get(owner) ?? new Set();
    this.#waiting.set(owner, waiting);
    waiting.add(once);
    if (this.heldBy(owner) < heldWhenRefused) queueMicrotask(once);
    return forget;
  }
}
