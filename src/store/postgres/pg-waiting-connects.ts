import type pg from "pg";

/** pg's pool hands a connection over this way: the client and its release, or the connect's error. */
export type Connected = (
  err: Error | undefined,
  client: pg.PoolClient | undefined,
  release: (err?: Error | boolean) => void,
) => void;

const NOTHING_TO_RELEASE = (): void => undefined;

/**
 * Connects asked of a pool and not yet handed a connection, which `refuse` settles all at once.
 * pg's pool keeps a connect waiting until one of its connections is free, and once the pool
 * ended none ever is: its caller would wait for ever, a closing host left with a promise that
 * never settles. A connection that comes for a connect already refused goes back to its pool at
 * once (an ended pool closes it): kept, nothing would release it, and the pool's end would wait
 * on it for good.
 */
export class WaitingConnects {
  readonly #waiting = new Set<(err: Error) => void>();
  #refusal: (() => Error) | undefined;

  /** Asks `connect` for a connection for `callback`, which `refuse` answers instead if it comes first. */
  connect(connect: (callback: Connected) => void, callback: Connected): void {
    if (this.#refusal) {
      callback(this.#refusal(), undefined, NOTHING_TO_RELEASE);
      return;
    }
    let refused = false;
    const refuse = (err: Error) => {
      refused = true;
      callback(err, undefined, NOTHING_TO_RELEASE);
    };
    this.#waiting.add(refuse);
    connect((err, client, release) => {
      if (refused) {
        if (client) release();
        return;
      }
      this.#waiting.delete(refuse);
      callback(err, client, release);
    });
  }

  /** A connection of `pool`, or the refusal (see `connect`). */
  connectTo(pool: pg.Pool): Promise<pg.PoolClient> {
    return connection((callback) => this.connect((connected) => pool.connect(connected), callback));
  }

  /** Fails every connect still waiting with `refusal()`, and every one asked for from now on. */
  refuse(refusal: () => Error): void {
    this.#refusal ??= refusal;
    const waiting = [...this.#waiting];
    this.#waiting.clear();
    for (const refuse of waiting) refuse(refusal());
  }
}

/** The connection `ask` hands its callback, as a promise. */
export function connection(ask: (callback: Connected) => void): Promise<pg.PoolClient> {
  return new Promise((resolve, reject) => {
    ask((err, client) => (client ? resolve(client) : reject(err)));
  });
}
