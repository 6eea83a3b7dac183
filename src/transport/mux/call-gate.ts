/**
 * The calls of one mux socket (protocol-v1 §7): at most `maxInFlight` run at once, and none starts
 * while the socket's send backlog is above the high-water mark. Calls that cannot start wait in
 * arrival order; while any wait, the connection stops reading the socket, so only frames the
 * peer had already sent can join them. Past `maxQueued` waiting, a call is refused (`overloaded`).
 *
 * What a peer that sends calls and never reads can make the host hold: the backlog up to the
 * high-water mark, plus the answers of the calls running when it was crossed.
 */
export class CallGate {
  readonly #maxInFlight: number;
  readonly #maxQueued: number;
  readonly #canStart: () => boolean;
  readonly #changed: () => void;
  readonly #waiting: (() => Promise<void>)[] = [];
  #running = 0;
  #scheduled = false;
  readonly #ended = (): void => {
    this.#running--;
    this.pump();
  };

  /** `changed` runs after every pump, so the connection can pause or resume reading. */
  constructor(options: {
    maxInFlight: number;
    maxQueued: number;
    canStart: () => boolean;
    changed: () => void;
  }) {
    this.#maxInFlight = options.maxInFlight;
    this.#maxQueued = options.maxQueued;
    this.#canStart = options.canStart;
    this.#changed = options.changed;
  }

  /** Calls waiting for a slot; the connection reads nothing while there are any. */
  get waiting(): number {
    return this.#waiting.length;
  }

  get running(): number {
    return this.#running;
  }

  /**
   * Runs `call` now or later; false if it would have to wait and `maxQueued` already do. One that
   * can start at once is never refused: checked first, `maxQueued` 0 refused every call, those
   * that found a free slot too, where it means that none may wait. A call answers its own
   * failures (the connection's answer each on its id): its slot is freed however it settles.
   */
  submit(call: () => Promise<void>): boolean {
    const startsNow = this.#waiting.length === 0 && this.#running < this.#maxInFlight && this.#canStart();
    if (!startsNow && this.#waiting.length >= this.#maxQueued) return false;
    this.#waiting.push(call);
    this.pump();
    return true;
  }

  /**
   * Starts waiting calls while slots are free and the backlog allows; call again when either
   * changes. One call starts per turn of the event loop: a call's synchronous part (a store read
   * of a large attachment, say) then never piles up with others' in one long task.
   */
  pump(): void {
    if (this.#waiting.length > 0 && this.#running < this.#maxInFlight && this.#canStart()) {
      const call = this.#waiting.shift() as () => Promise<void>;
      this.#running++;
      // one handler for both outcomes, made once: `finally` cost every call two closures, two
      // promises more and the microtasks between them
      void call().then(this.#ended, this.#ended);
      if (this.#waiting.length > 0 && !this.#scheduled) {
        this.#scheduled = true;
        setImmediate(() => {
          this.#scheduled = false;
          this.pump();
        });
      }
    }
    this.#changed();
  }

  /** The socket is gone: nothing waiting will run. */
  clear(): void {
    this.#waiting.length = 0;
  }
}
