import { writeFileSync } from "node:fs";
import { afterEach, describe, expect, it } from "vitest";
import { DatabaseInUseError } from "../../src/store/database-lock.js";
import { SqliteSessionStore } from "../../src/store/sqlite-store.js";
import { tempDir } from "../support/temp-dir.js";

/**
 * What `SqliteSessionStore.open` promises beyond the store contract: a read-only instance never
 * writes, in-memory stores take no lock, and a file that cannot be opened leaves no lock behind.
 */
const opened: SqliteSessionStore[] = [];
const dirs: ReturnType<typeof tempDir>[] = [];
afterEach(async () => {
  await Promise.all(opened.splice(0).map((s) => s.close()));
  for (const dir of dirs.splice(0)) dir.remove();
});

function open(path: string, options: { readOnly?: boolean } = {}): SqliteSessionStore {
  const store = SqliteSessionStore.open(path, options);
  opened.push(store);
  return store;
}

function dbPath(): string {
  const dir = tempDir("sessionmux-open-");
  dirs.push(dir);
  return dir.file("sessions.db");
}

function openRefusal(path: string, options: { readOnly?: boolean } = {}): unknown {
  try {
    open(path, options);
  } catch (err) {
    return err;
  }
  throw new Error("the open must throw");
}

const prompt = (itemId: string, text: string) => ({
  sessionId: "s",
  itemId,
  queuedAt: 1,
  input: { text },
});

describe("SqliteSessionStore.open", () => {
  it("a read-only instance refuses writes: the writer's queue and sessions stay as the writer left them", async () => {
    const path = dbPath();
    const writer = open(path);
    await writer.create({ sessionId: "s", owner: "o", model: "m" });
    await writer.enqueuePrompt(prompt("q1", "first"));

    const reader = open(path, { readOnly: true });
    expect((await reader.queue("s")).map((i) => i.itemId)).toEqual(["q1"]);
    // query_only: SQLite refuses the write, and the caller sees the store's typed failure
    const refused = { code: "persistence_failure", data: { sqlite: "SQLITE_READONLY" } };
    await expect(reader.enqueuePrompt(prompt("q2", "from the reader"))).rejects.toMatchObject(refused);
    await expect(reader.create({ sessionId: "r", owner: "o", model: "m" })).rejects.toMatchObject(refused);

    expect((await writer.queue("s")).map((i) => i.itemId)).toEqual(["q1"]);
    expect(await writer.header("r")).toEqual({ status: "not_found" });
    // the writer still holds the file: the reader took no lock, and writes on
    expect(await writer.enqueuePrompt(prompt("q3", "after"))).toMatchObject({ status: "queued" });
    expect((await reader.queue("s")).map((i) => i.itemId)).toEqual(["q1", "q3"]);
  });

  it("in-memory stores take no lock: two are open at once, each its own database", async () => {
    const one = open(":memory:");
    const two = open(":memory:");
    await one.create({ sessionId: "s", owner: "o", model: "m" });
    await one.enqueuePrompt(prompt("q1", "queued in one"));
    expect((await one.queue("s")).map((i) => i.itemId)).toEqual(["q1"]);
    expect(await two.header("s")).toEqual({ status: "not_found" });
    expect(await two.queue("s")).toEqual([]);
  });

  it("a file that is no database is refused as what it is, and leaves the lock free for the next open", async () => {
    const path = dbPath();
    writeFileSync(path, Buffer.alloc(4096, 0x5a));
    const refusal = openRefusal(path);
    expect(refusal).not.toBeInstanceOf(DatabaseInUseError);
    expect((refusal as { code?: string }).code).toBe("SQLITE_NOTADB");

    // the file replaced by a sound one, the same process opens it: the failed open held no lock
    writeFileSync(path, "");
    const store = open(path);
    await store.create({ sessionId: "s", owner: "o", model: "m" });
    expect(await store.enqueuePrompt(prompt("q1", "kept"))).toMatchObject({ status: "queued" });
  });

  it("a read-only open of a file that is no database is refused with SQLite's own error", () => {
    const path = dbPath();
    writeFileSync(path, Buffer.alloc(4096, 0x5a));
    const refusal = openRefusal(path, { readOnly: true });
    expect((refusal as { code?: string }).code).toBe("SQLITE_NOTADB");
  });
});
