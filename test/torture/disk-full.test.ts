import { execFileSync } from "node:child_process";
import { mkdirSync, rmSync, statfsSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { SessionmuxError } from "../../protocol/index.js";
import { checkHistory, type HistoryCounts, isClean, sumCounts } from "../support/history-checker.js";
import { ADMIN_TOKEN, startTestHost } from "../support/host.js";
import { MuxPeer } from "../support/mux-peer.js";
import { tempDir } from "../support/temp-dir.js";
import { readWholeLog } from "../support/whole-log.js";
import { reportCounts, scaled } from "./torture-scale.js";

const SESSION = "full";
const TMPFS_BYTES = 8 * 1024 * 1024;
const HEADROOM = 96 * 1024;

/** Mounts a small tmpfs when this process may (root in a container that allows it). */
function tryMount(path: string, options: string): string | undefined {
  try {
    execFileSync("mount", ["-t", "tmpfs", "-o", options, "tmpfs", path], { stdio: "pipe" });
    return undefined;
  } catch (error) {
    return (error as { stderr?: Buffer }).stderr?.toString().trim() || String(error);
  }
}

const dir = tempDir("sessionmux-torture-disk-");
const mountPoint = join(dir.path, "mnt");
let mode: "tmpfs" | "max_page_count" = "max_page_count";

beforeAll(() => {
  mkdirSync(mountPoint);
  const refused = tryMount(mountPoint, `size=${TMPFS_BYTES}`);
  mode = refused === undefined ? "tmpfs" : "max_page_count";
  process.stdout.write(`torture disk-full: mode=${mode}${refused ? ` (mount refused: ${refused})` : ""}\n`);
});
afterAll(() => {
  if (mode === "tmpfs") execFileSync("umount", [mountPoint]);
  dir.remove();
});

/** Renames from several sockets until `failures` consecutive answers are errors, bounded in count. */
async function appendUntilFailing(peers: MuxPeer[], acked: number[], codes: string[]): Promise<void> {
  let consecutive = 0;
  let attempts = 0;
  await Promise.all(
    peers.map(async (peer, w) => {
      while (consecutive < 20 && attempts < 5_000) {
        attempts += 1;
        try {
          const { seq } = await peer.call<{ seq: number }>("session.rename", {
            sessionId: SESSION,
            title: `${w}-${attempts}-${"x".repeat(300)}`,
          });
          acked.push(seq);
          consecutive = 0;
        } catch (error) {
          codes.push((error as SessionmuxError).code);
          consecutive += 1;
        }
      }
    }),
  );
}

describe("torture: disk full during appends", () => {
  it("fails appends with persistence_failure, loses nothing acknowledged, resumes at head+1", async () => {
    const runs = scaled(10);
    const reports: HistoryCounts[] = [];
    const problems: string[] = [];
    for (let run = 0; run < runs; run++) {
      const dbPath = join(mountPoint, `run-${run}.db`);
      const filler = join(mountPoint, "filler");
      const host = await startTestHost({ dbPath });
      const peers: MuxPeer[] = [];
      try {
        for (let i = 0; i < 4; i++) peers.push(await MuxPeer.connect(host.wsUrl, { token: ADMIN_TOKEN }));
        await peers[0]!.call("session.create", { sessionId: SESSION });
        const acked = [1];
        const codes: string[] = [];
        // Leave only a little room, so the log fills it within a few hundred appends.
        if (mode === "tmpfs") {
          const stats = statfsSync(mountPoint);
          writeFileSync(filler, Buffer.alloc(Math.max(0, stats.bavail * stats.bsize - HEADROOM)));
        } else host.store.limitSize(statSync(dbPath).size + HEADROOM);
        await appendUntilFailing(peers, acked, codes);
        if (codes.length === 0) problems.push(`run ${run}: the disk never filled`);
        const wrong = codes.filter((code) => code !== "persistence_failure");
        if (wrong.length > 0)
          problems.push(`run ${run}: ${wrong.length} failures were not persistence_failure (${wrong[0]})`);
        // Space comes back: the very next append lands at head+1.
        if (mode === "tmpfs") rmSync(filler);
        else host.store.limitSize(null);
        const head = Math.max(...acked);
        const { seq } = await peers[0]!.call<{ seq: number }>("session.rename", {
          sessionId: SESSION,
          title: "back",
        });
        acked.push(seq);
        if (seq !== head + 1) problems.push(`run ${run}: resumed at ${seq}, head was ${head}`);
        const read = await readWholeLog(host.store, SESSION);
        const log = read.status === "ok" ? read.events.map((event) => event.seq) : [];
        reports.push(checkHistory({ acknowledged: acked, log }));
        const integrity = host.store.integrityCheck();
        if (integrity !== "ok") problems.push(`run ${run}: integrity ${integrity}`);
      } finally {
        for (const peer of peers) peer.ws.terminate();
        await host.close();
        rmSync(filler, { force: true });
        rmSync(dbPath, { force: true });
        rmSync(`${dbPath}-wal`, { force: true });
        rmSync(`${dbPath}-shm`, { force: true });
      }
    }
    const total = sumCounts(reports);
    reportCounts(`disk-full (${mode})`, runs, total);
    expect(problems).toEqual([]);
    expect(isClean(total)).toBe(true);
  });
});

describe("torture: storage turning read-only during appends", () => {
  // Linux refuses a read-only remount while the database is open for writing, and directory
  // permissions bind neither open descriptors nor root; the store's `refuseWrites` makes SQLite
  // answer SQLITE_READONLY exactly as a read-only medium does.
  it("fails appends with persistence_failure, loses nothing acknowledged, resumes at head+1", async () => {
    const runs = scaled(10);
    const totals: HistoryCounts[] = [];
    for (let run = 0; run < runs; run++) {
      const dbDir = tempDir("sessionmux-torture-ro-");
      const host = await startTestHost({ dbPath: dbDir.file("readonly.db") });
      const peers = await Promise.all(
        [0, 1, 2, 3].map(() => MuxPeer.connect(host.wsUrl, { token: ADMIN_TOKEN })),
      );
      try {
        await peers[0]!.call("session.create", { sessionId: SESSION });
        const acked = [1];
        const codes: string[] = [];
        const rename = async (peer: MuxPeer, title: string) => {
          try {
            acked.push(
              (await peer.call<{ seq: number }>("session.rename", { sessionId: SESSION, title })).seq,
            );
          } catch (error) {
            codes.push((error as SessionmuxError).code);
          }
        };
        // Writers run while the storage turns read-only at a random moment and back.
        const writers = peers.map(async (peer, w) => {
          for (let i = 0; i < 40; i++) await rename(peer, `${w}-${i}`);
        });
        await new Promise((resolve) => setTimeout(resolve, 5 + Math.random() * 40));
        host.store.refuseWrites(true);
        await Promise.all(peers.map((peer, w) => rename(peer, `ro-${w}`)));
        host.store.refuseWrites(false);
        await Promise.all(writers);
        const head = Math.max(...acked);
        const { seq } = await peers[0]!.call<{ seq: number }>("session.rename", {
          sessionId: SESSION,
          title: "back",
        });
        acked.push(seq);
        const read = await readWholeLog(host.store, SESSION);
        const report = checkHistory({
          acknowledged: acked,
          log: read.status === "ok" ? read.events.map((e) => e.seq) : [],
        });
        totals.push(report);
        expect(codes.length).toBeGreaterThan(0);
        expect(new Set(codes)).toEqual(new Set(["persistence_failure"]));
        expect(seq).toBe(head + 1);
        expect(host.store.integrityCheck()).toBe("ok");
      } finally {
        for (const peer of peers) peer.ws.terminate();
        await host.close();
        dbDir.remove();
      }
    }
    const total = sumCounts(totals);
    reportCounts("read-only", runs, total);
    expect(isClean(total)).toBe(true);
  });
});
