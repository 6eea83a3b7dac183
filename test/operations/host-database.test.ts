import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { existsSync, writeFileSync } from "node:fs";
import pg from "pg";
import { describe, expect, inject, it, vi } from "vitest";
import { type HostDatabase, openHostDatabase } from "../../src/operations/host-database.js";
import { StartupError } from "../../src/operations/startup-error.js";
import { SqliteSessionStore } from "../../src/store/sqlite-store.js";
import { scratchDatabase } from "../store/postgres/scratch-database.js";
import { cleanupsAfterEach } from "../support/cleanups.js";
import { tempDir } from "../support/temp-dir.js";
import { until } from "../support/until.js";

/**
 * How a host opens what `--db` names: a SQLite file or a PostgreSQL schema, each with the parts
 * the host runs on, and the refusals that name the database and why it could not be opened.
 */

const writableCheck = vi.hoisted(() => ({ failure: undefined as Error | undefined }));
vi.mock("../../src/operations/sqlite-writable-check.js", async (importOriginal) => {
  const real = await importOriginal<typeof import("../../src/operations/sqlite-writable-check.js")>();
  return {
    sqliteWritableCheck: (path: string) => {
      if (writableCheck.failure) throw writableCheck.failure;
      return real.sqliteWritableCheck(path);
    },
  };
});

const pgUrl = inject("pgUrl");
const cleanups = cleanupsAfterEach();
const metrics = { committed: () => undefined };

async function opened(options: Parameters<typeof openHostDatabase>[0]): Promise<HostDatabase> {
  const database = await openHostDatabase(options);
  cleanups.push(() => database.close());
  return database;
}

