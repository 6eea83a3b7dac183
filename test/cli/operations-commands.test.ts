import { randomBytes } from "node:crypto";
import { existsSync, readFileSync } from "node:fs";
import Database from "better-sqlite3";
import { Command } from "commander";
import pg from "pg";
import { describe, expect, inject, it, vi } from "vitest";
import { registerOperationsCommands } from "../../src/cli/operations-commands.js";
import { StartupError } from "../../src/operations/startup-error.js";
import { SqliteSessionStore } from "../../src/store/sqlite-store.js";
import { capturedOutput, commandCleanups, quietProgram } from "./in-process-command.js";

/**
 * `backup`, `restore`, `rebuild-projections` and `token rotate` run in this process on a SQLite file in a temp
 * folder (PostgreSQL where the command's refusal depends on it): stdout and stderr captured, the
 * errors main prints as `error: <code>: <message>` read from what the action throws.
 */

const pgUrl = inject("pgUrl");

const { stdout, stderr } = capturedOutput();
const { cleanups, folder } = commandCleanups();

const run = (argv: string[]) => {
  const program = quietProgram();
  registerOperationsCommands(program);
  return program.parseAsync(argv, { from: "user" });
};

async function refusal(argv: string[]): Promise<StartupError> {
  const err = await run(argv).then(
    () => new Error(`${argv.join(" ")} succeeded`),
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(StartupError);
  expect(stdout).toEqual([]);
  return err as StartupError;
}

/** A SQLite database with one session of `events` renames. */
async function database(path: string, events = 3): Promise<void> {
  const store = SqliteSessionStore.open(path);
  await store.create({ sessionId: "ops-a", owner: "admin", model: "demo-fast", title: "Kept title" });
  await store.append(
    "ops-a",
    Array.from({ length: events }, (_, i) => ({
      type: "session/renamed" as const,
      data: { title: `t${i}` },
    })),
  );
  await store.close();
}

describe("--help", () => {
  it("says what each command does and where it keeps things", () => {
    const program = new Command();
    registerOperationsCommands(program);
    const described = (name: string) => program.commands.find((c) => c.name() === name);
    expect(described("backup")?.description()).toBe(
      "copy the database to <file> while the host runs (SQLite backup API: consistent, online), then check the copy",
    );
    expect(described("rebuild-projections")?.description()).toBe(
      "rebuild the session list cache from the event log (SQLite: refused while a host has the file open; " +
        "PostgreSQL: online, in one transaction that holds every session's head)",
    );
    const token = described("token");
    expect(token?.description()).toBe("the admin token kept beside the database (PostgreSQL: in --data-dir)");
    expect(token?.commands.find((c) => c.name() === "rotate")?.description()).toBe(
      "replace the kept token and print the new one; a running host refuses the old one from its next request on (open sockets stay open until they reconnect)",
    );
  });
});

describe("backup", () => {
  it("copies the database to the file, resolved from the working folder, and prints its report", async () => {
    const dir = folder();
    const db = dir.file("sessions.db");
    await database(db);
    vi.spyOn(process, "cwd").mockReturnValue(dir.path);
    await run(["backup", "copy.db", "--db", db]);
    const out = stdout.join("");
    expect(out.endsWith("}\n")).toBe(true);
    expect(JSON.parse(out)).toMatchObject({ integrity: "ok", target: dir.file("copy.db") });
    const copy = new Database(dir.file("copy.db"), { readonly: true });
    cleanups.push(() => void copy.close());
    expect(copy.prepare("select count(*) as n from events").get()).toEqual({ n: 4 });
  });

  it("refuses a PostgreSQL URL, naming pg_dump with the file and the URL without its password", async () => {
    const err = await refusal(["backup", "out.dump", "--db", "postgres://app:s3cret@db.example:5432/prod"]);
    expect(err.code).toBe("sqlite_only");
    expect(err.message).toBe(
      "backup copies a SQLite file; back up PostgreSQL with its own tools, e.g. " +
        "pg_dump --schema=<schema> --format=custom --file=out.dump 'postgres://app:***@db.example:5432/prod' " +
        "(or continuous archiving for point-in-time recovery)",
    );
  });
});

describe("restore", () => {
  it("puts the backup, resolved from the working folder, in place and prints where the old file went", async () => {
    const dir = folder();
    const db = dir.file("sessions.db");
    await database(db, 1);
    await database(dir.file("source.db"), 5);
    vi.spyOn(process, "cwd").mockReturnValue(dir.path);
    await run(["backup", "copy.db", "--db", dir.file("source.db")]);
    stdout.splice(0);

    await run(["restore", "copy.db", "--db", db]);

    const report = JSON.parse(stdout.join("")) as { backup: string; replaced: string };
    expect(report.backup).toBe(dir.file("copy.db"));
    expect(existsSync(report.replaced)).toBe(true);
    const restored = new Database(db, { readonly: true });
    cleanups.push(() => void restored.close());
    expect(restored.prepare("select count(*) as n from events").get()).toEqual({ n: 6 });
  });

  it("refuses a PostgreSQL URL, naming the schema's drop and pg_restore with the file and the URL without its password", async () => {
    const err = await refusal(["restore", "in.dump", "--db", "postgres://app:s3cret@db.example:5432/prod"]);
    expect(err.code).toBe("sqlite_only");
    // pg_restore --clean drops only the dump's objects: a table a later migration added stays,
    // the schema's DROP fails, and pg_restore exits 1 with the old and new tables mixed
    expect(err.message).toContain(
      `psql 'postgres://app:***@db.example:5432/prod' -c 'DROP SCHEMA "<schema>" CASCADE', then ` +
        "pg_restore --dbname='postgres://app:***@db.example:5432/prod' in.dump",
    );
    expect(err.message).toContain("sessionmux migrate");
    expect(err.message).not.toContain("--clean --if-exists");
    expect(err.message).not.toContain("s3cret");
  });
});

describe("rebuild-projections", () => {
  it("rebuilds the list cache of a SQLite file and closes it, so a second run finds it free", async () => {
    const dir = folder();
    const db = dir.file("sessions.db");
    await database(db);
    const raw = new Database(db);
    raw.prepare("UPDATE projections SET title = 'damaged'").run();
    raw.close();
    await run(["rebuild-projections", "--db", db]);
    expect(stdout).toEqual(["projections rebuilt\n"]);
    await run(["rebuild-projections", "--db", db]);
    expect(stdout).toEqual(["projections rebuilt\n", "projections rebuilt\n"]);
    const check = new Database(db, { readonly: true });
    cleanups.push(() => void check.close());
    expect(check.prepare("SELECT title FROM projections").all()).toEqual([{ title: "t2" }]);
  });

  it.runIf(pgUrl)(
    "refuses a PostgreSQL schema with no tables, naming it and how to create them",
    async () => {
      const url = new URL(pgUrl as string);
      // a schema of its own, dropped after: a broken build that created it cannot leave it behind
      const schema = `no_tables_${randomBytes(4).toString("hex")}`;
      cleanups.push(async () => {
        const client = new pg.Client({ connectionString: pgUrl as string });
        await client.connect();
        await client.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
        await client.end();
      });
      const err = await refusal(["rebuild-projections", "--db", pgUrl as string, "--db-schema", schema]);
      expect(err.code).toBe("db_schema_missing");
      expect(err.message).toContain(`no sessionmux tables in schema "${schema}" of postgres`);
      expect(err.message).toContain(url.host);
      expect(err.message).toContain(
        "; check --db-schema (or SESSIONMUX_DB_SCHEMA), or create them with sessionmux migrate",
      );
    },
  );
});

describe("rebuild-projections on an unreachable PostgreSQL", () => {
  it("reports the connection failure, not a missing schema", async () => {
    const err = await run(["rebuild-projections", "--db", "postgres://app@127.0.0.1:1/none"]).then(
      () => new Error("rebuilt"),
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(Error);
    expect((err as StartupError).code).not.toBe("db_schema_missing");
    expect(stdout).toEqual([]);
  });
});

describe("token rotate", () => {
  it("replaces the token kept beside a SQLite file, prints it, and says where it went", async () => {
    const dir = folder();
    const db = dir.file("sessions.db");
    await database(db, 0);
    await run(["token", "rotate", "--db", db]);
    const token = stdout.join("").trimEnd();
    expect(stdout.join("")).toBe(`${token}\n`);
    expect(token.length).toBeGreaterThanOrEqual(20);
    const file = dir.file("sessionmux.token");
    expect(readFileSync(file, "utf8").trim()).toBe(token);
    expect(stderr.join("")).toBe(`token written to ${file}; the old one is refused from now on\n`);
    stdout.length = 0;
    await run(["token", "rotate", "--db", db]);
    expect(stdout.join("").trimEnd()).not.toBe(token);
  });

  it("refuses a SQLite file that does not exist, saying where the token is kept", async () => {
    const dir = folder();
    const db = dir.file("nope.db");
    const err = await refusal(["token", "rotate", "--db", db]);
    expect(err.code).toBe("db_missing");
    expect(err.message).toBe(
      `no database at ${db}; check --db (or SESSIONMUX_DB), or start 'sessionmux serve' once to create a new one (the token is kept in ${dir.path})`,
    );
    expect(existsSync(dir.file("sessionmux.token"))).toBe(false);
  });

  it("on PostgreSQL keeps the token in --data-dir", async () => {
    const dir = folder();
    await run(["token", "rotate", "--db", "postgres://app@db.example/prod", "--data-dir", dir.path]);
    const token = stdout.join("").trimEnd();
    const file = dir.file("sessionmux.token");
    expect(readFileSync(file, "utf8").trim()).toBe(token);
    expect(stderr.join("")).toBe(`token written to ${file}; the old one is refused from now on\n`);
  });

  it("on PostgreSQL refuses a --data-dir that does not exist, and creates none", async () => {
    const dir = folder();
    const missing = dir.file("no-such-folder");
    const err = await refusal([
      "token",
      "rotate",
      "--db",
      "postgres://app@db.example/prod",
      "--data-dir",
      missing,
    ]);
    expect(err.code).toBe("db_folder_missing");
    expect(err.message).toBe(
      `data folder ${missing} does not exist (it keeps the admin token); create it or fix --data-dir`,
    );
    expect(existsSync(missing)).toBe(false);
  });
});
