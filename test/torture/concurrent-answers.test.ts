import { afterEach, describe, expect, it } from "vitest";
import type { SessionmuxError } from "../../protocol/index.js";
import { checkHistory, isClean } from "../support/history-checker.js";
import { ADMIN_TOKEN, startTestHost, type TestHost } from "../support/host.js";
import { MuxPeer } from "../support/mux-peer.js";
import { readWholeLog } from "../support/whole-log.js";
import { reportCounts, scaled } from "./torture-scale.js";

const ANSWERERS = 16;
const SESSION = "approvals";

let host: TestHost | undefined;
const peers: MuxPeer[] = [];
afterEach(async () => {
  for (const peer of peers.splice(0)) peer.ws.terminate();
  await host?.dispose();
});

describe("torture: concurrent answers to one approval", () => {
  it("has exactly one winner per round; every other answer is the same one or interaction_already_resolved", async () => {
    const rounds = scaled(100);
    host = await startTestHost();
    const operator = await MuxPeer.connect(host.wsUrl, { token: ADMIN_TOKEN });
    peers.push(operator);
    for (let i = 0; i < ANSWERERS; i++) peers.push(await MuxPeer.connect(host.wsUrl, { token: ADMIN_TOKEN }));
    const answerers = peers.slice(1);
    await operator.call("session.create", { sessionId: SESSION });
    const stream = operator.follow(SESSION);
    const problems: string[] = [];
    let resolvedEvents = 0;
    /** session/created, then the seq each prompt's answer acknowledged. */
    const acked = [1];

    for (let round = 0; round < rounds; round++) {
      const seen = operator.events(stream).length;
      const { seq } = await operator.call<{ seq?: number }>("session.prompt", {
        sessionId: SESSION,
        text: `/approve step-${round}`,
        clientMessageId: `r${round}`,
      });
      if (seq === undefined) problems.push(`round ${round}: the prompt was queued, not committed`);
      else acked.push(seq);
      const requested = await waitEvent(operator, stream, seen, "interaction/requested");
      const interactionId = (requested.data as { interactionId: string }).interactionId;
      const outcomes = await Promise.all(
        answerers.map(async (peer, i) => {
          const response = { outcome: i % 2 === 0 ? "approve" : "deny" };
          try {
            await peer.call("session.respond", { interactionId, response });
            return { ok: true as const, response };
          } catch (error) {
            const e = error as SessionmuxError;
            return { ok: false as const, response, code: e.code, data: e.data };
          }
        }),
      );
      const winners = new Set(outcomes.filter((o) => o.ok).map((o) => o.response.outcome));
      if (winners.size !== 1) problems.push(`round ${round}: ${winners.size} distinct accepted answers`);
      const winner = [...winners][0];
      for (const o of outcomes) {
        if (o.ok) continue;
        if (o.code !== "interaction_already_resolved") problems.push(`round ${round}: ${o.code}`);
        else if (o.response.outcome === winner)
          problems.push(`round ${round}: the winning answer was refused`);
      }
      await waitEvent(operator, stream, seen, "turn/end");
      const resolved = operator
        .events(stream)
        .slice(seen)
        .filter((event) => event.type === "interaction/resolved");
      resolvedEvents += resolved.length;
      if (resolved.length !== 1)
        problems.push(`round ${round}: ${resolved.length} interaction/resolved events`);
      else if ((resolved[0]!.data as { resolution: { outcome?: string } }).resolution.outcome !== winner)
        problems.push(`round ${round}: the log records a different winner`);
    }

    const read = await readWholeLog(host.store, SESSION);
    const log = read.status === "ok" ? read.events.map((event) => event.seq) : [];
    // The operator's follower saw every round through its turn/end: it must hold every ack.
    const report = checkHistory({
      acknowledged: acked,
      log,
      observed: operator.events(stream).map((event) => event.seq),
    });
    reportCounts("concurrent-answers", rounds, report);
    process.stdout.write(
      `torture concurrent-answers: rounds=${rounds} winners=${resolvedEvents} problems=${problems.length}\n`,
    );
    expect(problems).toEqual([]);
    expect(resolvedEvents).toBe(rounds);
    expect(isClean(report)).toBe(true);
  });
});

async function waitEvent(peer: MuxPeer, stream: number, from: number, type: string) {
  const deadline = Date.now() + 20_000;
  for (;;) {
    const found = peer
      .events(stream)
      .slice(from)
      .find((event) => event.type === type);
    if (found) return found;
    if (Date.now() > deadline) throw new Error(`no ${type} within 20 s`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}
