import { Limits } from "../../../protocol/limits.js";
import {
  ARRAY,
  LENGTH_FIELD_BYTES,
  TYPE_BYTE_KIND,
  TYPE_BYTE_LENGTH,
} from "../../../protocol/msgpack-type-bytes.js";
import { arrayHeader } from "../../store/encoded-event-arrays.js";
import { EVENTS_VALUE_ENVELOPE } from "./encoded-events.js";
import { messagePackValueEnd } from "./messagepack-value-end.js";

/** Array header of a piece, at most: a piece of up to 64 KiB holds fewer than 65,536 events. */
const PIECE_HEADER_BYTES = 5;

interface Split {
  readonly maxBytes: number;
  readonly pieces: readonly Uint8Array[];
}

/** Pieces of a value, kept on it: a shared read or a committed batch is split once for every follower. */
const splits = new WeakMap<Uint8Array, Split>();

/**
 * An `events` item value (`EVENTS_VALUE_ENVELOPE`, then an array of event maps, as the store and
 * `encodedEventsItems` write it) as the values of consecutive `events` items, each at most
 * `maxBytes` unless it holds one event larger than that (protocol-v1 §5): a client hears nothing
 * of a message until its last byte, so a message of a megabyte on a slow link outlasts its
 * keepalive. The events keep their order and their bytes; the pieces are about equal in size, so
 * a value just past the bound makes two halves, not a full piece and a crumb. A value within the
 * bound is returned as it is. Pieces are never changed once made (they may be shared).
 */
export function eventItemPieces(
  value: Uint8Array,
  maxBytes: number = Limits.streamItemBytes,
): readonly Uint8Array[] {
  if (value.length <= maxBytes) return [value];
  const kept = splits.get(value);
  if (kept !== undefined && kept.maxBytes === maxBytes) return kept.pieces;
  const pieces = split(value, maxBytes);
  splits.set(value, { maxBytes, pieces });
  return pieces;
}

function split(value: Uint8Array, maxBytes: number): Uint8Array[] {
  const envelope = EVENTS_VALUE_ENVELOPE;
  if (Buffer.compare(value.subarray(0, envelope.length), envelope) !== 0)
    throw new RangeError("not an events item value");
  const { count, first } = arrayAt(value, envelope.length);
  const ends: number[] = [];
  let at = first;
  for (let i = 0; i < count; i++) {
    at = messagePackValueEnd(value, at);
    ends.push(at);
  }
  if (at !== value.length) throw new RangeError(`${value.length - at} bytes after the events`);
  if (count < 2) return [value];
  const room = Math.max(1, maxBytes - envelope.length - PIECE_HEADER_BYTES);
  // about equal pieces: each closes once it reaches `target`, or before an event it has no room for
  const target = Math.ceil((at - first) / Math.ceil((at - first) / room));
  const spans: Span[] = [];
  let from = first;
  let last = first;
  let events = 0;
  for (const end of ends) {
    if (events > 0 && end - from > room) {
      spans.push({ from, to: last, events });
      from = last;
      events = 0;
    }
    events++;
    last = end;
    if (end - from >= target) {
      spans.push({ from, to: end, events });
      from = end;
      events = 0;
    }
  }
  if (events > 0) spans.push({ from, to: last, events });
  return assemble(value, envelope, spans);
}

/** A run of whole events in the value: its bytes `[from, to)` and how many events it holds. */
interface Span {
  readonly from: number;
  readonly to: number;
  readonly events: number;
}

/** Each span behind its own envelope and array header. */
function assemble(value: Uint8Array, envelope: Uint8Array, spans: readonly Span[]): Uint8Array[] {
  return spans.map((s) => Buffer.concat([envelope, arrayHeader(s.events), value.subarray(s.from, s.to)]));
}

/** The event count of the array header at `at`, and where its first event starts. */
function arrayAt(value: Uint8Array, at: number): { count: number; first: number } {
  const b = value[at] ?? 0;
  if (TYPE_BYTE_KIND[b] !== ARRAY) throw new RangeError("no array of events after the envelope");
  const width = LENGTH_FIELD_BYTES[b]!;
  if (width === 0) return { count: TYPE_BYTE_LENGTH[b]!, first: at + 1 };
  // a RangeError too when the header is cut short
  const count = Buffer.from(value.buffer, value.byteOffset, value.byteLength).readUIntBE(at + 1, width);
  return { count, first: at + 1 + width };
}
