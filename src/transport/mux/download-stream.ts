import { type ParamsOf, SessionmuxError, toSessionmuxError } from "../../../protocol/index.js";
import type { HostApi } from "../../host/host-api.js";
import type { Principal } from "../../host/principal.js";
import { attachmentGone } from "../../store/attachment-chunks.js";
import type { MuxStream, StreamOutlet } from "./stream-outlet.js";

/**
 * Largest `bytes` item. Each item is a message of its own, and a client hears a socket only in
 * whole messages (a browser sees nothing of a message until its last byte): at 64 KiB one arrives
 * every 10 s down to about 6.5 KB/s, inside the client's keepalive wait.
 */
export const DOWNLOAD_PIECE_BYTES = 64 * 1024;

/**
 * Socket backlog under which the next piece is sent. Whatever else the socket carries (a follow's
 * events, a keepalive's answer) queues behind this much of the download at most, not behind the
 * send high-water mark.
 */
export const DOWNLOAD_HIGH_WATER_BYTES = 256 * 1024;

export interface DownloadContext {
  readonly host: HostApi;
  readonly principal: Principal;
  readonly outlet: StreamOutlet;
  readonly logInternal: (err: unknown, context: string) => void;
}

/**
 * One `session.download` stream (protocol-v1 §5): the attachment's head, then its bytes from
 * `offset` in pieces, each read from the store and sent only once the socket's backlog is under
 * `DOWNLOAD_HIGH_WATER_BYTES`, then `end`. A reader that stops reading holds the host to that
 * backlog and one stored chunk; one that lost its socket opens the stream again at the offset it
 * reached.
 */
export class DownloadStream implements MuxStream {
  readonly #ctx: DownloadContext;
  readonly #params: ParamsOf<"session.download">;
  #ended = false;
  #wake: (() => void) | undefined;
  #iterator: AsyncIterator<Uint8Array> | undefined;

  constructor(ctx: DownloadContext, params: ParamsOf<"session.download">) {
    this.#ctx = ctx;
    this.#params = params;
  }

  async start(): Promise<void> {
    const { host, principal, outlet } = this.#ctx;
    const { sessionId, attachmentId, offset = 0 } = this.#params;
    try {
      const body = await host.openAttachment(principal, "session.download", { sessionId, attachmentId });
      if (this.#ended) return;
      if (offset > body.size) {
        throw new SessionmuxError(
          "bad_request",
          `offset ${offset} is past the attachment's ${body.size} bytes`,
          {
            data: { field: "/offset", size: body.size },
          },
        );
      }
      outlet.item({ kind: "head", name: body.name, type: body.type, size: body.size });
      const iterator = body.chunks()[Symbol.asyncIterator]();
      this.#iterator = iterator;
      let start = 0;
      while (start < body.size) {
        await this.#room();
        if (this.#ended) return;
        const next = await iterator.next();
        if (this.#ended) return;
        if (next.done || start + next.value.byteLength > body.size) throw attachmentGone(attachmentId);
        const chunk = next.value;
        for (let at = Math.max(offset - start, 0); at < chunk.byteLength; at += DOWNLOAD_PIECE_BYTES) {
          const bytes = chunk.subarray(at, Math.min(at + DOWNLOAD_PIECE_BYTES, chunk.byteLength));
          outlet.item({ kind: "bytes", offset: start + at, bytes });
        }
        start += chunk.byteLength;
      }
      outlet.end();
    } catch (err) {
      this.#fail(err);
    }
  }

  stop(): void {
    this.#finish();
  }

  /**
   * Resolves at once under the download's mark, else once everything written so far has reached
   * the kernel (or the socket is gone, or the stream ended).
   */
  #room(): Promise<void> {
    const { writer } = this.#ctx.outlet;
    if (writer.buffered <= DOWNLOAD_HIGH_WATER_BYTES || this.#ended) return Promise.resolve();
    return new Promise<void>((resolve) => {
      this.#wake = resolve;
      writer.onDrain(resolve);
    });
  }

  #fail(err: unknown): void {
    if (this.#ended) return;
    const error = toSessionmuxError(err);
    if (error.code === "internal_error") this.#ctx.logInternal(err, "session.download");
    this.#finish();
    this.#ctx.outlet.fail(error);
  }

  #finish(): void {
    if (this.#ended) return;
    this.#ended = true;
    const wake = this.#wake;
    if (wake) {
      this.#ctx.outlet.writer.cancelDrain(wake);
      wake();
    }
    // the store's read of the chunks stops here (its `finally` runs)
    void this.#iterator?.return?.().catch(() => undefined);
  }
}
