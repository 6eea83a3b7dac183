/** A ping's payload: the tick's number, which the pong answering it echoes (RFC 6455 §5.5.3). */
const SEQ_BYTES = 6;

/** What the connection sees of its socket at a tick. */
export interface HeartbeatReading {
  /** Bytes the host owes the peer and has not handed to the kernel yet. */
  readonly backlog: number;
  /** Bytes the kernel has taken from the host so far. */
  readonly dispatched: number;
  /** The host stopped reading the socket because its own calls are busy, not for the backlog. */
  readonly holding: boolean;
}

/** Why the heartbeat drops a socket: each served from the first scrape on. */
export const HEARTBEAT_DROPS = ["silent", "stalled"] as const;

/** A tick's verdict: the payload of the ping to send, or why the peer is dropped. */
export type HeartbeatVerdict =
  | { readonly ping: Buffer }
  | { readonly drop: (typeof HEARTBEAT_DROPS)[number] };

/**
 * The liveness rule of one mux socket (protocol-v1 §2), ticked once per ping interval.
 *
 * A tick is quiet when, since the previous one, nothing was heard from the peer (a pong, a ping,
 * a frame), the kernel took no byte of the backlog the host held at the previous tick, and the
 * host was not itself holding the socket unread for its busy calls.
 *
 * A quiet tick drops a peer the host is not behind on ("silent": it had one interval to answer
 * a ping with nothing in front of it). The host is behind on a peer from a tick that finds a
 * backlog for it until the peer answers a ping sent once that backlog was gone. Its pongs wait
 * behind what it is still reading (the backlog, then the kernel's buffers, which the host cannot
 * see); while the backlog is past the high-water mark the host does not read the socket at all;
 * and the kernel takes a writer's bytes in steps of about a third of its send buffer, so a slow
 * reader can show nothing for several intervals in a row. Such a peer is dropped ("stalled") at
 * its `graceTicks`-th quiet tick in a row: one that stops reading goes at most `graceTicks`
 * intervals after the tick that saw the kernel take its last byte, holding meanwhile no more than
 * the backlog the high-water marks let build up.
 */
export class Heartbeat {
  readonly #graceTicks: number;
  /** Heard from the peer since the last tick; the connection's opening counts. */
  #heard = true;
  #lastBacklog = 0;
  #lastDispatched = 0;
  #quietTicks = 0;
  #pingSeq = 0;
  /** The newest ping the peer answered. */
  #answered = 0;
  /**
   * The ping whose answer shows the peer read all the host was behind on: `Infinity` while the
   * backlog remains (every ping sent so far has some of it after it), 0 before any backlog.
   */
  #behindUntil = 0;

  /** `graceTicks`: the quiet ticks in a row allowed to a peer the host is behind on. */
  constructor(graceTicks: number) {
    this.#graceTicks = graceTicks;
  }

  /** A frame or a ping from the peer. */
  heard(): void {
    this.#heard = true;
  }

  /** A pong: the peer has read everything the host wrote before the ping it answers. */
  pong(payload: Buffer): void {
    this.#heard = true;
    if (payload.length !== SEQ_BYTES) return;
    // A number past the last ping sent is forged or garbled: it may end the grace, never extend it.
    const seq = Math.min(payload.readUIntBE(0, SEQ_BYTES), this.#pingSeq);
    if (seq > this.#answered) this.#answered = seq;
  }

  /** Called every ping interval. */
  tick(reading: HeartbeatReading): HeartbeatVerdict {
    const { backlog, dispatched } = reading;
    const progressed = this.#lastBacklog > 0 && dispatched > this.#lastDispatched;
    this.#lastBacklog = backlog;
    this.#lastDispatched = dispatched;
    const seq = this.#pingSeq + 1;
    if (backlog > 0) this.#behindUntil = Number.POSITIVE_INFINITY;
    else if (this.#behindUntil === Number.POSITIVE_INFINITY) this.#behindUntil = seq;
    if (this.#heard || progressed || reading.holding) this.#quietTicks = 0;
    else {
      this.#quietTicks++;
      if (this.#answered >= this.#behindUntil) return { drop: "silent" };
      if (this.#quietTicks >= this.#graceTicks) return { drop: "stalled" };
    }
    this.#heard = false;
    this.#pingSeq = seq;
    const ping = Buffer.alloc(SEQ_BYTES);
    ping.writeUIntBE(seq, 0, SEQ_BYTES);
    return { ping };
  }
}
