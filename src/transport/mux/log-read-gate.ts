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
  /** A turn of the event loop to start waiting work is asked for. */
  #scheduled = false;

  constructor(writer: FrameWriter, highWaterBytes: number, concurrency: number) {
    this.#writer = writer;
    this.#highWaterBytes = highWaterBytes;
    this.#concurrency = concurrency;
  }

  /**
   * Runs `work` on a later turn of the event loop, after the work given before it, once a place is
   * free and the backlog allows; never, if the socket goes first. At most `concurrency` reads start
   * in one turn: a read of SQLite answers at once, so reads started as others end would otherwise
   * all run in one turn, however many streams wait.
   */
  run<T>(work: () => Promise<T>): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      this.#waiting.push(() => {
        this.#start(work).then(resolve, reject);
      });
      this.#next();
    });
  }

  #fits(): boolean {
    return this.#writer.buffered <= this.#highWaterBytes;
  }

  #start<T>(work: () => Promise<T>): Promise<T> {
    this.#working++;
    return work().finally(() => {
      this.#working--;
      this.#next();
    });
  }

  #next(): void {
    if (this.#scheduled || this.#working >= this.#concurrency || this.#waiting.length === 0) return;
    this.#scheduled = true;
    setImmediate(this.#turn);
  }

  /** Starts what may start in this turn of the event loop. */
  readonly #turn = (): void => {
    this.#scheduled = false;
    while (this.#working < this.#concurrency && this.#waiting.length > 0) {
      if (!this.#fits()) {
        if (this.#writer.open) this.#writer.onDrain(this.#wake);
        return;
      }
      this.#waiting.shift()?.();
    }
  };
}
