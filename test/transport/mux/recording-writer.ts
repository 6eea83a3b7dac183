import { decodeFrame } from "../../../protocol/codec.js";
import type { FrameWriter } from "../../../src/transport/mux/frame-writer.js";

type WireError = { code: string; retryable: boolean; data?: unknown };

/**
 * The socket side of a stream's outlet, as a test drives it: the test sets the backlog
 * (`buffered`, and `growth` added by each item sent, as a reader that does not read), fires
 * 'drain', and reads back every item value and error sent. Everything above it is the real code.
 */
export class RecordingWriter {
  buffered = 0;
  growth = 0;
  open = true;
  readonly values: unknown[] = [];
  /** The encoded item values as handed over, to check that one committed batch is encoded once. */
  readonly bodies: Uint8Array[] = [];
  /** The head handed over with each body (the item frame's prefix up to its value). */
  readonly heads: Uint8Array[] = [];
  /** Every whole frame sent (`end`, `error`). */
  readonly frames: { type: string; id?: number; error?: WireError }[] = [];
  readonly errors: WireError[] = [];
  readonly waiters = new Set<() => void>();
  drainRequests = 0;
  /** Set to make the next send throw (a bug below the stream). */
  failNextSend: Error | undefined;

  asFrameWriter(): FrameWriter {
    return this as unknown as FrameWriter;
  }
  sendParts(head: Uint8Array, body: Uint8Array): void {
    const failure = this.failNextSend;
    if (failure) {
      this.failNextSend = undefined;
      throw failure;
    }
    this.heads.push(head);
    this.bodies.push(body);
    this.values.push(decodeFrame(body, { maxStrBytes: 16 * 1024 * 1024, maxValues: 2 ** 25 }));
    this.buffered += this.growth;
  }
  sendFrame(frame: { type: string; id?: number; error?: WireError }): void {
    this.frames.push(frame);
    if (frame.type === "error" && frame.error) this.errors.push(frame.error);
  }
  onDrain(wake: () => void): void {
    this.drainRequests++;
    this.waiters.add(wake);
  }
  cancelDrain(wake: () => void): void {
    this.waiters.delete(wake);
  }
  /** The kernel took the backlog: 'drain' fires. */
  drain(): void {
    this.buffered = 0;
    const waiters = [...this.waiters];
    this.waiters.clear();
    for (const wake of waiters) wake();
  }
}
