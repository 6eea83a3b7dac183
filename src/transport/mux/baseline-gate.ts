import type { FrameWriter } from "./frame-writer.js";

/**
 * The control baselines of one mux socket (protocol-v1 §5, §7): built one at a time, each only
 * once the socket's send backlog is at most the high-water mark. A peer that opens every control
 * stream it may and never reads then holds the host to that backlog plus one baseline, instead of
 * a baseline per stream built all at once.
 */
export class BaselineGate {
  readonly #writer: FrameWriter;
  readonly #highWaterBytes: number;
  readonly #waiting: (() => void)[] = [];
  readonly #wake = () => this.#next();
  #building = false;

  constructor(writer: FrameWriter, highWaterBytes: number) {
    this.#writer = writer;
    this.#highWaterBytes = highWaterBytes;
  }

  /**
   * Runs `build` at once when nothing is built and the backlog allows, else after the builds given
   * before it; never, if the socket goes first.
   */
  run(build: () => Promise<void>): Promise<void> {
    if (!this.#building && this.#waiting.length === 0 && this.#fits()) return this.#start(build);
    return new Promise((resolve, reject) => {
      this.#waiting.push(() => this.#start(build).then(resolve, reject));
      this.#next();
    });
  }

  #fits(): boolean {
    return this.#writer.buffered <= this.#highWaterBytes;
  }

  #start(build: () => Promise<void>): Promise<void> {
    this.#building = true;
    return build().finally(() => {
      this.#building = false;
      this.#next();
    });
  }

  #next(): void {
    if (this.#building || this.#waiting.length === 0) return;
    if (this.#fits()) this.#waiting.shift()?.();
    else if (this.#writer.open) this.#writer.onDrain(this.#wake);
  }
}
