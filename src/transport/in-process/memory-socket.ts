import { Duplex } from "node:stream";

/**
 * One end of an in-memory byte stream standing in for a TCP connection, so an in-process caller
 * runs through exactly the code a network caller does (the HTTP upgrade, `ws` framing, the mux
 * connection with its limits and backpressure). A write completes only once the other end has
 * room for it, so a peer that stops reading holds the writer back as a full TCP window would:
 * the mux sees its backlog grow (`writableLength`) and applies its high-water marks.
 */
export class MemorySocket extends Duplex {
  #peer: MemorySocket | undefined;
  /** The write waiting for this end's reader to ask for more. */
  #waiting: (() => void) | undefined;
  #taken = 0;

  /** Two connected ends: what one writes, the other reads. */
  static pair(): [MemorySocket, MemorySocket] {
    const a = new MemorySocket();
    const b = new MemorySocket();
    a.#peer = b;
    b.#peer = a;
    return [a, b];
  }

  private constructor() {
    super({ allowHalfOpen: false });
  }

  /** Bytes the other end has taken: what `net.Socket#bytesWritten` means for the mux's liveness check. */
  get bytesWritten(): number {
    return this.#taken;
  }

  get remoteAddress(): string {
    return "in-process";
  }

  override _write(chunk: Buffer, _encoding: BufferEncoding, done: (error?: Error | null) => void): void {
    const peer = this.#peer;
    if (!peer || peer.destroyed) {
      done(new Error("the other end of the in-process socket is closed"));
      return;
    }
    this.#taken += chunk.length;
    if (peer.push(chunk)) done();
    else peer.#waiting = done;
  }

  override _read(): void {
    const waiting = this.#waiting;
    this.#waiting = undefined;
    waiting?.();
  }

  override _final(done: (error?: Error | null) => void): void {
    this.#peer?.push(null);
    done();
  }

  /**
   * As a closed TCP connection's FIN: the other end still reads every byte it was sent, then its
   * end, and closes once its reader has taken them; its writes from then on fail. Destroying the
   * other end at once threw away what it had not read yet, such as a refusal written just before.
   */
  override _destroy(error: Error | null, done: (error?: Error | null) => void): void {
    const peer = this.#peer;
    this.#peer = undefined;
    // the other end's write waiting for this reader: nothing will read it now
    const waiting = this.#waiting;
    this.#waiting = undefined;
    waiting?.();
    if (peer && !peer.destroyed) {
      // this end's own write waiting for the other reader: its bytes are there already
      const mine = peer.#waiting;
      peer.#waiting = undefined;
      mine?.();
      peer.push(null);
    }
    done(error);
  }

  /** `net.Socket` settings that mean nothing in memory; `ws` and `http` call them. */
  setNoDelay(): this {
    return this;
  }

  setKeepAlive(): this {
    return this;
  }

  setTimeout(): this {
    return this;
  }
}
