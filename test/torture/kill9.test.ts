import { describe, expect, it } from "vitest";
import { SqliteSessionStore } from "../../src/store/sqlite-store.js";
import { checkHistory, type HistoryCounts, isClean, sumCounts } from "../support/history-checker.js";
import { MuxPeer } from "../support/mux-peer.js";
import { tempDir } from "../support/temp-dir.js";
import { readWholeLog } from "../support/whole-log.js";
import { type CliHost, spawnCliHost } from "./cli-host.js";
import { reportCounts, scaled } from "./torture-scale.js";

const TOKEN = "torture-kill9-token";
const SESSIONS = 5;
const WRITERS_PER_SESSION = 4;

/**
 * One run: a real `sessionmux serve` process, concurrent writers appending over the wire
 * (`session.rename` answers with the committed seq), SIGKILL at a random moment. Returns the seqs
 * each session acknowledged before the kill.
 */
async function appendAndKill(
  host: CliHost,
  killAfterMs: number,
  maxAppends: number,
): Promise<Map<string, number[]>> {
  const acked = new Map<string, number[]>();
  const peers: MuxPeer[] = [];
  try {
    const setup = await MuxPeer.connect(host.wsUrl, { token: TOKEN });
    peers.push(setup);
    const ids = Array.from({ length: SESSIONS }, (_, i) => `kill-${i}`);
    for (const sessionId of ids) {
      await setup.call("session.create", { sessionId });
      acked.set(sessionId, [1]);
    }
    for (let i = 0; i < SESSIONS * WRITERS_PER_SESSION; i++)
      peers.push(await MuxPeer.connect(host.wsUrl, { token: TOKEN }));
    let budget = maxAppends;
    let markKilled: () => void = () => {};
    const killed = new Promise<never>((_, reject) => {
      markKilled = () => reject(new Error("killed"));
    });
    killed.catch(() => {});
    const writers = peers.slice(1).map(async (peer, i) => {
      const sessionId = ids[i % SESSIONS]!;
      while (budget > 0) {
        budget -= 1;
        try {
          const call = peer.call<{ seq: number }>(
            "session.rename",
            { sessionId, title: `t${budget}` },
            10_000,
          );
          call.catch(() => {});
          // An answer that had not arrived when the host died was never acknowledged.
          const { seq } = await Promise.race([call, killed]);
          acked.get(sessionId)!.push(seq);
        } catch {
          return; // the host is gone: whatever was not answered was never acknowledged
        }
      }
    });
    const kill = new Promise<void>((resolve) => setTimeout(resolve, killAfterMs))
      .then(() => host.kill9())
      .then(() => markKilled());
    await Promise.all([kill, ...writers]);
  } finally {
    for (const peer of peers) peer.ws.terminate();
    await host.kill9();
  }
  return acked;
}

describe("torture: kill -9 during concurrent appends", () => {
  it("loses no acknowledged event, leaves no gap and passes integrity_check after every kill", async () => {
    const runs = scaled(20);
    const dir = tempDir("sessionmux-torture-kill9-");
    const reports: HistoryCounts[] = [];
    const integrity: string[] = [];
    // The next run's host starts while this one runs: process start-up dominates a run otherwise.
    const spawn = (run: number) => spawnCliHost({ dbPath: dir.file(`run-${run}.db`), token: TOKEN });
    let next: Promise<CliHost> | undefined = spawn(0);
    try {
      for (let run = 0; run < runs; run++) {
        const dbPath = dir.file(`run-${run}.db`);
        const runStarted = Date.now();
        const host: CliHost = await next!;
        const spawnedMs = Date.now() - runStarted;
        next = run + 1 < runs ? spawn(run + 1) : undefined;
        const acked = await appendAndKill(host, 200 + Math.floor(Math.random() * 1_200), 5_000);
        const store = SqliteSessionStore.open(dbPath);
        try {
          integrity.push(store.integrityCheck());
          for (const [sessionId, seqs] of acked) {
            const read = await readWholeLog(store, sessionId);
            const log = read.status === "ok" ? read.events.map((event) => event.seq) : [];
            reports.push(checkHistory({ acknowledged: seqs, log }));
          }
        } finally {
          await store.close();
        }
        process.stdout.write(
          `kill9 run ${run}: waited ${spawnedMs} ms for the host, ${Date.now() - runStarted} ms in all\n`,
        );
      }
    } finally {
      await next?.then((host) => host.kill9()).catch(() => {});
      dir.remove();
    }
    const total = sumCounts(reports);
    reportCounts("kill9", runs, total);
    expect(integrity).toEqual(integrity.map(() => "ok"));
    // The kills landed while appends were being acknowledged, not before the first one.
    expect(total.acked).toBeGreaterThan(runs * SESSIONS * 2);
    expect(isClean(total)).toBe(true);
  });
});
