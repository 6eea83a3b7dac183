import { describe, expect, inject, it } from "vitest";
import type { SessionEvent, SessionmuxError } from "../../protocol/index.js";
import type { MuxPeer } from "../support/mux-peer.js";
import { CLUSTER_TEST_TIMEOUT_MS, oneTo } from "./cluster.js";
import { clusterFixture } from "./cluster-fixture.js";

const ANSWERERS = 16;
const ROUNDS = 4;
const pgUrl = inject("pgUrl");
const fixture = clusterFixture(pgUrl);

const ofType = (events: SessionEvent[], type: string, from = 0) =>
  events.slice(from).filter((event) => event.type === type);

describe.skipIf(!pgUrl)("answers to one approval, spread over three hosts", () => {
  it(
    "has exactly one winner per round; every other different answer is interaction_already_resolved",
    async () => {
      const cluster = await fixture.start();
      const hosts = cluster.hosts;
      const operator = await fixture.peer(hosts[0]!.wsUrl);
      const answerers: MuxPeer[] = [];
      for (let i = 0; i < ANSWERERS; i++) {
        const answerer = await fixture.peer(hosts[i % hosts.length]!.wsUrl);
        answerers.push(answerer);
      }
      await operator.call("session.create", { sessionId: "race" });
      const stream = operator.follow("race");
      const problems: string[] = [];
      for (let round = 0; round < ROUNDS; round++) {
        const seen = operator.events(stream).length;
        await operator.call("session.prompt", {
          sessionId: "race",
          text: `/approve step-${round}`,
          clientMessageId: `r${round}`,
        });
        await expect
          .poll(() => ofType(operator.events(stream), "interaction/requested", seen).length)
          .toBe(1);
        const requested = ofType(operator.events(stream), "interaction/requested", seen)[0]!;
        const { interactionId } = requested.data as { interactionId: string };
        const outcomes = await Promise.all(
          answerers.map(async (answerer, i) => {
            const response = { outcome: i % 2 === 0 ? "approve" : "deny" };
            try {
              await answerer.call("session.respond", { interactionId, response }, 60_000);
              return { ok: true as const, response };
            } catch (error) {
              return { ok: false as const, response, code: (error as SessionmuxError).code };
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
        await expect
          .poll(() => ofType(operator.events(stream), "turn/end", seen).length, { timeout: 60_000 })
          .toBe(1);
        const resolved = ofType(operator.events(stream), "interaction/resolved", seen);
        if (resolved.length !== 1)
          problems.push(`round ${round}: ${resolved.length} interaction/resolved events`);
        else if ((resolved[0]!.data as { resolution: { outcome?: string } }).resolution.outcome !== winner)
          problems.push(`round ${round}: the log records a different winner`);
      }
      expect(problems).toEqual([]);
      const log = await cluster.logSeqs("race");
      expect(log).toEqual(oneTo(log.length));
      await operator.waitSeq(stream, log.length);
      expect(operator.violations).toEqual([]);
      expect(operator.events(stream).map((event) => event.seq)).toEqual(log);
    },
    CLUSTER_TEST_TIMEOUT_MS,
  );
});
