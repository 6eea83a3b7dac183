import { randomUUID } from "node:crypto";
import { rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SqliteSessionStore } from "../../src/store/sqlite-store.js";
import { delta, turnEnd, turnStart, userMessage } from "../store/open-store.js";
import { ADMIN_TOKEN } from "../support/host.js";
import { hasChromium, openConsole, useBrowser } from "./browser.js";
import { useConsoleHost } from "./console-host.js";
import { readLog } from "./host-log.js";

// made by the first write of the store (and only when the tests run), removed after them
const dir = join(tmpdir(), `sessionmux-older-fork-${randomUUID()}`);
const dbPath = join(dir, "sessions.db");

/**
 * A fork made before forks ended the jobs they copied running: its log ends the turn it cut
 * off and nothing else, so a copied job was left `running` there for good. Written here as such a
 * fork's log was: forked by the store, the job's end it writes now taken out again.
 */
async function writeOlderFork(): Promise<void> {
  const store = SqliteSessionStore.open(dbPath);
  const start = Date.now() - 60_000;
  await store.create({ sessionId: "old-src", owner: "admin", model: "demo", title: "Older", at: start });
  await store.append(
    "old-src",
    [
      turnStart("t1"),
      userMessage("/job 600"),
      delta("t1", "started"),
      { type: "job/started", data: { jobId: "j1", turnId: "t1", label: "demo job (600s)" } },
      turnEnd("t1"),
    ],
    { at: start + 1_000 },
  );
  const forked = await store.fork({
    sourceId: "old-src",
    targetId: "old-fork",
    owner: "admin",
    at: start + 2_000,
  });
  await store.close();
  if (forked.status !== "created") throw new Error(forked.status);
  const db = new Database(dbPath);
  try {
    const last = db
      .prepare("SELECT seq, type FROM events WHERE session_id = ? ORDER BY seq DESC LIMIT 1")
      .get("old-fork") as { seq: number; type: string };
    if (last.type !== "job/ended") throw new Error(`the fork's log ends with ${last.type}`);
    db.prepare("DELETE FROM events WHERE session_id = ? AND seq = ?").run("old-fork", last.seq);
    db.prepare("UPDATE projections SET seq = ? WHERE session_id = ?").run(last.seq - 1, "old-fork");
  } finally {
    db.close();
  }
}

describe.skipIf(!hasChromium)("console fork made before forks ended the jobs they copied", () => {
  beforeAll(writeOlderFork);
  // after hooks run last first: the folder goes once the host has closed its file
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  const browser = useBrowser();
  const consoleHost = useConsoleHost({ dbPath });

  it("shows a job the fork copied running, and its log never ended, as ended by the fork", async () => {
    const { host, client } = consoleHost;
    // the older shape: the job started in the copied part, ended nowhere in the fork's log
    const log = await readLog(client, "old-fork");
    expect(log.flatMap((e) => (e.type.startsWith("job/") ? [e.type] : []))).toEqual(["job/started"]);
    const page = await browser.profile.newPage();
    await openConsole(page, host.url, ADMIN_TOKEN, "old-fork");
    const job = page.locator('[data-testid="transcript"] [data-testid="job"]');
    await expect.poll(() => job.getAttribute("data-state"), { timeout: 10_000 }).toBe("interrupted");
    expect(await job.textContent()).toContain("not carried into this fork");
    expect(await page.locator('[data-testid="jobs"] [data-testid="job"]').count()).toBe(0);
    await page.close();
  });
});
