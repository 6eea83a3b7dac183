import pg from "pg";
import { expect, vi } from "vitest";
import { CHECKED_WRITE } from "../../../src/store/postgres/pg-pending-rows.js";

/**
 * What the stores' connections send and hear, from the call on, by spying on `pg.Client`: the
 * way a batch went is visible only there. The caller restores the spies after each test
 * (`vi.restoreAllMocks()`).
 */

/** What the stores send from now on: a prepared statement by its name, any other by its text. */
export function sentStatements(): string[] {
  const sent: string[] = [];
  const query = pg.Client.prototype.query as (...args: unknown[]) => unknown;
  vi.spyOn(pg.Client.prototype, "query").mockImplementation(function (this: pg.Client, ...args: unknown[]) {
    const config = args[0] as { name?: string; text?: string } | string;
    sent.push(typeof config === "string" ? config : (config.name ?? config.text ?? ""));
    return query.apply(this, args);
  } as typeof pg.Client.prototype.query);
  return sent;
}

/** The warnings PostgreSQL sends the stores from now on (a ROLLBACK with no transaction, …). */
export function serverWarnings(): string[] {
  const warnings: string[] = [];
  const emit = pg.Client.prototype.emit;
  vi.spyOn(pg.Client.prototype, "emit").mockImplementation(function (
    this: pg.Client,
    event: string | symbol,
    ...args: unknown[]
  ) {
    if (event === "notice") warnings.push(String((args[0] as Error).message));
    return emit.call(this, event, ...args);
  });
  return warnings;
}

/** The batch went the one-round-trip way and was not run again the usual way (which reads first). */
export function keptWayOnly(sent: readonly string[]): void {
  expect(sent.some((name) => name.startsWith(CHECKED_WRITE))).toBe(true);
  expect(sent.filter((text) => text.includes("FOR UPDATE"))).toEqual([]);
}
