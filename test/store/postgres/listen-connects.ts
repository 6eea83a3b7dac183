import pg from "pg";
import { vi } from "vitest";

/** Whether `client` is a store's LISTEN connection (the commit feed's or the call inbox's). */
export const isListenClient = (client: pg.Client) =>
  ["sessionmux-feed", "sessionmux-calls"].includes(
    (client as unknown as { connectionParameters: { application_name?: string } }).connectionParameters
      .application_name ?? "",
  );

/**
 * Runs every LISTEN connection's `connect` through `around` (given the client and the real connect
 * to call); other connections connect as they would. The spy is undone by `vi.restoreAllMocks()`.
 */
export function aroundListenConnects(
  around: (client: pg.Client, connect: () => Promise<unknown>) => Promise<unknown>,
): void {
  const connect = pg.Client.prototype.connect;
  vi.spyOn(pg.Client.prototype, "connect").mockImplementation(function (this: pg.Client, ...args: unknown[]) {
    const call = () => (connect as (...a: unknown[]) => Promise<unknown>).apply(this, args);
    return isListenClient(this) ? around(this, call) : call();
  } as typeof pg.Client.prototype.connect);
}

/**
 * Holds every LISTEN connection's `connect` until `openConnects()`; `connecting` has each attempt
 * (other connections connect at once).
 */
export function gateListenConnects(): { openConnects: () => void; connecting: Promise<unknown>[] } {
  let openConnects!: () => void;
  const gate = new Promise<void>((resolve) => {
    openConnects = resolve;
  });
  const connecting: Promise<unknown>[] = [];
  aroundListenConnects((_client, connect) => {
    const made = gate.then(connect);
    connecting.push(made);
    return made;
  });
  return { openConnects, connecting };
}

/** Every LISTEN connection made from now on. */
export function listenClientsMade(): pg.Client[] {
  const made: pg.Client[] = [];
  aroundListenConnects((client, connect) => {
    made.push(client);
    return connect();
  });
  return made;
}

/**
 * Resolves once a connection's `LISTEN` on `channel` begun from now on is answered, before the
 * code that sent it goes on (a feed's re-read after it is not queued yet).
 */
export function listensAgain(channel: string): Promise<void> {
  const query = pg.Client.prototype.query;
  return new Promise((resolve) => {
    vi.spyOn(pg.Client.prototype, "query").mockImplementation(function (this: pg.Client, ...args: unknown[]) {
      const result = (query as (...a: unknown[]) => unknown).apply(this, args);
      if (
        typeof args[0] === "string" &&
        args[0].startsWith(`LISTEN "${channel}"`) &&
        result instanceof Promise
      )
        result.then(
          () => resolve(),
          () => undefined,
        );
      return result;
    } as typeof pg.Client.prototype.query);
  });
}
