import { encodeFrame } from "../../../protocol/codec.js";
import { Limits } from "../../../protocol/limits.js";
import { nextLoopTurn } from "../../host/loop-turns.js";
import { arrayHeader, arrayHeaderSize } from "../../store/encoded-event-arrays.js";
import { messagePackValueEnd } from "./messagepack-value-end.js";

/** Entries encoded in one turn of the event loop (about a millisecond of rows). */
const SLICE = 128;
/** The MessagePack of the entry `more: true`. */
const MORE = Buffer.concat([encodeFrame("more"), Uint8Array.of(0xc3)]);
/** An array header's bytes, at most. */
const ARRAY_HEADER_BYTES = 5;

/**
 * A control baseline asked for in parts (protocol-v1 §5, `baselineParts`) as the encoded values
 * of consecutive items. Each part is the map's scalar fields (`kind`, `generation`) and the next
 * entries of its arrays, in order, every array present (empty where the part holds none of it);
 * every part but the last adds `more: true`. Decoding the parts and joining their arrays gives
 * the map. A part stays within `maxBytes` unless one entry alone is larger (a session's queue of
 * long prompts), which then goes in a part by itself. A client hears a socket only in whole
 * messages: a baseline of thousands of sessions in one message of megabytes outlasts its
 * keepalive on a slow link. With no bound (`Infinity`) it is one part, the bytes `encodeFrame`
 * gives a map whose scalar fields come before its arrays (as a baseline's do).
 *
 * Encoded a slice of entries per event-loop turn, with or without a bound: one `encodeFrame` of
 * a baseline over a thousand sessions holds the loop for several milliseconds.
 */
export async function encodeBaselineParts(
  map: Readonly<Record<string, unknown>>,
  maxBytes: number = Limits.streamItemBytes,
): Promise<Uint8Array[]> {
  const fields = Object.entries(map).filter(([, value]) => value !== undefined);
  if (fields.length + 1 > 15) throw new RangeError("encodeBaselineParts encodes maps of at most 14 keys");
  const scalars = fields.filter(([, value]) => !Array.isArray(value));
  const arrays = fields.filter((field): field is [string, unknown[]] => Array.isArray(field[1]));
  const head = Buffer.concat(scalars.flatMap(([key, value]) => [encodeFrame(key), encodeFrame(value)]));
  const keys = arrays.map(([key]) => encodeFrame(key));
  let fixed = 1 + head.length + MORE.length;
  for (const key of keys) fixed += key.length + ARRAY_HEADER_BYTES;
  const room = Math.max(1, maxBytes - fixed);

  const parts: Uint8Array[] = [];
  let taken: Uint8Array[][] = arrays.map(() => []);
  let bytes = 0;
  let count = 0;
  const close = (more: boolean): void => {
    const chunks: Uint8Array[] = [
      Uint8Array.of(0x80 | (scalars.length + arrays.length + (more ? 1 : 0))),
      head,
    ];
    keys.forEach((key, i) => {
      const entries = taken[i]!;
      chunks.push(key, arrayHeader(entries.length));
      for (const entry of entries) chunks.push(entry);
    });
    if (more) chunks.push(MORE);
    parts.push(Buffer.concat(chunks));
    taken = arrays.map(() => []);
    bytes = 0;
    count = 0;
  };
  let encoded = 0;
  for (const [i, [, values]] of arrays.entries()) {
    for (let at = 0; at < values.length; ) {
      if (encoded > 0 && encoded % SLICE === 0) await nextLoopTurn();
      // one encoding per slice, cut into entries: an encoding per entry costs twice the time
      const slice = values.slice(at, at + SLICE - (encoded % SLICE));
      const encodedSlice = encodeFrame(slice);
      let end = arrayHeaderSize(slice.length);
      for (let k = 0; k < slice.length; k++) {
        const start = end;
        end = messagePackValueEnd(encodedSlice, start);
        const entry = encodedSlice.subarray(start, end);
        if (count > 0 && bytes + entry.length > room) close(true);
        taken[i]!.push(entry);
        bytes += entry.length;
        count++;
      }
      at += slice.length;
      encoded += slice.length;
    }
  }
  close(false);
  return parts;
}
