import { Decoder } from "@msgpack/msgpack";

/**
 * Decodes msgpack frames, reusing the value of a byte-identical frame seen recently. A server
 * sends the same bytes to every follower of a session, and the follower fleet (one process for
 * hundreds of sockets) would otherwise decode each frame once per socket and become the slowest
 * part of the run. Identity is checked on the whole bytes, so a hit is exactly what decoding would
 * have returned; values are shared, so callers must not change them.
 */
export class DecodeCache {
  private readonly decoder = new Decoder();
  private readonly recent = new Map<number, { bytes: Buffer; value: unknown }>();

  /** @param capacity frames kept (bounded: the oldest is evicted first) */
  constructor(private readonly capacity = 4096) {}

  decode(bytes: Buffer): unknown {
    const key = fingerprint(bytes);
    const hit = this.recent.get(key);
    if (hit?.bytes.equals(bytes)) return hit.value;
    const value = this.decoder.decode(bytes);
    if (hit) this.recent.delete(key);
    else if (this.recent.size >= this.capacity) this.recent.delete(this.recent.keys().next().value!);
    this.recent.set(key, { bytes, value });
    return value;
  }
}

/** Bytes hashed at each end of a frame: its stream id at the start, its last event at the end. */
const HASHED_END_BYTES = 128;

/**
 * FNV-1a over the first and last bytes of the frame and its length. Only the bytes' equality
 * decides a hit, so a collision costs a decode, never a wrong value. The ends must hold what tells
 * frames apart: a 24-byte tail held only the constant end of the last event's text, so every
 * event frame collided; the whole frame made hashing the fleet's largest cost.
 */
function fingerprint(bytes: Buffer): number {
  let hash = 0x811c9dc5 ^ bytes.length;
  const head = Math.min(bytes.length, HASHED_END_BYTES);
  for (let i = 0; i < head; i++) hash = Math.imul(hash ^ bytes[i]!, 0x01000193);
  for (let i = Math.max(head, bytes.length - HASHED_END_BYTES); i < bytes.length; i++)
    hash = Math.imul(hash ^ bytes[i]!, 0x01000193);
  return hash;
}
