import { afterEach, describe, expect, it } from "vitest";
import type { SessionmuxError } from "../../protocol/index.js";
import { checkHistory, type HistoryCounts, isClean, sumCounts } from "../support/history-checker.js";
import { ADMIN_TOKEN, startTestHost, type TestHost } from "../support/host.js";
import { MuxPeer } from "../support/mux-peer.js";
import { readWholeLog } from "../support/whole-log.js";
import { reportCounts, scaled } from "./torture-scale.js";

let host: TestHost | undefined;
const peers: MuxPeer[] = [];
afterEach(async () => {
  for (const peer of peers.splice(0)) peer.ws.terminate();
  await host?.dispose();
});

const LATE_WRITERS = 4;

describe("torture: delete racing late appends", () => {
  it("never lets an event exist, be acknowledged or be delivered after the tombstone", async () => {
    const races = scaled(200);
    host = await startTestHost();
    const deleter = await MuxPeer.connect(host.wsUrl, { token: ADMIN_TOKEN });
    const follower = await MuxPeer.connect(host.wsUrl, { token: ADMIN_TOKEN });
    peers.push(deleter, follower);
    for (let i = 0; i < LATE_WRITERS; i++)
      peers.push(await MuxPeer.connect(host.wsUrl, { token: ADMIN_TOKEN }));
    const writers = peers.slice(2);
    const reports: HistoryCounts[] = [];
    const badCodes: string[] = [];

    for (let race = 0; race < races; race++) {
      const sessionId = `race-${race}`;
      await deleter.call("session.create", { sessionId });
      const stream = follower.follow(sessionId);
      let deletedAt: number | undefined;
      const acked: number[] = [1];
      const afterTombstone: number[] = [];
      // Late writers fire renames around the delete, each at a random small delay.
      const late = writers.flatMap((peer) =>
        Array.from({ length: 3 }, async () => {
          await new Promise((resolve) => setTimeout(resolve, Math.random() * 6));
          const sentAt = performance.now();
          try {
            const { seq } = await peer.call<{ seq: number }>("session.rename", { sessionId, title: "late" });
            acked.push(seq);
            // Sent after the delete was acknowledged, yet accepted: that is a resurrection.
            if (deletedAt !== undefined && sentAt > deletedAt) afterTombstone.push(seq);
          } catch (error) {
            const code = (error as SessionmuxError).code;
            if (code !== "session_retired") badCodes.push(code);
          }
        }),
      );
      const deletion = (async () => {
        await new Promise((resolve) => setTimeout(resolve, Math.random() * 4));
        await deleter.call("session.delete", { sessionId });
        deletedAt = performance.now();
      })();
      await Promise.all([deletion, ...late]);

      // After the tombstone: nothing readable, no re-create, the follower ended `session_retired`.
      const page = await deleter.callError("session.page", { sessionId });
      if (page.code !== "session_retired") afterTombstone.push(-1);
      const recreate = await deleter.callError("session.create", { sessionId });
      if (recreate.code !== "session_retired") afterTombstone.push(-2);
      const terminal = await follower.waitTerminal(stream, 10_000);
      const code = (terminal.error as { code?: string } | undefined)?.code;
      if (code !== "session_retired") badCodes.push(`follow ended ${terminal.type} ${code}`);
      const read = await readWholeLog(host.store, sessionId);
      if (read.status !== "retired") afterTombstone.push(-3);
      // What the follower saw before the end must be exactly what was committed before the delete.
      const observed = follower.events(stream).map((event) => event.seq);
      reports.push(checkHistory({ acknowledged: acked, observed, complete: false, afterTombstone }));
    }

    const total = sumCounts(reports);
    reportCounts("delete-race", races, total);
    expect(badCodes).toEqual([]);
    // Some late writes won the race and were acknowledged before the tombstone: the race was real.
    expect(total.acked).toBeGreaterThan(races);
    expect(isClean(total)).toBe(true);
  });
});
