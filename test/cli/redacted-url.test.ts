import { describe, expect, it } from "vitest";
import { runCli } from "./run-cli.js";

describe("a PostgreSQL password in --db", () => {
  it("is masked in what the commands print, also when given as a query parameter", async () => {
    for (const db of [
      "postgres://postgres:s3cret@127.0.0.1:1/test",
      "postgres://postgres@127.0.0.1:1/test?password=s3cret&sslmode=disable",
      "postgresql://postgres@127.0.0.1:1/test?sslmode=disable&PASSWORD=s3cret",
    ]) {
      const migrate = await runCli(["migrate", "--db", db]);
      expect(migrate.code).toBe(2);
      expect(migrate.stderr).toMatch(/^error: db_unreachable: cannot connect to postgres/);
      expect(migrate.stderr).toContain("***");
      expect(migrate.stderr).not.toContain("s3cret");
      const backup = await runCli(["backup", "copy.db", "--db", db]);
      expect(backup.stderr).toMatch(/^error: sqlite_only: /);
      expect(backup.stderr).not.toContain("s3cret");
    }
  });
});
