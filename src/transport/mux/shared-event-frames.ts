import { encodeFrameShared } from "../../../protocol/codec.js";
import type { Notification } from "../../../protocol/index.js";
import { binaryMessageStart } from "./ws-framing.js";

/** One tick's §6 `event` frames, encoded once for every socket that receives the same list. */
export interface SharedEventFrames {
  /** One MessagePack frame per notification, for sockets written through `ws`. */
  readonly payloads: readonly Uint8Array[];
  readonly payloadBytes: number;
  /**
   * The same frames as complete WebSocket messages back to back (RFC 6455 §5.2, unmasked as
   * every server frame is): one write puts the whole tick on a socket.
   */
  readonly wire: Buffer;
}

// The hub hands one list to all its sockets one after another, so the last list built is the only
// one asked for again. A WeakMap of every list (one per commit that moved a session, each an
// ephemeron for the collector) and two copies of each frame (the encoder's, then the message's)
// cost 6–9% of the CPU of a rename over the mux (`npm run bench:profile -- append-wire 40 --plain`).
let last: { list: readonly Notification[]; frames: SharedEventFrames } | undefined;

/** Keyed by the list's identity: the hub hands the same frozen list to every socket that sees it. */
export function sharedEventFrames(list: readonly Notification[]): SharedEventFrames {
  if (last?.list !== list) last = { list, frames: build(list) };
  return last.frames;
}

/**
 * Each frame is encoded in the encoder's own buffer and copied once, behind its header; the
 * payloads are views of those messages, and one notification (the usual tick) is its own wire.
 */
function build(list: readonly Notification[]): SharedEventFrames {
  const messages: Buffer[] = [];
  const payloads: Uint8Array[] = [];
  let payloadBytes = 0;
  for (const n of list) {
    const payload = encodeFrameShared({ type: "event", name: n.name, value: n.value });
    const message = binaryMessageStart(payload, 0);
    messages.push(message);
    payloads.push(message.subarray(message.length - payload.length));
    payloadBytes += payload.length;
  }
  const wire = messages.length === 1 ? messages[0]! : Buffer.concat(messages);
  return { payloads, payloadBytes, wire };
}
