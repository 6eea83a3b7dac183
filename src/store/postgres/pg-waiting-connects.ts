import type pg from "pg";

/** pg's pool hands a connection over this way: the client and its release, or the connect's error. */
export type Connected = (
  err: Error | undefined,
  client: pg.PoolClient | undefined,
  release: (err?: Error | boolean) => void,
) => void;

/** Takes back a connect not yet answered: it is answered no more, and no longer waits in its pool's queue. */
export type Withdraw = () => void;

const NOTHING_TO_RELEASE = (): void => undefined;
const NOTHING_TO_WITHDRAW: Withdraw = () => undefined;

/**
 * Connects asked of a pool and not yet handed a connection, which `refuse` settles all at once.
 * pg's pool keeps a connect waiting until one of its connections is free, and once the pool
 * ended none ever is: its caller would wait for ever, a closing host left with a promise that
 * never settles. A connection that comes for a connect already refused goes back to its pool at
 * once (an ended pool closes it): kept, nothing would release it, and the pool's end would wait
 * on it for good. A refused connect is also taken out of the pool's queue where the pool says how
 * (see `connect`), so the pool no longer counts it as waiting.
 */
export class WaitingConnects {
  readonly #waiting = new Set<(err: Error) => void>();
  #refusal: (() => Error) | undefined;

  /**
   * Asks `connect` for a connection for `callback`, which `refuse` answers instead if it comes
   * first. `connect` may return how to take its request back, called as it is refused. Returns how
   * to take this connect back without an answer (nothing once it was answered).
   */
  connect(connect: (callback: Connected) => Withdraw | undefined, callback: Connected): Withdraw {
    if (this.#refusal) {
      callback(this.#refusal(), undefined, NOTHING_TO_RELEASE);
      return NOTHING_TO_WITHDRAW;
    }
    let refused = false;
    let withdrawAsked: Withdraw | undefined;
    const withdraw = () => {
      if (!this.#waiting.delete(refuse)) return;
      refused = true;
      withdrawAsked?.();
    };
    const refuse = (err: Error) => {
      refused = true;
      withdrawAsked?.();
      callback(err, undefined, NOTHING_TO_RELEASE);
    };
    this.#waiting.add(refuse);
    withdrawAsked = connect((err, client, release) => {
      if (refused) {
        if (client) release();
        return;
      }
      this.#waiting.delete(refuse);
      callback(err, client, release);
    });
    return withdraw;
  }

  /** A connection of `pool` (one `openPool` made), or the refusal (see `connect`). */
  connectTo(pool: pg.Pool): Promise<pg.PoolClient> {
    // such a pool hands back how to take a connect out of its queue (see `EndingPool`)
    const ask = pool.connect.bind(pool) as unknown as (callback: Connected) => Withdraw | undefined;
    return connection((callback) => {
      this.connect(ask, callback);
    });
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
