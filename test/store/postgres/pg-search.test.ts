import { randomBytes } from "node:crypto";
import { describe, expect, it, vi } from "vitest";
import { PostgresSessionStore } from "../../../src/store/postgres/postgres-store.js";
import { cleanupsAfterEach } from "../../support/cleanups.js";
import { dropSchema, pgUrl } from "../contract/backends.js";
import { userMessage } from "../open-store.js";
import { sentStatements } from "./pg-client-spies.js";

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
    // the spy sees a search that has a word to look for
    expect(await store.search("zebra", 10)).toHaveLength(1);
    expect(searches()).toHaveLength(1);
  });
});
