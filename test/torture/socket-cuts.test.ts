import { afterEach, describe, expect, it } from "vitest";
import { FollowWireCheck } from "../support/follow-wire-check.js";
import { checkHistory, isClean, sumCounts } from "../support/history-checker.js";
import { ADMIN_TOKEN, startTestHost, type TestHost } from "../support/host.js";
import { startTcpProxy, type TcpProxy } from "../support/tcp-proxy.js";
import { until } from "../support/until.js";
import { readWholeLog } from "../support/whole-log.js";
import { SdkFollowers } from "./sdk-followers.js";
import { reportCounts, scaled } from "./torture-scale.js";

const FOLLOWERS = 20;
const SESSION = "cuts";

let host: TestHost | undefined;
let proxy: TcpProxy | undefined;
let followers: SdkFollowers | undefined;

afterEach(async () => {
  await followers?.close();
  followers = undefined;
  await proxy?.stop();
  await host?.dispose();
});

describe("torture: random socket cuts while a session streams", () => {
  it("every follower ends with exactly 1..N through 200 cuts", async () => {
    const cuts = scaled(200);
    host = await startTestHost();
    const wire = new FollowWireCheck();
    proxy = await startTcpProxy(host.port, { tap: () => wire.connection() });
    const created = await host.store.create({ sessionId: SESSION, owner: "admin", model: "demo" });
    expect(created.status).toBe("created");
    const acked = [1];
    const url = `ws://127.0.0.1:${proxy.port}/api/remote.mux`;
    followers = new SdkFollowers(url, ADMIN_TOKEN, SESSION, FOLLOWERS);
    const { observed, failures } = followers;

    // Appends keep flowing for as long as the cuts last (bounded by count and by time).
    let cutting = true;
    const cutsDone = proxy.startRandomCuts({ minMs: 10, maxMs: 80, count: cuts }).finally(() => {
      cutting = false;
    });
    const writer = (async () => {
      const stopAt = Date.now() + 120_000;
      while (cutting && Date.now() < stopAt) {
        const outcome = await host!.store.append(
          SESSION,
          Array.from({ length: 5 }, (_, i) => ({
            type: "assistant/delta" as const,
            data: { turnId: "t", text: `x${i}` },
          })),
        );
        if (outcome.status !== "appended") throw new Error(outcome.status);
        for (const event of outcome.events) acked.push(event.seq);
        await new Promise((resolve) => setTimeout(resolve, 2));
      }
    })();
    await Promise.all([cutsDone, writer]);
    const head = acked.at(-1)!;
    await until(() => observed.every((seqs) => seqs.at(-1) === head), 120_000, "followers catch up");

    const read = await readWholeLog(host.store, SESSION);
    const log = read.status === "ok" ? read.events.map((event) => event.seq) : [];
    const reports = observed.map((seqs) => checkHistory({ acknowledged: acked, log, observed: seqs }));
    const total = sumCounts(reports);
    reportCounts("socket-cuts", cuts, { ...total, acked: acked.length });
    expect(failures).toEqual([]);
    expect(proxy.cuts).toBe(cuts);
    expect(proxy.accepted).toBeGreaterThan(cuts);
    expect(isClean(total)).toBe(true);
    for (const seqs of observed) expect(seqs.length).toBe(head);
    // The host's own promise, on the bytes it sent (the SDK above would hide a re-sent event):
    // every stream continued its afterSeq exactly, and every (re)connection opened one.
    expect(wire.violations).toEqual([]);
    expect(wire.streams).toBeGreaterThan(FOLLOWERS);
    expect(wire.events).toBeGreaterThanOrEqual(FOLLOWERS * head);
  });
});
