import type { EventDataOf } from "../../protocol/index.js";
import { decodeValue } from "./event-codec.js";

/** A stored event's seq and its MessagePack data, as both stores read rows. */
export interface StoredEventData {
  seq: number;
  data: Uint8Array;
}

/**
 * What search indexes of a turn at its `turn/end`: the turn's assistant text joined into one
 * document at its first delta's seq. None when the turn's prompt (its first user message) is
 * incognito: the answer would give away what the prompt kept out of search.
 */
export function turnSearchDocument(
  turnId: string,
  prompt: Uint8Array | undefined,
  /** Read only when needed: an iterator left open would keep a SQLite connection busy. */
  deltas: () => Iterable<StoredEventData>,
): { seq: number; text: string } | null {
  if (prompt && decodeValue<EventDataOf<"user/message">>(prompt).meta?.incognito) return null;
  let firstSeq = 0;
  const parts: string[] = [];
  for (const row of deltas()) {
    const data = decodeValue<EventDataOf<"assistant/delta">>(row.data);
    if (data.turnId !== turnId) continue;
    if (firstSeq === 0) firstSeq = row.seq;
    parts.push(data.text);
  }
  return firstSeq > 0 ? { seq: firstSeq, text: parts.join("") } : null;
}
