import { execFile } from "node:child_process";
import { promisify } from "node:util";
import Database from "better-sqlite3";
import { afterEach, describe, expect, it } from "vitest";
import { SqliteSessionStore } from "../../src/store/sqlite-store.js";
import { tempDir } from "../support/temp-dir.js";

const run = promisify(execFile);
const dirs: { remove(): void }[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) dir.remove();
});

describe("sessionmux rebuild-projections", () => {
  it("restores a damaged list cache from the event log", async () => {
    const dir = tempDir();
    dirs.push(dir);
    const dbPath = dir.file("sessions.db");
    const store = SqliteSessionStore.open(dbPath);
    await store.create({ sessionId: "s1", owner: "admin", model: "demo-fast", title: "Kept title" });
    await store.append("s1", [
      { type: "turn/start", data: { turnId: "t1", trigger: "prompt" } },
      {
        type: "user/message",
        data: { messageId: "m1", source: "user", text: "hello", attachments: [], meta: {} },
      },
      { type: "assistant/delta", data: { turnId: "t1", text: "hi" } },
      { type: "turn/end", data: { turnId: "t1", state: "completed" } },
    ]);
    const expected = await store.projection("s1");
    await store.close();

    // Damage the cache behind the store's back, as a bug or a hand edit could.
    const raw = new Database(dbPath);
    raw.prepare("UPDATE projections SET title = 'wrong', turn_count = 42, last_state = 'failed'").run();
    raw.close();

    const { stdout } = await run(process.execPath, [
      "--import",
      "tsx",
      "src/cli/main.ts",
      "rebuild-projections",
      "--db",
      dbPath,
    ]);
    expect(stdout).toContain("projections rebuilt");

    const reopened = SqliteSessionStore.open(dbPath);
    try {
      expect(await reopened.projection("s1")).toEqual(expected);
      expect(expected).toMatchObject({ title: "Kept title", turnCount: 1, lastState: "completed" });
    } finally {
      await reopened.close();
    }
  });
});
