import { Decoder, type DecoderOptions, Encoder, type Packet } from "socket.io-parser";

/** Packets kept (bounded: the oldest is evicted first). */
const CAPACITY = 4096;
const recent = new Map<string, Packet>();

function remember(text: string, packet: Packet): void {
  if (recent.size >= CAPACITY) recent.delete(recent.keys().next().value!);
  recent.set(text, packet);
}

/**
 * A Socket.IO client parser that reuses the packet of an identical event text seen recently.
 * A room broadcast reaches every follower socket of the fleet as the same text, which each client
 * would parse again: in the fanout scenarios that parsing, not the server, set the wall time of a
 * Socket.IO run. The whole text is the key, so a hit is exactly what parsing would have returned.
 * Only plain event packets (type 2) are kept: a binary one is completed by later frames. Packets
 * are shared, so the fleet must not change them (it only reads event arguments).
 */
class CachingDecoder extends Decoder {
  #parsing: string | undefined;

  constructor(options?: DecoderOptions) {
    super(options);
    this.on("decoded", (packet) => {
      if (this.#parsing !== undefined) remember(this.#parsing, packet);
    });
  }

  override add(data: unknown): void {
    if (typeof data === "string" && data.startsWith("2")) {
      const hit = recent.get(data);
      if (hit !== undefined) {
        this.emitReserved("decoded", hit);
        return;
      }
      this.#parsing = data;
    }
    try {
      super.add(data);
    } finally {
      this.#parsing = undefined;
    }
  }
}

/** The `parser` option of the fleet's Socket.IO clients. */
export const cachingParser = { Encoder, Decoder: CachingDecoder };
