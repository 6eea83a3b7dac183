import { encodeFrame } from "../../../protocol/codec.js";
import type { SessionmuxError } from "../../../protocol/index.js";
import type { FrameWriter } from "./frame-writer.js";
import { itemFramePrefix } from "./item-frame.js";
import { sharedItemMessage } from "./shared-item-messages.js";

/** A logical stream on a mux socket, as the connection sees it. */
export interface MuxStream {
  /**
   * Releases listeners and timers; nothing is sent. The connection then answers `end` (the client
   * closed it) or nothing (the socket is gone).
   */
  stop(): void;
}

/**
 * The sending side of one logical stream: items, then exactly one `end` or `error` (§3).
 * After that the id is free again and nothing more is sent for it.
 */
export class StreamOutlet {
  readonly id: number;
  readonly writer: FrameWriter;
  readonly #onFinish: () => void;
  #prefix: Buffer | undefined;
  #finished = false;

  constructor(id: number, writer: FrameWriter, onFinish: () => void) {
    this.id = id;
    this.writer = writer;
    this.#onFinish = onFinish;
  }

  get finished(): boolean {
    return this.#finished;
  }

  item(value: unknown): void {
    this.itemEncoded(encodeFrame(value));
  }

  /** Sends an item whose value is already encoded. */
  itemEncoded(value: Uint8Array): void {
    if (this.#finished) return;
    this.#prefix ??= itemFramePrefix(this.id);
    this.writer.sendParts(this.#prefix, value);
  }

  /**
   * Sends an item whose encoded value other sockets send too (a committed batch, a shared read),
   * and which is never changed: the framed message is built once for all of them.
   */
  itemShared(value: Uint8Array): void {
    if (this.#finished) return;
    this.#prefix ??= itemFramePrefix(this.id);
    const message = this.writer.framesBesideWs ? sharedItemMessage(this.id, this.#prefix, value) : undefined;
    this.writer.sendParts(this.#prefix, value, message);
  }

  end(): void {
    if (this.#finish()) this.writer.sendFrame({ type: "end", id: this.id });
  }

  fail(error: SessionmuxError): void {
    if (this.#finish()) this.writer.sendFrame({ type: "error", id: this.id, error: error.toWire() });
  }

  /** Frees the id without a frame (the socket is gone). */
  release(): void {
    this.#finish();
  }

  #finish(): boolean {
    if (this.#finished) return false;
    this.#finished = true;
    this.#onFinish();
    return true;
  }
}
