import { randomBytes } from "node:crypto";
import pg from "pg";
import { describe, expect, it, vi } from "vitest";
import { PostgresSessionStore } from "../../../src/store/postgres/postgres-store.js";
import { cleanupsAfterEach } from "../../support/cleanups.js";
import { dropSchema, pgUrl } from "../contract/backends.js";
import { userMessage } from "../open-store.js";
import { sentStatements } from "./pg-client-spies.js";
import { scratchDatabase } from "./scratch-database.js";

const cleanups = cleanupsAfterEach(() => vi.restoreAllMocks());

describe.skipIf(!pgUrl)("a PostgreSQL store's message search", () => {
  it("asks the database nothing for a query with no letter or digit, as a search box sends while typing", async () => {
    const schema = `search_${randomBytes(4).toString("hex")}`;
    const store = await PostgresSessionStore.open(pgUrl!, { schema, maxConnections: 1 });
    cleanups.push(() => dropSchema(pgUrl!, schema));
    cleanups.push(() => store.close());
    await store.create({ sessionId: "s", owner: "alice", model: "m" });
    await store.append("s", [userMessage("zebra crossing")]);
    const sent = sentStatements();
    const searches = () => sent.filter((text) => text.includes("search_docs"));
    for (const query of ["", "   ", "'", "*", "&|!:()"]) {
      expect(await store.search(query, 10)).toEqual([]);
      expect(await store.search(query, 10, "alice")).toEqual([]);
    }
    expect(searches()).toEqual([]);
    // the spy sees a search that has a word to look for: its matches counted, then ranked
    expect(await store.search("zebra", 10)).toHaveLength(1);
    expect(searches()).toHaveLength(2);
  });

  it("finds a word whatever accents it was written or typed with, and marks it as written", async () => {
    const schema = `search_${randomBytes(4).toString("hex")}`;
    const store = await PostgresSessionStore.open(pgUrl!, { schema, maxConnections: 1 });
    cleanups.push(() => dropSchema(pgUrl!, schema));
    cleanups.push(() => store.close());
    await store.create({ sessionId: "s", owner: "alice", model: "m" });
    // the second café is written decomposed: an e and a combining acute accent
    await store.append("s", [userMessage("Café Ångström, naïve cafe\u0301")]);
    for (const query of ["cafe", "CAFÉ", "angstrom", "naive", "naïve", "ångström"]) {
      expect(await store.search(query, 10), query).toHaveLength(1);
    }
    expect((await store.search("cafe", 10))[0]?.snippet).toBe("**Café** Ångström, naïve **cafe\u0301**");
  });

  it("is refused on a database whose encoding is not UTF8, saying so, before anything is written", async () => {
    const db = await scratchDatabase(
      pgUrl!,
      "smx_ascii",
      "ENCODING 'SQL_ASCII' TEMPLATE template0 LC_COLLATE 'C' LC_CTYPE 'C'",
    );
    cleanups.push(() => db.drop());
    await expect(
      PostgresSessionStore.open(db.url, { schema: "sessionmux", maxConnections: 1 }),
    ).rejects.toThrow("the database's encoding is SQL_ASCII; sessionmux needs UTF8");
    const client = new pg.Client({ connectionString: db.url });
    await client.connect();
    const schema = await client
      .query("SELECT to_regnamespace('sessionmux') AS found")
      .finally(() => client.end());
    expect(schema.rows).toEqual([{ found: null }]);
  });
});
