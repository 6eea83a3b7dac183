import { binaryMessage } from "./ws-framing.js";

/** Stream ids whose message is kept per value; sockets beyond them frame their own. */
const IDS_PER_VALUE = 4;
/** A larger value is framed for others only when kept: never copied for one socket alone. */
const COPY_UNKEPT_BYTES = 512;

interface Framed {
  readonly id: number;
  readonly message: Buffer;
}

const built = new WeakMap<Uint8Array, Framed[]>();

/**
 * The whole WebSocket message (RFC 6455 §5.2 header, `item` prefix of stream `id`, then `value`)
 * of an item value many sockets send: a committed batch to every follower, a tail read to every
 * reconnecting one. Their clients mostly open the session under the same stream id, so the
 * message is framed once and the same bytes are written to every socket, with no allocation or
 * copy per socket. Kept on the value, for as long as the value lives: the value is never changed
 * once encoded (see `encodedEventsItem`, `encodeEventArrays`). Undefined when the message is
 * neither kept nor small: the caller then writes the prefix and the value as they are.
 */
export function sharedItemMessage(id: number, prefix: Uint8Array, value: Uint8Array): Buffer | undefined {
  let framed = built.get(value);
  if (framed !== undefined) {
    for (const entry of framed) if (entry.id === id) return entry.message;
  }
  const kept = framed === undefined || framed.length < IDS_PER_VALUE;
  if (!kept && value.length > COPY_UNKEPT_BYTES) return undefined;
  const message = binaryMessage(prefix, value);
  if (kept) {
    if (framed === undefined) {
      framed = [];
      built.set(value, framed);
    }
    framed.push({ id, message });
  }
  return message;
}
