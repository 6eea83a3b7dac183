import { randomBytes } from "node:crypto";
import { describe, expect, it } from "vitest";
import { isPostgresUrl, openStore } from "../../src/store/open-store.js";
import { PostgresSessionStore } from "../../src/store/postgres/postgres-store.js";
import { SqliteSessionStore } from "../../src/store/sqlite-store.js";
import { tempDir } from "../support/temp-dir.js";
import { dropSchema, pgUrl } from "./contract/backends.js";

describe("openStore", () => {
  it("tells PostgreSQL URLs from file paths", () => {
    expect(isPostgresUrl("postgres://u@h:5432/db")).toBe(true);
    expect(isPostgresUrl("postgresql://u@h/db")).toBe(true);
    expect(isPostgresUrl("./data/sessions.db")).toBe(false);
    expect(isPostgresUrl("/tmp/postgres://x.db")).toBe(false);
  });

  it("opens SQLite for a path", async () => {
    const dir = tempDir("sessionmux-open-");
    const store = await openStore(dir.file("s.db"));
    try {
      expect(store).toBeInstanceOf(SqliteSessionStore);
      expect((await store.create({ sessionId: "a", owner: "o", model: "m" })).status).toBe("created");
    } finally {
      await store.close();
      dir.remove();
    }
  });

  it.skipIf(!pgUrl)("opens PostgreSQL for a postgres:// URL, in the given schema", async () => {
    const schema = `open_${randomBytes(6).toString("hex")}`;
    const store = await openStore(pgUrl!, { schema });
    try {
      expect(store).toBeInstanceOf(PostgresSessionStore);
      expect((await store.create({ sessionId: "a", owner: "o", model: "m" })).status).toBe("created");
    } finally {
      await store.close();
      await dropSchema(pgUrl!, schema);
    }
  });
});
