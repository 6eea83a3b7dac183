import { randomBytes } from "node:crypto";
import { existsSync, writeFileSync } from "node:fs";
import Database from "better-sqlite3";
import { Command } from "commander";
import pg from "pg";
import { describe, expect, inject, it, vi } from "vitest";
import { registerMigrateCommand } from "../../src/cli/migrate-command.js";
import { StartupError } from "../../src/operations/startup-error.js";
import { DatabaseInUseError, DatabaseLock } from "../../src/store/database-lock.js";
import { SCHEMA_VERSION } from "../../src/store/migrations.js";
import { PG_SCHEMA_VERSION } from "../../src/store/postgres/pg-schema.js";
import { SqliteSessionStore } from "../../src/store/sqlite-store.js";
import { UNDO_UNREFERENCED_UPLOAD_INDEXES } from "../support/purge-migration.js";
import { capturedOutput, commandCleanups, quietProgram } from "./in-process-command.js";

/**
 * `migrate` run in this process: on a SQLite file in a temp folder, and on PostgreSQL in a schema
 * of its own (dropped after); stdout captured, the errors main prints read from what the action
 * throws. The refusals of `--db` and `--db-schema` come before any connection is tried.
 */

const pgUrl = inject("pgUrl");

const { stdout } = capturedOutput();
const { cleanups, folder } = commandCleanups();

const run = (argv: string[]) => {
  const program = quietProgram();
  registerMigrateCommand(program);
  return program.parseAsync(["migrate", ...argv], { from: "user" });
};

