import { encodeFrame } from "../../../protocol/codec.js";
import type { Notification } from "../../../protocol/index.js";
import { binaryMessageHeader } from "./ws-framing.js";

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

const built = new WeakMap<readonly Notification[], SharedEventFrames>();

/** Keyed by the list's identity: the hub hands the same frozen list to every socket that sees it. */
export function sharedEventFrames(list: readonly Notification[]): SharedEventFrames {
  let frames = built.get(list);
  if (!frames) {
    frames = build(list);
    built.set(list, frames);
  }
  return frames;
}

function build(list: readonly Notification[]): SharedEventFrames {
  const payloads = list.map((n) => encodeFrame({ type: "event", name: n.name, value: n.value }));
  const parts: Uint8Array[] = [];
  let payloadBytes = 0;
  for (const p of payloads) {
    payloadBytes += p.length;
    parts.push(binaryMessageHeader(p), p);
  }
  return { payloads, payloadBytes, wire: Buffer.concat(parts) };
}
