import pg from "pg";
import type { TestProject } from "vitest/node";

declare module "vitest" {
  export interface ProvidedContext {
    /** The PostgreSQL the store contract suite runs against; null when none was reachable. */
    pgUrl: string | null;
  }
}

export const DEFAULT_TEST_PG_URL = "postgres://postgres@127.0.0.1:5432/test";

/**
 * Finds out once per run whether PostgreSQL is reachable at `SESSIONMUX_TEST_PG_URL`. Without it the
 * PostgreSQL half of the store contract suite is skipped and the run says so; under `CI=true` an
 * unreachable database fails the run instead.
 */
export default async function setup(project: TestProject): Promise<void> {
  const url = process.env.SESSIONMUX_TEST_PG_URL ?? DEFAULT_TEST_PG_URL;
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 5_000 });
  try {
    await client.connect();
    await client.query("SELECT 1");
    project.provide("pgUrl", url);
  } catch (err) {
    const reason = err instanceof Error ? err.message : String(err);
    if (process.env.CI === "true") {
      throw new Error(`PostgreSQL at ${url} is unreachable (${reason}); CI runs the PostgreSQL store tests`);
    }
    console.warn(
      `\n*** The PostgreSQL part of the store contract suite did NOT run: ${url} is unreachable (${reason}).\n` +
        "*** Start PostgreSQL or set SESSIONMUX_TEST_PG_URL to run it.\n",
    );
    project.provide("pgUrl", null);
  } finally {
    await client.end().catch(() => undefined);
  }
}
