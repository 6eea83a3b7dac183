/**
 * Reads one direction of a WebSocket connection from raw TCP bytes: skips the HTTP upgrade
 * request or answer, then yields each complete binary message (fragments joined, client masks
 * removed). For tests that check what really crossed the wire, beneath any client library.
 */
export class WsFrameReader {
  #buffer: Buffer = Buffer.alloc(0);
  #upgraded = false;
  #fragments: Buffer[] = [];

  /** Feeds the next bytes; returns the binary messages they completed, in order. */
  push(chunk: Buffer): Buffer[] {
    this.#buffer = this.#buffer.length === 0 ? chunk : Buffer.concat([this.#buffer, chunk]);
    const messages: Buffer[] = [];
    if (!this.#upgraded) {
      const head = this.#buffer.indexOf("\r\n\r\n");
      if (head < 0) return messages;
      this.#buffer = this.#buffer.subarray(head + 4);
      this.#upgraded = true;
    }
    for (;;) {
      const frame = this.#next();
      if (!frame) return messages;
      const { opcode, fin, payload } = frame;
      if (opcode !== 2 && opcode !== 0) continue; // control frames and text are not ours
      this.#fragments.push(payload);
      if (fin) {
        messages.push(Buffer.concat(this.#fragments));
        this.#fragments = [];
      }
    }
  }

  #next(): { opcode: number; fin: boolean; payload: Buffer } | undefined {
    const b = this.#buffer;
    if (b.length < 2) return undefined;
    const masked = (b[1]! & 0x80) !== 0;
    let length = b[1]! & 0x7f;
    let at = 2;
    if (length === 126) {
      if (b.length < 4) return undefined;
      length = b.readUInt16BE(2);
      at = 4;
    } else if (length === 127) {
      if (b.length < 10) return undefined;
      length = Number(b.readBigUInt64BE(2));
      at = 10;
    }
    const maskAt = at;
    if (masked) at += 4;
    if (b.length < at + length) return undefined;
    const payload = Buffer.from(b.subarray(at, at + length));
    if (masked) for (let i = 0; i < payload.length; i++) payload[i]! ^= b[maskAt + (i % 4)]!;
    this.#buffer = b.subarray(at + length);
    return { opcode: b[0]! & 0x0f, fin: (b[0]! & 0x80) !== 0, payload };
  }
}

/**
 * A `startTcpProxy` tap that hands `onMessage` every whole message the host sent, on every
 * connection through the proxy (each connection reads its own bytes).
 */
export function hostMessageTap(
  onMessage: (message: Buffer) => void,
): () => { fromClient(chunk: Buffer): void; fromHost(chunk: Buffer): void } {
  return () => {
    const fromHost = new WsFrameReader();
    return {
      fromClient: () => {},
      fromHost: (chunk) => {
        for (const message of fromHost.push(chunk)) onMessage(message);
      },
    };
  };
}
