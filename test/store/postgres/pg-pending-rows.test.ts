import { describe, expect, it } from "vitest";
import { CHECKED_WRITE, PendingRows } from "../../../src/store/postgres/pg-pending-rows.js";

/** The `$n` a statement's text uses, in order of first use. */
const placeholders = (sql: string) => [...new Set([...sql.matchAll(/\$(\d+)/g)].map((m) => Number(m[1])))];

const bytes = new Uint8Array([0x81, 0xa1, 0x61, 0x01]);

describe("the write statement of a transaction's pending rows", () => {
  it("numbers each part's placeholders after the previous ones, the result's last", () => {
    const rows = new PendingRows();
    rows.event("s", 1, "assistant/delta", 5, bytes);
    rows.prompt("s", "m1", bytes);
    const result = { sql: "SELECT sessionmux_expect({expected} AND $1::int = $2::int)", params: [1, 1] };
    const statement = rows.take({
      states: [],
      created: new Set(),
      written: new Set(),
      ownerDataBytes: [],
      result,
    })!;
    // events 7, prompt keys 3, the result 2
    expect(statement.params).toHaveLength(12);
    expect(placeholders(statement.sql).sort((a, b) => a - b)).toEqual([
      1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12,
    ]);
    expect(statement.sql).toContain("$11::int = $12::int");
    expect(statement.name?.startsWith(CHECKED_WRITE)).toBe(true);
  });

  it("is built once per shape: the same parts give the same text and name, other parts or another end another", () => {
    const take = (withPrompt: boolean, checked: boolean) => {
      const rows = new PendingRows();
      rows.event("s", 1, "assistant/delta", 5, bytes);
      if (withPrompt) rows.prompt("s", "m1", bytes);
      const result = { sql: "SELECT sessionmux_expect({expected})", params: [] };
      return checked
        ? rows.take({ states: [], created: new Set(), written: new Set(), ownerDataBytes: [], result })!
        : rows.take()!;
    };
    const first = take(false, false);
    const again = take(false, false);
    expect([again.sql, again.name]).toEqual([first.sql, first.name]);
    expect(again.params).not.toBe(first.params);
    const names = [first, take(true, false), take(false, true), take(true, true)].map((s) => s.name);
    expect(new Set(names).size).toBe(4);
    expect(take(true, true).name).toBe(names[3]);
  });

  it("takes the rows: a second take has nothing to write", () => {
    const rows = new PendingRows();
    rows.event("s", 1, "assistant/delta", 5, bytes);
    expect(rows.take()).not.toBeNull();
    expect(rows.take()).toBeNull();
  });
});
