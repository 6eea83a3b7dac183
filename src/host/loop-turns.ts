/**
 * Long work split into pieces yields here between pieces, and gets back one piece per turn of the
 * event loop, in arrival order, across every caller of the process. `setImmediate` alone is not
 * enough: Node runs every immediate queued before its check phase in that one phase, so a hundred
 * baselines that each yield would still run a piece each, back to back, before any socket is read.
 */
class LoopTurns {
  readonly #waiting: (() => void)[] = [];
  #scheduled = false;

  next(): Promise<void> {
    return new Promise((resolve) => {
      this.#waiting.push(resolve);
      this.#schedule();
    });
  }

  #schedule(): void {
    if (this.#scheduled) return;
    this.#scheduled = true;
    setImmediate(() => {
      this.#scheduled = false;
      // the piece runs in this callback's microtasks, before the loop moves on
      this.#waiting.shift()?.();
      if (this.#waiting.length > 0) this.#schedule();
    });
  }
}

const turns = new LoopTurns();

/** Resolves in a later turn of the event loop, after every earlier caller had its turn. */
export function nextLoopTurn(): Promise<void> {
  return turns.next();
}
