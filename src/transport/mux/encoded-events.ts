import { encodeFrame } from "../../../protocol/codec.js";
import type { SessionEvent } from "../../../protocol/index.js";
import { type EncodedRow, encodeEventArrays } from "../../store/encoded-event-arrays.js";
import { encodeValue } from "../../store/event-codec.js";

/**
 * The encoded `{kind:"events", events}` item values of one committed batch, cached on the batch's
 * array: the store hands the same notice to every follower of a session, so the batch is encoded
 * once and the bytes are shared by every socket (protocol-v1 §5, fanout). With the rows the log
 * stored (`stored`, the same events), the events' data is spliced in as stored, not encoded again.
 * A batch of large events is split like a replay page: an item stops growing once it holds
 * `Limits.eventItemBytes` of data; the follow stream sends each in pieces (`eventItemPieces`).
 */
const cache = new WeakMap<readonly SessionEvent[], Uint8Array[]>();

export function encodedEventsItems(
  events: readonly SessionEvent[],
  stored?: readonly EncodedRow[],
): Uint8Array[] {
  let items = cache.get(events);
  if (items === undefined) {
    const rows = stored && stored.length === events.length ? stored : rowsOf(events);
    items = encodeEventArrays(rows, rows.length, EVENTS_VALUE_ENVELOPE);
    cache.set(events, items);
  }
  return items;
}

/** Events as rows, their data encoded here: for batches whose stored rows are not at hand. */
function rowsOf(events: readonly SessionEvent[]): EncodedRow[] {
  return events.map((e) => [e.seq, e.at, e.type, encodeValue(e.data)]);
}

/**
 * `{kind:"events", events:` as MessagePack (a two-entry map, then the key of the array): the
 * envelope the store writes before each replay array (`readAfterEncoded`), so an array it
 * encoded is a whole `events` item value as it stands.
 */
export const EVENTS_VALUE_ENVELOPE: Uint8Array = Buffer.from(
  encodeFrame({ kind: "events", events: [] }),
).subarray(0, -1);
