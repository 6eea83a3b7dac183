import { CountsByKey } from "../../store/counts-by-key.js";

/**
 * The bytes of request bodies each principal is sending that the host holds until it is done with
 * them (an upload until it is stored, a JSON body until it is parsed). Counted per principal name
 * from each body's declared size, or as a chunked body arrives, so bodies sent at once on as many
 * connections see each other before any of them is held whole.
 */
export class BodiesReceiving {
  readonly #held = new CountsByKey();
  readonly #read = new CountsByKey();

  /** Bytes `owner`'s bodies hold (as declared, or as read when more), those already read included. */
  held(owner: string): number {
    return this.#held.get(owner);
  }

  /** Bytes of `owner`'s bodies not yet read to their end (nor handed on). */
  arriving(owner: string): number {
    return this.held(owner) - this.#read.get(owner);
  }

  /** One body of `owner`, counted at `bytes` (its declared size) until it is released. */
  receive(owner: string, bytes: number): BodyReceipt {
    return new BodyReceipt(this, owner, bytes);
  }

  /** @internal the count of `owner` changes by `delta`, and that of its bodies read by `readDelta` */
  change(owner: string, delta: number, readDelta = 0): void {
    this.#held.add(owner, delta);
    this.#read.add(owner, readDelta);
  }
}

/** One body's place in `BodiesReceiving`: released once, when the host is done with it or refuses it. */
export class BodyReceipt {
  #bytes = 0;
  #released = false;
  #read = false;

  constructor(
    private readonly receiving: BodiesReceiving,
    readonly owner: string,
    bytes: number,
  ) {
    this.count(bytes);
  }

  /** Bytes this body is counted at. */
  get bytes(): number {
    return this.#bytes;
  }

  /** Bytes every body of this owner being received holds, this one included. */
  ownerHeld(): number {
    return this.receiving.held(this.owner);
  }

  /** Bytes of this owner's bodies not yet read, this one included until `read`. */
  ownerArriving(): number {
    return this.receiving.arriving(this.owner);
  }

  /** The body holds `bytes` (a chunked one counted as it arrives); never less than counted. */
  count(bytes: number): void {
    if (this.#released || this.#read || bytes <= this.#bytes) return;
    this.receiving.change(this.owner, bytes - this.#bytes);
    this.#bytes = bytes;
  }

  /**
   * The body was read and is handed on (an upload to the store, where its owner's stored uploads
   * may count it from any moment on): it is still held, but no longer arriving.
   */
  markRead(): void {
    if (this.#released || this.#read) return;
    this.#read = true;
    this.receiving.change(this.owner, 0, this.#bytes);
  }

  get released(): boolean {
    return this.#released;
  }

  release(): void {
    if (this.#released) return;
    this.#released = true;
    this.receiving.change(this.owner, -this.#bytes, this.#read ? -this.#bytes : 0);
    this.#bytes = 0;
  }
}
