import { encodeFrame } from "../../../protocol/codec.js";
import type { SessionEvent } from "../../../protocol/index.js";

/**
 * The encoded `{kind:"events", events}` item value of one committed batch, cached on the batch's
 * array: the store hands the same notice to every follower of a session, so the batch is encoded
 * once and the bytes are shared by every socket (protocol-v1 §5, fanout).
 */
const cache = new WeakMap<readonly SessionEvent[], Uint8Array>();

export function encodedEventsItem(events: readonly SessionEvent[]): Uint8Array {
  let bytes = cache.get(events);
  if (bytes === undefined) {
    bytes = encodeFrame({ kind: "events", events });
    cache.set(events, bytes);
  }
  return bytes;
}

/**
 * `{kind:"events", events:` as MessagePack (a two-entry map, then the key of the array): the
 * envelope the store writes before each replay array (`readAfterEncoded`), so an array it
 * encoded is a whole `events` item value as it stands.
 */
export const EVENTS_VALUE_ENVELOPE: Uint8Array = Buffer.from(
  encodeFrame({ kind: "events", events: [] }),
).subarray(0, -1);