/** The refusal `opening` rejects with. */
async function refusal(opening: Promise<unknown>): Promise<StartupError> {
  const err = await opening.then(
    () => expect.fail("the database opened"),
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(StartupError);
  return err as StartupError;
}

function folder(): ReturnType<typeof tempDir> {
  const dir = tempDir();
  cleanups.push(() => dir.remove());
  return dir;
}

describe("a host database on a SQLite file", () => {
  it("is the file, named as itself, with a store that takes writes and is ready", async () => {
    const file = folder().file("sessions.db");
    const database = await opened({ db: file, hostId: "h1", metrics });
    expect(database.target).toEqual({ kind: "sqlite", path: file });
    expect(database.description).toBe(file);
    expect(database.shared).toBeUndefined();
    // an embedded database has no connections to count
    expect(database.pools).toBeUndefined();
    await database.store.create({ sessionId: "s1", owner: "alice", model: "demo" });
    await expect(database.ready()).resolves.toBeUndefined();
  });

  it("removes the copy a restore killed part way left beside the file", async () => {
    const dir = folder();
    const child = spawn(process.execPath, ["-e", ""], { stdio: "ignore" });
    await new Promise((resolve) => child.once("exit", resolve));
    const left = dir.file(`sessions.db.${child.pid}.restoring`);
    writeFileSync(left, "a copy of a backup");
    await opened({ db: dir.file("sessions.db"), hostId: "h1", metrics });
    expect(existsSync(left)).toBe(false);
  });

  it("in a folder that does not exist, is refused unless asked to create the folder", async () => {
    const file = `${folder().path}/not/yet/sessions.db`;
    expect((await refusal(openHostDatabase({ db: file, hostId: "h1", metrics }))).code).toBe(
      "db_folder_missing",
    );
    const database = await opened({ db: file, hostId: "h1", metrics, createFolder: true });
    expect(database.description).toBe(file);
  });

  it("held by another store, is refused as in use", async () => {
    const file = folder().file("sessions.db");
    const holder = SqliteSessionStore.open(file);
    cleanups.push(() => holder.close());
    const err = await refusal(openHostDatabase({ db: file, hostId: "h1", metrics }));
    expect(err.code).toBe("db_in_use");
  });

  it("that is no database, is named with SQLite's reason, its error kept as the cause", async () => {
    const file = folder().file("notes.db");
    writeFileSync(file, "these are notes, not a database\n".repeat(100));
    const err = await refusal(openHostDatabase({ db: file, hostId: "h1", metrics }));
    expect(err.code).toBe("db_unreadable");
    expect(err.message).toBe(
      `cannot read database ${file}: file is not a database; the file is damaged or not a sessionmux database (sessionmux restore puts a backup in its place)`,
    );
    expect((err.cause as Error).message).toBe("file is not a database");
  });

  it("whose writability check cannot open, is let go of again: the next opener gets it", async () => {
    const file = folder().file("sessions.db");
    const failure = new Error("unable to open database file");
    writableCheck.failure = failure;
    try {
      await expect(openHostDatabase({ db: file, hostId: "h1", metrics })).rejects.toBe(failure);
    } finally {
      writableCheck.failure = undefined;
    }
    let database: HostDatabase | undefined;
    await until(
      async () => {
        database = await openHostDatabase({ db: file, hostId: "h1", metrics }).catch(() => undefined);
        return database !== undefined;
      },
      5_000,
      "the file free again",
    );
    cleanups.push(() => database!.close());
  });
});

describe.skipIf(!pgUrl)("a host database on PostgreSQL", () => {
  it("cannot reach the server: names the URL with its password masked and the schema, the driver's error as the cause", async () => {
    const err = await refusal(
      openHostDatabase({
        db: "postgres://smx:hunter2@127.0.0.1:1/test",
        schema: "hosts_a",
        hostId: "h1",
        metrics,
      }),
    );
    expect(err.code).toBe("db_unreachable");
    expect(err.message).toBe(
      "cannot open PostgreSQL database postgres://smx:***@127.0.0.1:1/test (schema hosts_a): connect ECONNREFUSED 127.0.0.1:1",
    );
    expect((err.cause as Error).message).toBe("connect ECONNREFUSED 127.0.0.1:1");
  });

  it("on a database that takes no writes, is refused db_unwritable naming what to check, not as unreachable", async () => {
    const scratch = await scratchDatabase(pgUrl!, "smx_hostdb");
    cleanups.push(() => scratch.drop());
    await scratch.server.query(`ALTER DATABASE "${scratch.name}" SET default_transaction_read_only = on`);
    const err = await refusal(
      openHostDatabase({ db: scratch.url, schema: "hosts_a", hostId: "h1", metrics }),
    );
    expect(err.code).toBe("db_unwritable");
    expect(err.message).toMatch(
      new RegExp(
        `^cannot write PostgreSQL database ${scratch.url} \\(schema hosts_a\\): .*read-only transaction; check that the server's disk has room`,
      ),
    );
    expect(err.cause).toMatchObject({ code: "25006" });
    await scratch.server.query(`ALTER DATABASE "${scratch.name}" RESET default_transaction_read_only`);
    const database = await opened({ db: scratch.url, schema: "hosts_a", hostId: "h1", metrics });
    expect(database.description).toBe(`${scratch.url} (schema hosts_a)`);
  });

  it("is the schema it names, with its leases and call inbox there, ready while the server takes connections", async () => {
    const scratch = await scratchDatabase(pgUrl!, "smx_hostdb");
    cleanups.push(() => scratch.drop());
    const database = await opened({ db: scratch.url, schema: "hosts_a", hostId: "h1", metrics });
    expect(database.target).toEqual({ kind: "postgres", url: scratch.url, schema: "hosts_a" });
    expect(database.description).toBe(`${scratch.url} (schema hosts_a)`);
    expect(database.shared?.leases).toBe(database.store);
    const client = new pg.Client({ connectionString: scratch.url });
    await client.connect();
    const { rows } = await client.query<{ schema: string }>(
      "SELECT DISTINCT table_schema AS schema FROM information_schema.tables WHERE table_schema NOT IN ('pg_catalog', 'information_schema')",
    );
    await client.end();
    // the inbox migrates the schema it is given: nothing of the host's lands in public
    expect(rows).toEqual([{ schema: "hosts_a" }]);
    await expect(database.ready()).resolves.toBeUndefined();
    // the readiness check's connection is its own: cut, it cannot come back
    await scratch.server.query(`ALTER DATABASE "${scratch.name}" ALLOW_CONNECTIONS false`);
    await scratch.server.query(
      "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND application_name = 'sessionmux-ready'",
      [scratch.name],
    );
    await expect(database.ready()).rejects.toThrow();
  });

  it("counts every connection it holds in one of its named pools", async () => {
    const scratch = await scratchDatabase(pgUrl!, "smx_hostdb");
    cleanups.push(() => scratch.drop());
    const database = await opened({ db: scratch.url, hostId: "h1", metrics });
    // every pool put to use (the inbox's was by its migration): a write, a read, the readiness
    // check, the uploads' ledger
    await database.store.create({ sessionId: "s1", owner: "alice", model: "demo" });
    await database.store.readAfter("s1", 0, 10);
    await database.ready();
    await database.uploads.pendingBytes("alice");
    const pools = database.pools!();
    expect(Object.keys(pools).sort()).toEqual(["inbox", "readiness", "reads", "uploads", "writer"]);
    for (const name of ["readiness", "reads", "uploads", "writer"]) {
      expect(pools[name], name).toEqual({ total: 1, idle: 1, waiting: 0 });
    }
    // what PostgreSQL sees of the host, but its two LISTEN connections (outside every pool)
    const { rows } = await scratch.server.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = $1
         AND application_name NOT IN ('sessionmux-feed', 'sessionmux-calls')`,
      [scratch.name],
    );
    const counted = Object.values(pools).reduce((sum, pool) => sum + pool.total, 0);
    expect(rows[0]!.n).toBe(counted);
  });

  it("whose call inbox cannot connect after the store opened, closes the store again", async () => {
    const scratch = await scratchDatabase(pgUrl!, "smx_hostdb");
    const role = `smx_limited_${randomBytes(4).toString("hex")}`;
    // the store holds three connections once open; the inbox's first one is over the limit
    await scratch.server.query(`CREATE ROLE "${role}" LOGIN CONNECTION LIMIT 3`);
    await scratch.server.query(`ALTER DATABASE "${scratch.name}" OWNER TO "${role}"`);
    cleanups.push(async () => {
      const server = new pg.Client({ connectionString: pgUrl! });
      await server.connect();
      await scratch.drop();
      await server.query(`DROP ROLE "${role}"`);
      await server.end();
    });
    const url = new URL(scratch.url);
    url.username = role;
    const err = await refusal(openHostDatabase({ db: url.toString(), hostId: "h1", metrics }));
    expect(err.code).toBe("db_unreachable");
    expect(err.message).toContain(`too many connections for role "${role}"`);
    const held = async () => {
      const { rows } = await scratch.server.query<{ n: number }>(
        "SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = $1",
        [scratch.name],
      );
      return rows[0]!.n;
    };
    await until(async () => (await held()) === 0, 5_000, "no connection of the store left");
  });
});
