import { encodeFrame } from "../../../protocol/codec.js";

/**
 * `{type:"item", id, value}` assembled around a value encoded once (protocol-v1 §3), so one
 * committed batch is encoded a single time however many followers receive it. The map header and
 * the id are per stream (this prefix); the value bytes are shared.
 */
const HEAD = Uint8Array.of(0x83, 0xa4, ...ascii("type"), 0xa4, ...ascii("item"), 0xa2, ...ascii("id"));
const VALUE_KEY = Uint8Array.of(0xa5, ...ascii("value"));

/** The bytes preceding the value for stream `id`; computed once per stream. */
export function itemFramePrefix(id: number): Buffer {
  return Buffer.concat([HEAD, encodeFrame(id), VALUE_KEY]);
}

/**
 * The whole message as a receiver reassembles it from the two fragments `FrameWriter.sendParts`
 * sends (prefix, then the shared value); used where one contiguous buffer is wanted.
 */
export function spliceItemFrame(prefix: Buffer, encodedValue: Uint8Array): Buffer {
  const frame = Buffer.allocUnsafe(prefix.length + encodedValue.length);
  prefix.copy(frame, 0);
  frame.set(encodedValue, prefix.length);
  return frame;
}

function ascii(s: string): number[] {
  return Array.from(s, (c) => c.charCodeAt(0));
}
