import { encodeFrame } from "../../../protocol/codec.js";
import type { SessionEvent } from "../../../protocol/index.js";
import { type EncodedRow, encodeEventArrays } from "../../store/encoded-event-arrays.js";

/**
 * The encoded `{kind:"events", events}` item value of one committed batch, cached on the batch's
 * array: the store hands the same notice to every follower of a session, so the batch is encoded
 * once and the bytes are shared by every socket (protocol-v1 §5, fanout). With the rows the log
 * stored (`stored`, the same events), the events' data is spliced in as stored, not encoded again.
 */
const cache = new WeakMap<readonly SessionEvent[], Uint8Array>();

export function encodedEventsItem(
  events: readonly SessionEvent[],
  stored?: readonly EncodedRow[],
): Uint8Array {
  let bytes = cache.get(events);
  if (bytes === undefined) {
    bytes =
      (stored && stored.length === events.length
        ? encodeEventArrays(stored, stored.length, EVENTS_VALUE_ENVELOPE)[0]
        : undefined) ?? encodeFrame({ kind: "events", events });
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
