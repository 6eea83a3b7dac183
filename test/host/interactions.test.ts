import { afterEach, describe, expect, test, vi } from "vitest";
import type { Interaction, Resolution } from "../../protocol/index.js";
import { ADMIN } from "../../src/host/principal.js";
import { errorCode, type HostFixture, openHost, readLog, turnEvents } from "./host-fixture.js";

let fx: HostFixture;
afterEach(async () => fx?.dispose());

const S = "asks";

async function pendingInteraction(
  text: string,
  clientMessageId: string,
): Promise<{ turnId: string; interaction: Interaction }> {
  const r = await fx.host.call(ADMIN, "session.prompt", { sessionId: S, text, clientMessageId });
  const interaction = await vi.waitFor(async () => {
    const found = fx.host.live.interactions().find((i) => i.turnId === r.turnId);
    expect(found).toBeDefined();
    // registered before its commit: wait until the log shows it too
    expect((await fx.store.projection(S))?.lastState).toBe("input-required");
    return found!;
  });
  return { turnId: r.turnId!, interaction };
}

/** What answering `interactionId` with `response` comes to: `succeeded`, or the code it is refused with. */
const respond = (interactionId: string, response: Resolution) =>
  errorCode(() => fx.host.call(ADMIN, "session.respond", { interactionId, response }));

describe("session.respond", () => {
  test("16 concurrent, all different answers to one question: exactly one winner; 10 rounds", async () => {
    fx = await openHost();
    await fx.host.call(ADMIN, "session.create", { sessionId: S });
    for (let round = 0; round < 10; round++) {
      const { turnId, interaction } = await pendingInteraction(`/ask pick ${round}`, `pick-${round}`);
      const outcomes = await Promise.all(
        Array.from({ length: 16 }, (_, i) => respond(interaction.interactionId, { answer: `answer ${i}` })),
      );
      const winners = outcomes.flatMap((o, i) => (o.code === "succeeded" ? [i] : []));
      expect(winners).toHaveLength(1);
      const winning = { answer: `answer ${winners[0]}` };
      for (const loser of outcomes.filter((o) => o.code !== "succeeded")) {
        expect(loser).toEqual({
          code: "interaction_already_resolved",
          data: { interactionId: interaction.interactionId, resolution: winning },
        });
      }
      const again = await respond(interaction.interactionId, winning);
      expect(again.code).toBe("succeeded");
      const events = await turnEvents(fx.store, S, turnId);
      expect(events.filter((e) => e.type === "interaction/resolved")).toHaveLength(1);
      expect(events.find((e) => e.type === "assistant/delta")).toMatchObject({
        data: { text: `You answered: answer ${winners[0]}` },
      });
    }
  });

  test("16 concurrent approve/deny answers to one approval: one decision, losers see it; 10 rounds", async () => {
    fx = await openHost();
    await fx.host.call(ADMIN, "session.create", { sessionId: S });
    for (let round = 0; round < 10; round++) {
      const { turnId, interaction } = await pendingInteraction(`/approve deploy ${round}`, `round-${round}`);
      expect(interaction).toMatchObject({ kind: "approval", action: `deploy ${round}`, sessionId: S });
      expect((await fx.store.projection(S))?.lastState).toBe("input-required");
      const answers: Resolution[] = Array.from({ length: 16 }, (_, i) => ({
        outcome: i % 2 === 0 ? "approve" : "deny",
      }));
      const outcomes = await Promise.all(
        answers.map((response) => respond(interaction.interactionId, response)),
      );
      const winners = outcomes.filter((o) => o.code === "succeeded");
      const losers = outcomes.filter((o) => o.code !== "succeeded");
      const winning = (await fx.store.interaction(interaction.interactionId))!.resolution!;
      // the same answer as the winner's is an idempotent success, a different one is refused with the winner
      expect(winners.length).toBe(
        answers.filter((a) => JSON.stringify(a) === JSON.stringify(winning)).length,
      );
      for (const loser of losers) {
        expect(loser.code).toBe("interaction_already_resolved");
        expect(loser.data).toMatchObject({ interactionId: interaction.interactionId, resolution: winning });
      }
      const again = await respond(interaction.interactionId, winning);
      expect(again.code).toBe("succeeded");
      const events = await turnEvents(fx.store, S, turnId);
      const resolved = events.filter((e) => e.type === "interaction/resolved");
      expect(resolved).toHaveLength(1);
      expect(resolved[0]!.data).toEqual({ interactionId: interaction.interactionId, resolution: winning });
      const approved = "outcome" in winning && winning.outcome === "approve";
      expect(events.find((e) => e.type === "tool/result")).toMatchObject({ data: { ok: approved } });
      expect(events.at(-1)).toMatchObject({ type: "turn/end", data: { state: "completed" } });
    }
  });

  test("an unknown interaction is interaction_not_found", async () => {
    fx = await openHost();
    await fx.host.call(ADMIN, "session.create", { sessionId: S });
    const outcome = await respond("nope", { answer: "x" });
    expect(outcome).toEqual({ code: "interaction_not_found", data: { interactionId: "nope" } });
  });

  test("a cancelled turn withdraws its interaction: a later answer is interaction_not_found", async () => {
    fx = await openHost();
    await fx.host.call(ADMIN, "session.create", { sessionId: S });
    const withdrawn: string[] = [];
    fx.host.live.subscribe((d) => {
      if (d.kind === "interaction.withdrawn") withdrawn.push(d.interactionId);
    });
    const { turnId, interaction } = await pendingInteraction("/ask anyone?", "c");
    expect(await fx.host.call(ADMIN, "session.cancel", { sessionId: S })).toEqual({ cancelled: true });
    const events = await turnEvents(fx.store, S, turnId);
    expect(events.at(-1)).toMatchObject({ type: "turn/end", data: { state: "cancelled" } });
    expect(withdrawn).toEqual([interaction.interactionId]);
    expect(fx.host.live.interactions()).toEqual([]);
    const late = await respond(interaction.interactionId, { answer: "me" });
    expect(late.code).toBe("interaction_not_found");
  });

  test("a detached session's pending interactions are withdrawn", async () => {
    fx = await openHost();
    await fx.host.call(ADMIN, "session.create", { sessionId: S });
    const { interaction } = await pendingInteraction("/approve wipe", "d");
    await fx.host.call(ADMIN, "session.delete", { sessionId: S });
    expect(fx.host.live.interactions()).toEqual([]);
    const late = await respond(interaction.interactionId, { outcome: "approve" });
    expect(late.code).toBe("interaction_not_found");
  });

  test("a question's answer is echoed by the agent", async () => {
    fx = await openHost();
    await fx.host.call(ADMIN, "session.create", { sessionId: S });
    const { turnId, interaction } = await pendingInteraction("/ask favourite colour?", "q");
    expect(interaction).toMatchObject({ kind: "question", question: "favourite colour?" });
    const answered = await fx.host.call(ADMIN, "session.respond", {
      interactionId: interaction.interactionId,
      response: { answer: "teal" },
    });
    expect(answered).toEqual({ resolved: true });
    const events = await turnEvents(fx.store, S, turnId);
    expect(events.map((e) => e.type)).toEqual([
      "turn/start",
      "user/message",
      "interaction/requested",
      "interaction/resolved",
      "assistant/delta",
      "turn/end",
    ]);
    expect(events[4]).toMatchObject({ data: { text: "You answered: teal" } });
    expect((await readLog(fx.store, S)).at(-1)).toMatchObject({ data: { state: "completed" } });
  });
});
