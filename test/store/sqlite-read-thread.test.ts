import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import Database from "better-sqlite3";
import { describe, expect, it } from "vitest";
import { SqliteReadThread } from "../../src/store/sqlite-read-thread.js";
import { cleanupsAfterEach } from "../support/cleanups.js";
import { tempDir } from "../support/temp-dir.js";

const cleanups = cleanupsAfterEach();
const leaver = fileURLToPath(new URL("./fixtures/search-and-leave.ts", import.meta.url));

/** A WAL database with a table of `rows` numbers, and the writer's connection to prepare on. */
function database(rows = 10) {
  const dir = tempDir("sessionmux-read-thread-");
  const db = new Database(dir.file("t.db"));
  db.pragma("journal_mode = WAL");
  db.exec("CREATE TABLE n (v INTEGER)");
  db.prepare(
    `INSERT INTO n WITH RECURSIVE c(v) AS (SELECT 1 UNION ALL SELECT v + 1 FROM c WHERE v < ?) SELECT v FROM c`,
  ).run(rows);
  cleanups.push(() => {
    db.close();
    dir.remove();
  });
  return { db, path: dir.file("t.db") };
}

function thread(path: string, maxReads?: number): SqliteReadThread {
  const read = new SqliteReadThread(path, maxReads);
  cleanups.push(() => read.close());
  return read;
}

describe("SqliteReadThread", () => {
  it("runs every read on one thread, and sees each commit made before the read was asked", async () => {
    const { db, path } = database(3);
    const read = thread(path);
    const count = db.prepare("SELECT count(*) FROM n").pluck();
    for (let i = 0; i < 10; i++) {
      db.prepare("INSERT INTO n VALUES (?)").run(100 + i);
      expect(await read.run<number>(count, "pluck", [])).toBe(4 + i);
    }
    expect(await read.run(db.prepare("SELECT v FROM n WHERE v > ? ORDER BY v"), "all", [108])).toEqual([
      { v: 109 },
    ]);
    expect(read.started).toBe(1);
  });

  it("answers overloaded past its bound with the bound in data, and fails SQLite's errors with their code", async () => {
    const { db, path } = database();
    const read = thread(path, 2);
    const count = db.prepare("SELECT count(*) FROM n").pluck();
    const outcomes = await Promise.allSettled([0, 1, 2].map(() => read.run(count, "pluck", [])));
    expect(outcomes.map((o) => o.status)).toEqual(["fulfilled", "fulfilled", "rejected"]);
    expect((outcomes[2] as PromiseRejectedResult).reason).toMatchObject({
      code: "overloaded",
      data: { max: 2 },
      message: "this host already runs 2 searches; retry shortly",
    });
    // a table of the writer's connection alone: the thread's connection has none
    db.exec("CREATE TEMP TABLE mine (v INTEGER)");
    await expect(read.run(db.prepare("SELECT v FROM mine"), "all", [])).rejects.toMatchObject({
      code: "SQLITE_ERROR",
      message: "no such table: mine",
    });
  });

  it("fails a read whose parameter cannot be sent to the thread alone, and holds nothing for it", async () => {
    const { db, path } = database();
    const read = thread(path, 1);
    const byValue = db.prepare("SELECT count(*) FROM n WHERE v > ?").pluck();
    await expect(read.run(byValue, "pluck", [() => 1])).rejects.toThrow(/could not be cloned/);
    // the bound of one read is free again: a call left behind would refuse this one overloaded
    expect(await read.run<number>(byValue, "pluck", [5])).toBe(5);
  });

  it("fails the reads of a thread that died (its file could not be opened) and starts another for the next", async () => {
    const { db, path } = database();
    const count = db.prepare("SELECT count(*) FROM n").pluck();
    const missing = `${path}.missing`;
    const read = thread(missing);
    await expect(read.run(count, "pluck", [])).rejects.toMatchObject({ code: "SQLITE_CANTOPEN" });
    expect(read.started).toBe(1);
    db.exec(`VACUUM INTO '${missing}'`);
    expect(await read.run<number>(count, "pluck", [])).toBe(10);
    expect(read.started).toBe(2);
  });

  it("takes reads in turns by asker: one asker's many reads never hold another's one behind them all", async () => {
    const { db, path } = database();
    const read = thread(path);
    // a read that takes a while on the thread, so the others wait for it
    const slow = db
      .prepare(
        "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < ?) SELECT count(*) FROM c",
      )
      .pluck();
    const quick = db.prepare("SELECT count(*) FROM n").pluck();
    const answered: string[] = [];
    const greedy = Array.from({ length: 8 }, (_, i) =>
      read.run(slow, "pluck", [200_000], { name: "alice" }).then(() => answered.push(`alice ${i}`)),
    );
    const other = read.run(quick, "pluck", [], { name: "bob" }).then(() => answered.push("bob"));
    await Promise.all([...greedy, other]);
    // the read running when bob asked, then bob's: in arrival order it came after all eight
    expect(answered.indexOf("bob")).toBe(1);
  });

  it("never sends a read whose asker left while it waited, and fails it aborted", async () => {
    const { db, path } = database();
    const read = thread(path);
    const slow = db
      .prepare(
        "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < ?) SELECT count(*) FROM c",
      )
      .pluck();
    const running = read.run<number>(slow, "pluck", [200_000], { name: "alice" });
    const left = new AbortController();
    const waiting = Array.from({ length: 4 }, () =>
      read.run(slow, "pluck", [200_000], { name: "alice", signal: left.signal }),
    );
    left.abort();
    for (const outcome of await Promise.allSettled(waiting))
      expect(outcome).toMatchObject({ status: "rejected", reason: { code: "aborted" } });
    expect(await running).toBe(200_000);
    // asked after the caller left: refused at once too
    await expect(read.run(slow, "pluck", [1], { name: "alice", signal: left.signal })).rejects.toMatchObject({
      code: "aborted",
    });
    expect(await read.run<number>(db.prepare("SELECT count(*) FROM n").pluck(), "pluck", [])).toBe(10);
    expect(read.ran).toBe(2);
  });

  it("keeps no process alive once idle, and answers before letting it end", () => {
    const dir = tempDir("sessionmux-read-thread-");
    cleanups.push(() => dir.remove());
    const child = spawnSync(process.execPath, ["--import", "tsx", leaver, dir.file("s.db")], {
      encoding: "utf8",
      timeout: 30_000,
    });
    expect(child.signal).toBeNull();
    expect(child.status).toBe(0);
    expect(JSON.parse(child.stdout)).toEqual([{ sessionId: "s", seq: 2, snippet: "a lonely **quokka**" }]);
  }, 60_000);
});
