import { afterEach, describe, expect, test, vi } from "vitest";
import { ADMIN } from "../../src/host/principal.js";
import { capturedLogger } from "../support/log-capture.js";
import {
  assistantText,
  demoAgentWith,
  type HostFixture,
  openHost,
  readLog,
  turnEvents,
} from "./host-fixture.js";

/** Turns parked on interactions by a previous process, and how their answers finish them. */

let fx: HostFixture;
afterEach(async () => fx?.dispose());

const S = "parked";

/** What a host that stopped mid-turn leaves: an open turn waiting on `interactions`. */
async function parkedTurn(
  f: HostFixture,
  turnId: string,
  interactions: {
    interactionId: string;
    kind: "approval" | "question";
    action?: string;
    question?: string;
  }[],
) {
  await f.store.create({ sessionId: S, owner: "admin", model: "demo-fast" });
  await f.store.append(S, [
    { type: "turn/start", data: { turnId, trigger: "prompt" } },
    {
      type: "user/message",
      data: { messageId: "m1", source: "user", text: "two things", attachments: [], meta: {} },
    },
    ...interactions.map((i) => ({ type: "interaction/requested" as const, data: { turnId, ...i } })),
  ]);
}

describe("parked turns after a restart", () => {
  test("the turn continues only once every interaction of it is answered, with all the answers", async () => {
    fx = await openHost();
    await parkedTurn(fx, "t", [
      { interactionId: "i-a", kind: "approval", action: "deploy" },
      { interactionId: "i-q", kind: "question", question: "which region?" },
    ]);
    await fx.restart();
    await fx.host.call(ADMIN, "session.respond", { interactionId: "i-a", response: { outcome: "deny" } });
    // one still pending: the turn stays open and parked
    expect((await fx.store.projection(S))?.openTurnId).toBe("t");
    expect(fx.host.live.interactions().map((i) => i.interactionId)).toEqual(["i-q"]);
    await fx.host.call(ADMIN, "session.respond", { interactionId: "i-q", response: { answer: "eu" } });
    const events = await turnEvents(fx.store, S, "t");
    expect(assistantText(events)).toBe("Denied: deployYou answered: eu");
    expect(events.at(-1)).toMatchObject({ type: "turn/end", data: { state: "completed" } });
  });

  test("a turn whose answers cannot be read is closed as interrupted, told in the log; the queued prompt then runs", async () => {
    const log = capturedLogger();
    fx = await openHost({ logger: log.logger });
    await parkedTurn(fx, "t", [{ interactionId: "i", kind: "question", question: "which?" }]);
    await fx.restart();
    const queued = await fx.host.call(ADMIN, "session.prompt", {
      sessionId: S,
      text: "next",
      clientMessageId: "n",
    });
    expect(queued.queued).toBe(true);
    vi.spyOn(fx.store, "turnInteractions").mockRejectedValueOnce(new Error("read failed"));
    await fx.host.call(ADMIN, "session.respond", { interactionId: "i", response: { answer: "eu" } });
    const events = await turnEvents(fx.store, S, "t");
    expect(events.at(-1)).toMatchObject({ type: "turn/end", data: { turnId: "t", state: "interrupted" } });
    expect(log.lines.filter((l) => l.msg === "a parked turn could not continue")).toHaveLength(1);
    await vi.waitFor(async () => {
      const ends = (await readLog(fx.store, S)).flatMap((e) => (e.type === "turn/end" ? [e.data.state] : []));
      expect(ends).toEqual(["interrupted", "completed"]);
    });
  });

  test("a driver without continueTurn has the answered turn closed as interrupted", async () => {
    const plain = demoAgentWith("plain", (turn, demo) => demo.runTurn(turn));
    fx = await openHost({ agent: plain });
    await parkedTurn(fx, "t", [{ interactionId: "i", kind: "approval", action: "x" }]);
    await fx.restart();
    expect((await fx.store.projection(S))?.lastState).toBe("input-required");
    await fx.host.call(ADMIN, "session.respond", { interactionId: "i", response: { outcome: "approve" } });
    const events = await turnEvents(fx.store, S, "t");
    expect(events.at(-1)).toMatchObject({ type: "turn/end", data: { turnId: "t", state: "interrupted" } });
    // the answer itself is recorded
    expect((await readLog(fx.store, S)).filter((e) => e.type === "interaction/resolved")).toHaveLength(1);
  });
});
