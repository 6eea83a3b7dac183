import { SessionmuxError } from "../../protocol/index.js";

/** Who asked for a read whose cost a client decides (a search): its principal, and whether it still waits for the answer. */
export interface ReadAsker {
  /** The principal's name: reads are taken in turns by it. */
  readonly name: string;
  /** Fires when nobody waits for the answer any more (the caller's socket closed). */
  readonly signal?: AbortSignal;
}

interface Waiting {
  /** Where in the turns it stands: the smallest starts first. */
  readonly tag: number;
  start(): void;
}

/**
 * Work that runs at most `slots` at a time, taken in turns across askers (start-time fair
 * queueing): each piece of work is tagged with the later of the tag of the work started last and
 * one past its asker's previous piece, and the smallest tag waiting starts first (ties: the asker
 * in line first). An asker that keeps 64 searches in flight thus waits behind itself, not in front
 * of everyone: another's one search waits at most for the work running and one piece of every
 * other asker's, where in arrival order it waited for all 64 (tens of seconds on a large index).
 * Work whose asker's signal fires while it waits is dropped, never started, and fails `aborted`;
 * once started it runs to its end (its own bounds stop it).
 */
export class FairTurns {
  readonly #slots: number;
  /** Askers with work waiting, each's in arrival order; a Map keeps who came first. */
  readonly #line = new Map<string, Waiting[]>();
  /** Per asker with work waiting or running: how much of it, and the tag its next piece follows. */
  readonly #askers = new Map<string, { held: number; lastTag: number }>();
  /** The tag of the work started last. */
  #clock = 0;
  #running = 0;
  #waiting = 0;

  constructor(slots: number) {
    if (!Number.isSafeInteger(slots) || slots < 1) throw new RangeError(`${slots} slots`);
    this.#slots = slots;
  }

  /** Work waiting for a slot, every asker's. */
  get waiting(): number {
    return this.#waiting;
  }

  /** Runs `work` once its turn comes, unless `asker`'s signal fires first. */
  run<T>(asker: ReadAsker, work: () => Promise<T>): Promise<T> {
    const { name, signal } = asker;
    if (signal?.aborted) return Promise.reject(callerGone());
    return new Promise<T>((resolve, reject) => {
      const onAbort = () => {
        if (!this.#remove(name, waiting)) return;
        this.#let(name);
        reject(callerGone());
      };
      const held = this.#askers.get(name);
      const tag = held ? Math.max(this.#clock, held.lastTag + 1) : this.#clock;
      if (held) {
        held.held++;
        held.lastTag = tag;
      } else this.#askers.set(name, { held: 1, lastTag: tag });
      const waiting: Waiting = {
        tag,
        start: () => {
          signal?.removeEventListener("abort", onAbort);
          this.#running++;
          let running: Promise<T>;
          try {
            running = work();
          } catch (err) {
            running = Promise.reject(err);
          }
          running.then(resolve, reject).finally(() => {
            this.#running--;
            this.#let(name);
            this.#next();
          });
        },
      };
      signal?.addEventListener("abort", onAbort, { once: true });
      const queue = this.#line.get(name);
      if (queue) queue.push(waiting);
      else this.#line.set(name, [waiting]);
      this.#waiting++;
      this.#next();
    });
  }

  /** Starts the work of the smallest tags while slots are free. */
  #next(): void {
    while (this.#running < this.#slots) {
      let chosen: [string, Waiting[]] | undefined;
      for (const entry of this.#line)
        if (!chosen || (entry[1][0] as Waiting).tag < (chosen[1][0] as Waiting).tag) chosen = entry;
      if (!chosen) return;
      const [name, queue] = chosen;
      const waiting = queue.shift() as Waiting;
      this.#waiting--;
      // behind those that were in line with it
      this.#line.delete(name);
      if (queue.length > 0) this.#line.set(name, queue);
      this.#clock = waiting.tag;
      waiting.start();
    }
  }

  /** One piece of `name`'s work is done with (ended or dropped): an asker holding none is forgotten. */
  #let(name: string): void {
    const held = this.#askers.get(name);
    if (held && --held.held === 0) this.#askers.delete(name);
  }

  /** Takes `waiting` out of the line; false when it already started. */
  #remove(name: string, waiting: Waiting): boolean {
    const queue = this.#line.get(name);
    const at = queue?.indexOf(waiting) ?? -1;
    if (!queue || at < 0) return false;
    queue.splice(at, 1);
    this.#waiting--;
    if (queue.length === 0) this.#line.delete(name);
    return true;
  }
}

/** The caller left before its read's turn came: it was never run. */
function callerGone(): SessionmuxError {
  return new SessionmuxError("aborted", "the caller left before this read's turn came; it was not run");
}