async function refusal(argv: string[]): Promise<StartupError> {
  const err = await run(argv).then(
    () => new Error(`migrate ${argv.join(" ")} succeeded`),
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(StartupError);
  expect(stdout).toEqual([]);
  return err as StartupError;
}

/** A SQLite database at `path`, written by this build and closed. */
async function sqliteDatabase(path: string): Promise<void> {
  const store = SqliteSessionStore.open(path);
  await store.create({ sessionId: "kept", owner: "admin", model: "demo-fast" });
  await store.close();
}

describe("--help", () => {
  it("says what migrate does", () => {
    const program = new Command();
    registerMigrateCommand(program);
    expect(program.commands.find((c) => c.name() === "migrate")?.description()).toBe(
      "bring the database schema up to this build (SQLite: an existing file, which serve creates; PostgreSQL: creates or upgrades the tables in --db-schema)",
    );
  });
});

describe("migrate on a SQLite file", () => {
  it("migrates the file and prints the versions it found and left, as on PostgreSQL, again as often as it runs; --db-schema public is no schema", async () => {
    const db = folder().file("sessions.db");
    await sqliteDatabase(db);
    // the file as the build before the last migration left it
    const older = new Database(db);
    older.exec(UNDO_UNREFERENCED_UPLOAD_INDEXES);
    older.pragma(`user_version = ${SCHEMA_VERSION - 1}`);
    older.close();
    await run(["--db", db]);
    expect(stdout).toEqual([
      `${JSON.stringify({ db, from: SCHEMA_VERSION - 1, to: SCHEMA_VERSION, latest: SCHEMA_VERSION })}\n`,
    ]);
    await run(["--db", db, "--db-schema", "public"]);
    expect(stdout[1]).toBe(
      `${JSON.stringify({ db, from: SCHEMA_VERSION, to: SCHEMA_VERSION, latest: SCHEMA_VERSION })}\n`,
    );
    const check = new Database(db, { readonly: true });
    cleanups.push(() => void check.close());
    expect(check.prepare("SELECT session_id FROM projections").all()).toEqual([{ session_id: "kept" }]);
    expect(
      check.prepare("SELECT name FROM sqlite_master WHERE name = 'attachments_unreferenced_by_owner'").all(),
    ).toEqual([{ name: "attachments_unreferenced_by_owner" }]);
  });

  it("refuses a file that does not exist, and creates none", async () => {
    const db = folder().file("nope.db");
    const err = await refusal(["--db", db]);
    expect(err.code).toBe("db_missing");
    expect(existsSync(db)).toBe(false);
  });

  it("refuses a file a host has open, and one a host took after the check, both db_in_use", async () => {
    const db = folder().file("sessions.db");
    await sqliteDatabase(db);
    const host = SqliteSessionStore.open(db);
    cleanups.push(() => host.close());
    const open = await refusal(["--db", db]);
    expect(open.code).toBe("db_in_use");
    // the host is a store of this very process, and the refusal says so
    expect(open.message).toBe(
      `database ${db} is already open in this process (a store of it is open); close that store first`,
    );
    // SQLite's refusal kept as the cause, for whoever reads the log
    expect(open.cause).toMatchObject({ code: "SQLITE_BUSY" });
    await host.close();
    // only the host's lock held: the file itself is free when migrate looks, the store's open refuses
    const lock = DatabaseLock.acquire(db);
    cleanups.push(() => lock.release());
    const locked = await refusal(["--db", db]);
    expect(locked.code).toBe("db_in_use");
    expect(locked.message).toContain(db);
    expect(locked.cause).toBeInstanceOf(DatabaseInUseError);
  });

  it("a file that is no database is refused db_unreadable with SQLite's reason, not as in use, and stays unlocked", async () => {
    const db = folder().file("sessions.db");
    writeFileSync(db, Buffer.alloc(4096, 0x5a));
    const err = await refusal(["--db", db]);
    expect(err.code).toBe("db_unreadable");
    expect(err.message).toBe(
      `cannot read database ${db}: file is not a database; the file is damaged or not a sessionmux database (sessionmux restore puts a backup in its place)`,
    );
    expect(err.cause).toMatchObject({ code: "SQLITE_NOTADB" });
    // the look at the file left nothing held: it can be made a database, and then migrated
    writeFileSync(db, "");
    await sqliteDatabase(db);
    await run(["--db", db]);
  });

  it("refuses a --db-schema other than public, naming the file", async () => {
    const db = folder().file("sessions.db");
    await sqliteDatabase(db);
    const err = await refusal(["--db", db, "--db-schema", "other"]);
    expect(err.code).toBe("db_option_invalid");
    expect(err.message).toBe(
      `--db-schema applies to a postgres:// database only (--db ${db} is a SQLite file)`,
    );
  });
});

describe("migrate's refusals of a PostgreSQL --db and --db-schema", () => {
  /** Port 1 of 127.0.0.1: what passes the checks fails to connect, and says so. */
  const unreachable = "postgres://app:s3cret@127.0.0.1:1/test";

  it("refuses a URL that names no database, or is no URL, without its password", async () => {
    for (const db of ["postgres://app:s3cret@127.0.0.1:1", "postgres://app:s3cret@127.0.0.1:1/"]) {
      const err = await refusal(["--db", db]);
      expect(err.code).toBe("db_option_invalid");
      expect(err.message).toBe(
        `--db ${db.replace("s3cret", "***")} names no database; add it, e.g. postgres://user@host:5432/sessionmux`,
      );
    }
    const bad = await refusal(["--db", "postgres://app:s3cret@127.0.0.1:port/test"]);
    expect(bad.code).toBe("db_option_invalid");
    expect(bad.message).toBe("--db is not a valid PostgreSQL URL: postgres://app:***@127.0.0.1:port/test");
    expect(bad.cause).toBeInstanceOf(TypeError);
  });

  it("refuses a schema name PostgreSQL would fold or need quoted, and takes one of 63 characters", async () => {
    for (const schema of ["Sessions", "1st", "a-b", 'x"; DROP', "", "s".repeat(64)]) {
      const err = await refusal(["--db", unreachable, "--db-schema", schema]);
      expect(err.code).toBe("db_option_invalid");
      expect(err.message).toBe(
        `--db-schema ${JSON.stringify(schema)} is not a schema name (lower case letters, digits and _, at most 63)`,
      );
    }
    for (const schema of ["_a1", "s".repeat(63)]) {
      const err = await refusal(["--db", unreachable, "--db-schema", schema]);
      expect(err.code).toBe("db_unreachable");
    }
  });

  it("reports a server it cannot reach, the password masked after the user name and as a parameter", async () => {
    for (const [db, shown] of [
      [unreachable, "postgres://app:***@127.0.0.1:1/test"],
      [
        "postgresql://app@127.0.0.1:1/test?sslmode=disable&PASSWORD=s3cret#x",
        "postgresql://app@127.0.0.1:1/test?sslmode=disable&PASSWORD=***#x",
      ],
      // only the password after the user name: a URL among the parameters is left as it is
      [
        "postgres://app@127.0.0.1:1/test?application_name=postgres://x:y@z",
        "postgres://app@127.0.0.1:1/test?application_name=postgres://x:y@z",
      ],
    ] as const) {
      const err = await refusal(["--db", db]);
      expect(err.code).toBe("db_unreachable");
      const said = `cannot connect to ${shown}: `;
      expect(err.message.slice(0, said.length)).toBe(said);
      // and the driver's reason after it
      expect(err.message.length).toBeGreaterThan(said.length);
      expect(err.cause).toBeInstanceOf(Error);
    }
  });
});

describe.runIf(pgUrl)("migrate on PostgreSQL", () => {
  it("creates the schema's tables, says which versions it went from and to, and again finds nothing to do", async () => {
    const schema = `migrate_${randomBytes(4).toString("hex")}`;
    cleanups.push(async () => {
      const client = new pg.Client({ connectionString: pgUrl as string });
      await client.connect();
      await client.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
      await client.end();
    });
    // a password the server does not ask for, shown masked; a name to find the connection by
    const url = new URL(pgUrl as string);
    url.password = "s3cret";
    url.searchParams.set("application_name", schema);
    const masked = url.href.replace("s3cret", "***");
    await run(["--db", url.href, "--db-schema", schema]);
    expect(stdout.map((line) => JSON.parse(line))).toEqual([
      { db: masked, schema, from: 0, to: PG_SCHEMA_VERSION, latest: PG_SCHEMA_VERSION },
    ]);
    await run(["--db", url.href, "--db-schema", schema]);
    expect(JSON.parse(stdout[1]!)).toEqual({
      db: masked,
      schema,
      from: PG_SCHEMA_VERSION,
      to: PG_SCHEMA_VERSION,
      latest: PG_SCHEMA_VERSION,
    });
    // each run closed its connection
    const watcher = new pg.Client({ connectionString: pgUrl as string });
    await watcher.connect();
    cleanups.push(() => watcher.end());
    const connected = async () =>
      (
        await watcher.query<{ n: number }>(
          "SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = $1",
          [schema],
        )
      ).rows[0]?.n;
    await vi.waitFor(async () => expect(await connected()).toBe(0));
  });
});
