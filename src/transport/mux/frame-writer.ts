import type { Socket } from "node:net";
import type WebSocket from "ws";
import { encodeFrame } from "../../../protocol/codec.js";
import type { HostFrame } from "../../../protocol/index.js";
import type { HostMetrics } from "../metrics.js";
import type { SharedEventFrames } from "./shared-event-frames.js";
import { binaryMessage, binaryMessageStart, bytesTakenByKernel } from "./ws-framing.js";

/** Bodies up to this size are copied in behind their header: one write instead of two. */
const COPY_BODY_BYTES = 512;
const EMPTY = new Uint8Array(0);

/** A message whose body is read as the socket takes it (an attachment, chunk by chunk). */
interface StreamedMessage {
  readonly head: Uint8Array;
  readonly bodyBytes: number;
  readonly chunks: () => AsyncIterable<Uint8Array>;
  readonly sent: () => void;
}

/** What waits while a streamed message is on the wire: nothing may come between its fragments. */
type Held =
  | { kind: "parts"; head: Uint8Array; body: Uint8Array }
  | { kind: "shared"; frames: SharedEventFrames }
  | { kind: "streamed"; message: StreamedMessage };

/**
 * Everything one mux socket sends goes through here. Writes made in the same tick are corked
 * into one `writev` (a replay page, `caughtUp`, and live batches of several streams leave
 * together), the tick's small messages gathered into one of its writes, and frame/byte counters
 * are flushed to metrics once per tick, off the hot path.
 *
 * Messages are framed here and written to the TCP socket beside `ws`, which keeps order only
 * while `ws` holds no message of its own (it queues one only while compressing or reading a Blob,
 * neither of which the mux does): its `bufferedAmount` is then exactly the socket's backlog, and
 * the high-water checks read the same figure. Otherwise a message goes through `ws`.
 */
export class FrameWriter {
  readonly #ws: WebSocket;
  /** The TCP socket under `ws`, as the upgrade handed it over: corked per tick, drained, measured. */
  readonly #raw: Socket;
  readonly #metrics: HostMetrics | undefined;
  /** Backlog under which the next chunk of a streamed message is read and sent. */
  readonly #highWaterBytes: number;
  readonly #drainWaiters = new Set<() => void>();
  readonly #held: Held[] = [];
  /** Bytes of held messages and of the streamed message's part not yet handed to `ws`. */
  #heldBytes = 0;
  /**
   * Small messages of this tick, written to the socket as one buffer at its end or before any
   * other write. Each write the socket holds costs over 100 bytes of its own, so a backlog of
   * tiny answers (`end`, refusals) written one by one weighed ten times its bytes: a peer sending
   * `close` frames and never reading made the host hold 44 MiB at a 4 MiB mark.
   */
  readonly #small: Buffer[] = [];
  #smallBytes = 0;
  #streaming = false;
  /** An empty write is under way to answer the drain waiters (see `#watchBacklog`). */
  #watching = false;
  #corked = false;
  #frames = 0;
  #bytes = 0;

  constructor(ws: WebSocket, raw: Socket, metrics: HostMetrics | undefined, highWaterBytes: number) {
    this.#ws = ws;
    this.#raw = raw;
    this.#metrics = metrics;
    this.#highWaterBytes = highWaterBytes;
  }

  get open(): boolean {
    return this.#ws.readyState === this.#ws.OPEN;
  }

  /**
   * Bytes accepted but not yet handed to the kernel, counting the unread rest of a streamed body:
   * everything that checks the backlog sees what the socket still owes.
   */
  get buffered(): number {
    return this.#ws.bufferedAmount + this.#heldBytes + this.#smallBytes;
  }

