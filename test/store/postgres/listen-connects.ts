import pg from "pg";
import { vi } from "vitest";

/** Whether `client` is a store's LISTEN connection (the commit feed's or the call inbox's). */
export const isListenClient = (client: pg.Client) =>
  (client as unknown as { connectionParameters: { application_name?: string } }).connectionParameters
    .application_name === "sessionmux-listen";

/**
 * Holds every LISTEN connection's `connect` until `openConnects()`; `connecting` has each attempt
 * (other connections connect at once). The spy is undone by `vi.restoreAllMocks()`.
 */
export function gateListenConnects(): { openConnects: () => void; connecting: Promise<unknown>[] } {
  let openConnects!: () => void;
  const gate = new Promise<void>((resolve) => {
    openConnects = resolve;
  });
  const connecting: Promise<unknown>[] = [];
  const connect = pg.Client.prototype.connect;
  vi.spyOn(pg.Client.prototype, "connect").mockImplementation(function (this: pg.Client, ...args: unknown[]) {
    const call = () => (connect as (...a: unknown[]) => Promise<unknown>).apply(this, args);
    if (!isListenClient(this)) return call();
    const made = gate.then(call);
    connecting.push(made);
    return made;
  } as typeof pg.Client.prototype.connect);
  return { openConnects, connecting };
}

/** Every LISTEN connection made from now on. The spy is undone by `vi.restoreAllMocks()`. */
export function listenClientsMade(): pg.Client[] {
  const made: pg.Client[] = [];
  const connect = pg.Client.prototype.connect;
  vi.spyOn(pg.Client.prototype, "connect").mockImplementation(function (this: pg.Client, ...args: unknown[]) {
    if (isListenClient(this)) made.push(this);
    return (connect as (...a: unknown[]) => Promise<unknown>).apply(this, args);
  } as typeof pg.Client.prototype.connect);
  return made;
}
