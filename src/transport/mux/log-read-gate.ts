import type { FrameWriter } from "./frame-writer.js";

/**
 * The follow streams' reads of logs on one mux socket (protocol-v1 §7), each read with the sending
 * of what it read: at most `concurrency` at a time, each started only once the socket's send
 * backlog is at most the high-water mark. A peer that opens every stream it may at once (256
 * follows replaying a long log) and never reads then holds the host to that backlog plus
 * `concurrency` reads, instead of one per stream done all at once. (Control baselines have their
 * own gate, `BaselineGate`, one at a time.)
 */
export class LogReadGate {
  readonly #writer: FrameWriter;
  readonly #highWaterBytes: number;
  readonly #waiting: (() => void)[] = [];
  readonly #wake = () => this.#next();
  readonly #concurrency: number;
  #working = 0;
  /** Reads started since the last turn began. */
  #startedInTurn = 0;
  /** The next turn is asked for. */
  #scheduled = false;

  constructor(writer: FrameWriter, highWaterBytes: number, concurrency: number) {
    this.#writer = writer;
    this.#highWaterBytes = highWaterBytes;
    this.#concurrency = concurrency;
  }

  /**
   * Runs `work` once a place is free and the backlog allows, after the work given before it; never,
   * if the socket goes first. At most `concurrency` reads start in one turn of the event loop (the
   * rest wait for a later one): a read of SQLite answers at once, so reads started as others end
   * would otherwise all run in one turn, however many streams wait.
   */
  run<T>(work: () => Promise<T>): Promise<T> {
    if (this.#waiting.length === 0 && this.#mayStart() && this.#fits()) return this.#start(work);
    return new Promise<T>((resolve, reject) => {
      this.#waiting.push(() => {
        this.#start(work).then(resolve, reject);
      });
      this.#next();
    });
  }

  #mayStart(): boolean {
    return this.#working < this.#concurrency && this.#startedInTurn < this.#concurrency;
  }

  #fits(): boolean {
    return this.#writer.buffered <= this.#highWaterBytes;
  }

  #start<T>(work: () => Promise<T>): Promise<T> {
    this.#working++;
    this.#startedInTurn++;
    this.#nextTurn();
    return work().finally(() => {
      this.#working--;
      this.#next();
    });
  }

  #next(): void {
    if (this.#waiting.length > 0 && this.#working < this.#concurrency) this.#nextTurn();
  }

  /** Asks for the next turn of the event loop, where the count of reads started begins again. */
  #nextTurn(): void {
    if (this.#scheduled) return;
    this.#scheduled = true;
    setImmediate(this.#turn);
  }

  /** A new turn: starts what may start in it. */
  readonly #turn = (): void => {
    this.#scheduled = false;
    this.#startedInTurn = 0;
    while (this.#waiting.length > 0 && this.#mayStart()) {
      if (!this.#fits()) {
        if (this.#writer.open) this.#writer.onDrain(this.#wake);
        return;
      }
      this.#waiting.shift()?.();
    }
  };
}