  /**
   * Bytes the kernel has accepted so far; growth while a backlog exists means the peer reads.
   * Counts partial progress of a large write (libuv completes a write only once all of it is in).
   */
  get dispatched(): number {
    return bytesTakenByKernel(this.#raw);
  }

  sendFrame(frame: HostFrame): void {
    this.send(encodeFrame(frame));
  }

  send(bytes: Uint8Array): void {
    this.sendParts(EMPTY, bytes);
  }

  /**
   * Sends one message whose payload is `head` then `body`: a small body is copied in behind its
   * header, a large one (an attachment) is written as it is, so a body shared by many sockets is
   * never copied per socket. `message`, when given, is the whole WebSocket message (header, head,
   * body) framed once for many sockets, written as it is beside `ws`. Through `ws`, the two are
   * fragments of one message (RFC 6455 §5.4), sent synchronously, so nothing can come between them.
   */
  sendParts(head: Uint8Array, body: Uint8Array, message?: Buffer): void {
    if (!this.open) return;
    if (this.#streaming) {
      // held, it is framed again when its turn comes: the socket may no longer take frames beside ws
      this.#hold({ kind: "parts", head, body }, head.length + body.length);
      return;
    }
    this.#cork();
    this.#frames++;
    this.#bytes += head.length + body.length;
    if (!message && body.length <= COPY_BODY_BYTES && this.#besideWs()) {
      const framed = binaryMessage(head, body);
      this.#small.push(framed);
      this.#smallBytes += framed.length;
      return;
    }
    this.#writeSmall();
    if (this.#besideWs()) {
      if (message) {
        this.#raw.write(message);
        return;
      }
      this.#raw.write(binaryMessageStart(head, body.length));
      this.#raw.write(body);
      return;
    }
    if (head.length > 0) this.#ws.send(head, { binary: true, fin: false });
    this.#ws.send(body, { binary: true, fin: true });
  }

  /** Messages are written to the socket beside `ws` now: a `message` given to `sendParts` is written as it is. */
  get framesBesideWs(): boolean {
    return this.open && !this.#streaming && this.#besideWs();
  }

  /** A tick's event frames, built once for many sockets, in one write of ready WebSocket bytes. */
  sendShared(frames: SharedEventFrames): void {
    if (!this.open) return;
    if (this.#streaming) {
      this.#hold({ kind: "shared", frames }, frames.wire.length);
      return;
    }
    this.#cork();
    this.#frames += frames.payloads.length;
    this.#bytes += frames.payloadBytes;
    this.#writeSmall();
    if (this.#besideWs()) {
      this.#raw.write(frames.wire);
      return;
    }
    for (const payload of frames.payloads) this.#ws.send(payload, { binary: true });
  }

  /**
   * Sends one message of `head` then `bodyBytes` bytes read from `chunks`, each chunk read only
   * once the socket's backlog is at most the high-water mark: a peer that stops reading holds the
   * host to that backlog and one chunk, never a whole body. The chunks are continuation fragments
   * of the message, so every other message waits (held, and counted in `buffered`) until it ends.
   * A body that fails or ends short cannot be completed: the socket is closed with 1011.
   * Settles once the message is handed to the socket, or the socket is gone.
   */
  sendStreamed(head: Uint8Array, bodyBytes: number, chunks: () => AsyncIterable<Uint8Array>): Promise<void> {
    if (!this.open) return Promise.resolve();
    return new Promise((sent) => {
      const message = { head, bodyBytes, chunks, sent };
      this.#heldBytes += head.length + bodyBytes;
      if (this.#streaming) this.#held.push({ kind: "streamed", message });
      else void this.#stream(message);
    });
  }

  #hold(held: Held, bytes: number): void {
    this.#held.push(held);
    this.#heldBytes += bytes;
  }

  async #stream(message: StreamedMessage): Promise<void> {
    this.#streaming = true;
    let unsent = message.head.length + message.bodyBytes;
    const write = (bytes: Uint8Array, fin: boolean) => {
      this.#cork();
      this.#writeSmall();
      if (fin) this.#frames++;
      this.#bytes += bytes.length;
      unsent -= bytes.length;
      this.#heldBytes -= bytes.length;
      this.#ws.send(bytes, { binary: true, fin });
    };
    try {
      // A message whose turn came after the socket closed is not sent: `ws` would count the bytes
      // it refuses as buffered, and the socket would seem to owe them for ever.
      if (!this.open) return;
      write(message.head, message.bodyBytes === 0);
      let sent = 0;
      const iterator = message.chunks()[Symbol.asyncIterator]();
      try {
        while (sent < message.bodyBytes) {
          await this.#backlogAtMostHighWater();
          if (!this.open) return;
          const next = await iterator.next();
          if (!this.open) return;
          if (next.done || sent + next.value.byteLength > message.bodyBytes)
            throw new Error("the body does not have the size its head announced");
          sent += next.value.byteLength;
          write(next.value, sent === message.bodyBytes);
        }
      } finally {
        await iterator.return?.();
      }
    } catch {
      // Bytes of this message are on the wire already: no other answer can follow them.
      this.#ws.close(1011, "an answer could not be completed; retry the call");
    } finally {
      this.#heldBytes -= unsent;
      this.#streaming = false;
      message.sent();
      this.#sendHeld();
    }
  }

