import type { Socket } from "node:net";
import type WebSocket from "ws";
import { encodeFrame } from "../../../protocol/codec.js";
import type { HostFrame } from "../../../protocol/index.js";
import type { HostMetrics } from "../metrics.js";
import type { SharedEventFrames } from "./shared-event-frames.js";
import { splitTrailingBinary } from "./trailing-binary.js";
import { binaryMessage, binaryMessageStart, bytesTakenByKernel } from "./ws-framing.js";

/** Bodies up to this size are copied in behind their header: one write instead of two. */
const COPY_BODY_BYTES = 512;
const EMPTY = new Uint8Array(0);

/**
 * Everything one mux socket sends goes through here. Writes made in the same tick are corked
 * into one `writev` (a replay page, `caughtUp`, and live batches of several streams leave
 * together), and frame/byte counters are flushed to metrics once per tick, off the hot path.
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
  readonly #drainWaiters = new Set<() => void>();
  #corked = false;
  #frames = 0;
  #bytes = 0;

  constructor(ws: WebSocket, raw: Socket, metrics: HostMetrics | undefined) {
    this.#ws = ws;
    this.#raw = raw;
    this.#metrics = metrics;
    raw.on("drain", () => this.#onDrain());
  }

  get open(): boolean {
    return this.#ws.readyState === this.#ws.OPEN;
  }

  /** Bytes accepted but not yet handed to the kernel. */
  get buffered(): number {
    return this.#ws.bufferedAmount;
  }

  /**
   * Bytes the kernel has accepted so far; growth while a backlog exists means the peer reads.
   * Counts partial progress of a large write (libuv completes a write only once all of it is in).
   */
  get dispatched(): number {
    return bytesTakenByKernel(this.#raw);
  }

  sendFrame(frame: HostFrame): void {
    const split = splitTrailingBinary(frame);
    if (split) this.sendParts(split.head, split.body);
    else this.send(encodeFrame(frame));
  }

  send(bytes: Uint8Array): void {
    this.sendParts(EMPTY, bytes);
  }

  /**
   * Sends one message whose payload is `head` then `body`: a small body is copied in behind its
   * header, a large one (an attachment) is written as it is, so a body shared by many sockets is
   * never copied per socket. Through `ws`, the two are fragments of one message (RFC 6455 §5.4),
   * sent synchronously, so nothing can come between them.
   */
  sendParts(head: Uint8Array, body: Uint8Array): void {
    if (!this.open) return;
    this.#cork();
    this.#frames++;
    this.#bytes += head.length + body.length;
    if (this.#besideWs()) {
      if (body.length <= COPY_BODY_BYTES) {
        this.#raw.write(binaryMessage(head, body));
        return;
      }
      this.#raw.write(binaryMessageStart(head, body.length));
      this.#raw.write(body);
      return;
    }
    if (head.length > 0) this.#ws.send(head, { binary: true, fin: false });
    this.#ws.send(body, { binary: true, fin: true });
  }

  /** A tick's event frames, built once for many sockets, in one write of ready WebSocket bytes. */
  sendShared(frames: SharedEventFrames): void {
    if (!this.open) return;
    this.#cork();
    this.#frames += frames.payloads.length;
    this.#bytes += frames.payloadBytes;
    if (this.#besideWs()) {
      this.#raw.write(frames.wire);
      return;
    }
    for (const payload of frames.payloads) this.#ws.send(payload, { binary: true });
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
    // A backlog that exists only inside the cork drains when the tick ends, without a 'drain'.
    if (this.#raw.writableLength === 0) process.nextTick(() => this.#onDrain());
  }

  cancelDrain(wake: () => void): void {
    this.#drainWaiters.delete(wake);
  }

  #flush(): void {
    this.#corked = false;
    this.#raw.uncork();
    if (this.#metrics && this.#frames > 0) {
      this.#metrics.framesOut.inc(this.#frames);
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
