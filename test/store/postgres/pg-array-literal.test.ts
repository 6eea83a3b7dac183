import pg from "pg";
import { describe, expect, it } from "vitest";
import { integerArrayLiteral, textArrayLiteral } from "../../../src/store/postgres/pg-array-literal.js";
import { pgUrl } from "../contract/backends.js";

describe.skipIf(!pgUrl)("array literals built for the write statements", () => {
  it("come back from PostgreSQL as the values they were built from", async () => {
    const client = new pg.Client({ connectionString: pgUrl! });
    await client.connect();
    try {
      const texts = [
        "plain",
        "",
        "NULL",
        'a "quoted" id',
        "back\\slash\\",
        '\\"',
        "{braces},commas",
        " spaced ",
        "é🙂",
      ];
      const integers = [0, 1, -7, 2 ** 53 - 1];
      const found = await client.query<{ t: string[]; i: number[] }>(
        "SELECT $1::text[] AS t, $2::bigint[] AS i",
        [textArrayLiteral(texts), integerArrayLiteral(integers)],
      );
      expect(found.rows[0]!.t).toEqual(texts);
      expect(found.rows[0]!.i.map(Number)).toEqual(integers);
      const empty = await client.query<{ t: string[] }>("SELECT $1::text[] AS t", [textArrayLiteral([])]);
      expect(empty.rows[0]!.t).toEqual([]);
    } finally {
      await client.end();
    }
  });
});