  /** Sends what waited behind a streamed message, up to the next streamed one. */
  #sendHeld(): void {
    while (this.#held.length > 0 && !this.#streaming) {
      const held = this.#held.shift() as Held;
      if (held.kind === "streamed") {
        void this.#stream(held.message);
        return;
      }
      if (held.kind === "parts") {
        this.#heldBytes -= held.head.length + held.body.length;
        this.sendParts(held.head, held.body);
      } else {
        this.#heldBytes -= held.frames.wire.length;
        this.sendShared(held.frames);
      }
    }
    // waiters that asked while the stream ran get their answer even if nothing is left to drain
    if (this.#drainWaiters.size > 0) this.#watchBacklog();
  }

  #backlogAtMostHighWater(): Promise<void> {
    this.#writeSmall();
    if (this.#ws.bufferedAmount <= this.#highWaterBytes || !this.open || !this.#raw.writable)
      return Promise.resolve();
    return new Promise<void>((resolve) => this.#afterWrites(resolve)).then(() =>
      this.#backlogAtMostHighWater(),
    );
  }

  /** `ws` holds no message of its own: writing to the socket keeps the order of messages. */
  #besideWs(): boolean {
    return this.#ws.bufferedAmount === this.#raw.writableLength;
  }

  #cork(): void {
    if (this.#corked) return;
    this.#corked = true;
    this.#raw.cork();
    process.nextTick(() => this.#flush());
  }

  /** Calls `wake` once when the socket's backlog has been handed to the kernel. */
  onDrain(wake: () => void): void {
    this.#drainWaiters.add(wake);
    // While a message streams, the stream's end answers instead.
    if (!this.#streaming) this.#watchBacklog();
  }

  /** Answers the drain waiters once everything written so far has been handed to the kernel; one watch at a time. */
  #watchBacklog(): void {
    if (this.#watching) return;
    this.#watching = true;
    this.#afterWrites(() => {
      this.#watching = false;
      this.#onDrain();
    });
  }

  /**
   * Runs `then` once everything written so far has been handed to the kernel, or the socket
   * failed. The socket's 'drain' does not say so: it comes only after a write the socket refused
   * (its backlog past its own high-water mark, 16 KiB), so a smaller backlog (one inside the cork,
   * the last part of a streamed message, any under a mark set lower) leaves without one, and
   * whatever waited for it waited for ever. An empty write's callback runs once the writes before
   * it are done, whatever their size.
   *
   * A socket that takes no more writes answers on a later turn of the event loop once it is
   * closed (a destroyed one is at once, though its 'close' comes later), and one ended behind a
   * backlog once it has closed, not turn after turn while the backlog waits for its reader.
   * Never on the next tick: a waiter that asks again as soon as it is answered (the connection,
   * while calls wait for a slot) was answered again on the tick after, and so on, and the event
   * loop never turned again to close the socket and let the connection go.
   */
  #afterWrites(then: () => void): void {
    this.#writeSmall();
    if (this.#raw.writable) this.#raw.write(EMPTY, () => then());
    else if (!this.#raw.closed) this.#raw.once("close", () => then());
    else setImmediate(then);
  }

  cancelDrain(wake: () => void): void {
    this.#drainWaiters.delete(wake);
  }

  /**
   * Writes this tick's small messages now, before anything else reaches the socket (a close
   * frame: at shutdown, the streams' last frames go out first).
   */
  writePending(): void {
    this.#writeSmall();
  }

  #writeSmall(): void {
    if (this.#small.length === 0) return;
    const bytes = this.#small.length === 1 ? this.#small[0]! : Buffer.concat(this.#small, this.#smallBytes);
    this.#small.length = 0;
    this.#smallBytes = 0;
    // after a close frame nothing may follow, as `sendParts` sends nothing once the socket is not open
    if (this.open) this.#raw.write(bytes);
  }

  #flush(): void {
    this.#writeSmall();
    this.#corked = false;
    this.#raw.uncork();
    // a streamed message's chunks count as bytes as they go, and as a frame when it ends
    if (this.#metrics && this.#bytes > 0) {
      if (this.#frames > 0) this.#metrics.framesOut.inc(this.#frames);
      this.#metrics.bytesOut.inc(this.#bytes);
    }
    this.#frames = 0;
    this.#bytes = 0;
  }

  #onDrain(): void {
    if (this.#drainWaiters.size === 0) return;
    const waiters = [...this.#drainWaiters];
    this.#drainWaiters.clear();
    for (const wake of waiters) wake();
  }
}
