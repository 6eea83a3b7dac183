import { once } from "node:events";
import { readFileSync } from "node:fs";
import WebSocket from "ws";
import { afterEach, describe, expect, it } from "vitest";
import { decodeFrame, encodeFrame } from "../../protocol/codec.js";
import { SqliteSessionStore } from "../../src/store/sqlite-store.js";
import { checkHistory, isClean, sumCounts } from "../support/history-checker.js";
import { MuxPeer } from "../support/mux-peer.js";
import { tempDir } from "../support/temp-dir.js";
import { type CliHost, spawnCliHost } from "./cli-host.js";
import { reportCounts, scaled } from "./torture-scale.js";

const TOKEN = "torture-stall-token";
const SESSION = "stall";
const HEALTHY = 10;
const MIB = 1024 * 1024;

/** A follower that keeps only the seqs it saw, so 100k events cost the test little memory. */
class SeqFollower {
  readonly seqs: number[] = [];
  private constructor(readonly ws: WebSocket) {
    ws.on("message", (data: Buffer) => {
      const frame = decodeFrame(data, { maxArrayLength: 1 << 20, maxStrBytes: 1 << 24 }) as {
        type: string;
        value?: { kind: string; events?: { seq: number }[] };
      };
      if (frame.type === "item" && frame.value?.kind === "events")
        for (const event of frame.value.events ?? []) this.seqs.push(event.seq);
    });
    ws.on("error", () => {});
  }

  static async follow(url: string): Promise<SeqFollower> {
    const ws = new WebSocket(url, ["sessionmux.v1"], { headers: { authorization: `Bearer ${TOKEN}` } });
    const follower = new SeqFollower(ws);
    await once(ws, "open");
    ws.send(encodeFrame({ type: "open", id: 1, method: "session.follow", params: { sessionId: SESSION } }));
    return follower;
  }

  get last(): number {
    return this.seqs.at(-1) ?? 0;
  }
}

function rssOf(pid: number): number {
  const match = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
  return Number(match?.[1] ?? 0) * 1024;
}

async function until(check: () => boolean, ms: number, what: string): Promise<void> {
  const end = Date.now() + ms;
  while (!check()) {
    if (Date.now() > end) throw new Error(`timed out: ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

let host: CliHost | undefined;
const dir = tempDir("sessionmux-torture-stall-");
const followers: SeqFollower[] = [];
afterEach(async () => {
  for (const follower of followers.splice(0)) follower.ws.terminate();
  await host?.kill9();
  dir.remove();
});

describe("torture: a follower that stops reading while 100k events flow", () => {
  it("keeps host memory growth under 32 MiB and the stalled follower catches up exactly", async () => {
    const events = scaled(100_000);
    const dbPath = dir.file("sessions.db");
    host = await spawnCliHost({ dbPath, token: TOKEN });
    const operator = await MuxPeer.connect(host.wsUrl, { token: TOKEN });
    await operator.call("session.create", { sessionId: SESSION });
    for (let i = 0; i < HEALTHY; i++) followers.push(await SeqFollower.follow(host.wsUrl));
    const stalled = await SeqFollower.follow(host.wsUrl);
    followers.push(stalled);
    // Warm the host (code paths, caches) before the baseline.
    await operator.call("session.prompt", { sessionId: SESSION, text: "/stream 2000 0", clientMessageId: "warm" });
    await until(() => followers.every((f) => f.last > 2000), 60_000, "warm-up delivered");
    const warmHead = stalled.last;
    await new Promise((resolve) => setTimeout(resolve, 500));
    stalled.ws.pause();
    const baseline = rssOf(host.child.pid!);
    let peak = baseline;
    const sampler = setInterval(() => {
      peak = Math.max(peak, rssOf(host!.child.pid!));
    }, 50);
    try {
      await operator.call("session.prompt", { sessionId: SESSION, text: `/stream ${events} 0`, clientMessageId: "flow" });
      const expectedHead = warmHead + events + 3;
      const healthy = followers.slice(0, HEALTHY);
      await until(() => healthy.every((f) => f.last >= expectedHead - 1), 400_000, "healthy followers reach the head");
    } finally {
      clearInterval(sampler);
    }
    const growth = peak - baseline;
    stalled.ws.resume();
    const head = followers[0]!.last;
    await until(() => stalled.last >= head, 120_000, "stalled follower catches up");
    operator.ws.terminate();
    await host.kill9();
    host = undefined;

    const store = SqliteSessionStore.open(dbPath);
    const read = await store.readAfter(SESSION, 0, 10_000_000);
    await store.close();
    const log = read.status === "ok" ? read.events.map((event) => event.seq) : [];
    const reports = followers.map((f) => checkHistory({ acknowledged: log, log, observed: f.seqs }));
    reportCounts("stalled-follower", 1, { ...sumCounts(reports), acked: log.length });
    process.stdout.write(
      `torture stalled-follower: events=${events} host RSS growth=${(growth / MIB).toFixed(1)} MiB (bound 32 MiB)\n`,
    );
    expect(isClean(sumCounts(reports))).toBe(true);
    expect(growth).toBeLessThan(32 * MIB);
  });
});
