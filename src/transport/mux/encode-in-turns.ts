import { encodeFrame } from "../../../protocol/codec.js";
import { nextLoopTurn } from "../../host/loop-turns.js";
import { arrayHeader, arrayHeaderSize } from "../../store/encoded-event-arrays.js";

/** Elements of a long array encoded in one turn of the event loop (about a millisecond of rows). */
const SLICE = 128;

/**
 * The MessagePack encoding of a flat map (at most 15 keys) whose values may be long arrays, made
 * a slice of elements per event-loop turn: one `encodeFrame` of a control baseline over a thousand
 * sessions holds the loop for several milliseconds. Decodes to what `encodeFrame(map)` does.
 */
export async function encodeInTurns(map: Readonly<Record<string, unknown>>): Promise<Uint8Array> {
  const entries = Object.entries(map).filter(([, value]) => value !== undefined);
  if (entries.length > 15) throw new RangeError("encodeInTurns encodes maps of at most 15 keys");
  const parts: Uint8Array[] = [Uint8Array.of(0x80 | entries.length)];
  for (const [key, value] of entries) {
    parts.push(encodeFrame(key));
    if (!Array.isArray(value) || value.length <= SLICE) {
      parts.push(encodeFrame(value));
      continue;
    }
    parts.push(arrayHeader(value.length));
    for (let at = 0; at < value.length; at += SLICE) {
      await nextLoopTurn();
      const slice = value.slice(at, at + SLICE);
      parts.push(encodeFrame(slice).subarray(arrayHeaderSize(slice.length)));
    }
  }
  return Buffer.concat(parts);
}
