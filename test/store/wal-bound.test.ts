import { existsSync, readFileSync, statSync } from "node:fs";
import { afterEach, describe, expect, it } from "vitest";
import { SqliteSessionStore, WAL_CHECKPOINT_PAGES } from "../../src/store/sqlite-store.js";
import { tempDir } from "../support/temp-dir.js";

const PAGE = 4096;
const WAL_HEADER = 32;
const FRAME = 24 + PAGE;
const SESSIONS = 20;
/** Each append's event fills most of a page, so a commit of 20 appends writes 20 frames or more (95 seen). */
const EVENT_TEXT = "x".repeat(3_000);

const walFrames = (path: string) =>
  existsSync(`${path}-wal`) ? Math.max(0, (statSync(`${path}-wal`).size - WAL_HEADER) / FRAME) : 0;

/**
 * Frames the WAL holds now (`mxFrame` of the wal-index header in the -shm file, native byte
 * order): after a checkpoint a commit writes from the start of the file again, inside its old
 * size, so only this tells how many frames one commit wrote.
 */
function framesInUse(path: string): number {
  const shm = readFileSync(`${path}-shm`);
  return shm.readUInt32LE(16);
}

/**
 * The README promises that the WAL stays near WAL_CHECKPOINT_PAGES pages (32 MiB) under sustained
 * writes and that a clean shutdown truncates it: measured on a real file. A store that never
 * checkpoints (an unbounded WAL fills the disk) fails the upper bound; one back at SQLite's default
 * of 1,000 pages (the same hot pages copied back every few commits) fails the lower one.
 */
describe("the WAL's size", () => {
  const dir = tempDir("sessionmux-wal-");
  afterEach(() => dir.remove());

  it("grows past SQLite's default, stays under the checkpoint interval and is truncated on close", async () => {
    const path = dir.file("sessions.db");
    const store = SqliteSessionStore.open(path);
    const ids = Array.from({ length: SESSIONS }, (_, i) => `wal-${i}`);
    for (const sessionId of ids) await store.create({ sessionId, owner: "o", model: "demo" });
    let largest = 0;
    let largestCommit = 0;
    let restarted = false;
    // twice the interval's worth of frames: every append writes at least its own page
    const commits = Math.ceil((2 * WAL_CHECKPOINT_PAGES) / SESSIONS);
    for (let commit = 0; commit < commits; commit++) {
      const before = walFrames(path);
      const inUse = framesInUse(path);
      await Promise.all(
        ids.map((sessionId) =>
          store.append(sessionId, [{ type: "assistant/delta", data: { turnId: "t", text: EVENT_TEXT } }]),
        ),
      );
      const after = walFrames(path);
      // the file grows until a checkpoint lets a later commit start over at its beginning; from
      // then on it keeps its size
      const written = framesInUse(path) - inUse;
      if (written > 0) largestCommit = Math.max(largestCommit, written);
      if (after <= before) restarted = true;
      largest = Math.max(largest, after);
    }
    expect(restarted).toBe(true);
    // a checkpoint starts at the first commit that finds the interval reached
    expect(largest).toBeGreaterThanOrEqual(WAL_CHECKPOINT_PAGES);
    expect(largest).toBeLessThanOrEqual(WAL_CHECKPOINT_PAGES + largestCommit);
    await store.close();
    expect(walFrames(path)).toBe(0);
    // and what was written is all there
    const reopened = SqliteSessionStore.open(path);
    try {
      const header = await reopened.header(ids[0]!);
      expect(header).toMatchObject({ status: "ok", headSeq: commits + 1 });
    } finally {
      await reopened.close();
    }
  }, 120_000);

  it("is checkpointed and truncated on close while a reader still has the file open", async () => {
    // SQLite checkpoints by itself only when the last connection closes; the store must not rely on it
    const path = dir.file("sessions.db");
    const store = SqliteSessionStore.open(path);
    const reader = SqliteSessionStore.open(path, { readOnly: true });
    try {
      await store.create({ sessionId: "a", owner: "o", model: "demo" });
      for (let i = 0; i < 20; i++)
        await store.append("a", [{ type: "assistant/delta", data: { turnId: "t", text: EVENT_TEXT } }]);
      expect(await reader.header("a")).toMatchObject({ status: "ok", headSeq: 21 });
      expect(walFrames(path)).toBeGreaterThan(20);
      await store.close();
      expect(walFrames(path)).toBe(0);
      expect(await reader.header("a")).toMatchObject({ status: "ok", headSeq: 21 });
    } finally {
      await store.close();
      await reader.close();
    }
  });
});
