import { afterEach, describe, expect, test } from "vitest";
import type { SessionEvent } from "../../protocol/index.js";
import { chatHistory } from "../../src/agents/chat-history.js";
import { OpenAIAgent } from "../../src/agents/openai-agent.js";
import { ADMIN } from "../../src/host/principal.js";
import { type HostFixture, openHost, turnEvents } from "../host/host-fixture.js";
import { FakeChatCompletions, textReply } from "./fake-chat-completions.js";

let seq = 0;
const event = (type: string, data: Record<string, unknown>): SessionEvent =>
  ({ seq: ++seq, at: seq, type, data }) as SessionEvent;

/** A turn as the log holds it: its start, the operator's text, the answer in two deltas, its end. */
const turn = (turnId: string, prompt: string, answer: string): SessionEvent[] => [
  event("turn/start", { turnId }),
  event("user/message", { turnId, text: prompt }),
  event("assistant/delta", { turnId, text: answer.slice(0, 3) }),
  event("assistant/delta", { turnId, text: answer.slice(3) }),
  event("turn/end", { turnId, state: "completed" }),
];

describe("chatHistory", () => {
  const log = [
    ...turn("t1", "p1", "a".repeat(100)),
    ...turn("t2", "p2", "b".repeat(100)),
    ...turn("t3", "p3", "c".repeat(100)),
    event("turn/start", { turnId: "t4" }),
    event("user/message", { turnId: "t4", text: "p4" }),
  ];

  test("without a budget: every earlier turn, the current one left out", () => {
    expect(chatHistory(log, "t4").map((m) => m.content)).toEqual([
      "p1",
      "a".repeat(100),
      "p2",
      "b".repeat(100),
      "p3",
      "c".repeat(100),
    ]);
  });

  test("with a budget: the newest whole turns that fit, oldest left out", () => {
    // each turn is 102 characters: 204 keeps two, 203 only one
    expect(chatHistory(log, "t4", 204).map((m) => m.content)).toEqual([
      "p2",
      "b".repeat(100),
      "p3",
      "c".repeat(100),
    ]);
    expect(chatHistory(log, "t4", 203).map((m) => m.content)).toEqual(["p3", "c".repeat(100)]);
    // a newest turn over the budget on its own: no history rather than half a turn
    expect(chatHistory(log, "t4", 101)).toEqual([]);
  });
});

describe("an AI SDK agent sends at most maxHistoryChars of earlier turns", () => {
  let fake: FakeChatCompletions;
  let fx: HostFixture;
  afterEach(async () => {
    await fx.dispose();
    await fake.close();
  });

  test("the model call of a long session's next turn carries only the newest turns that fit", async () => {
    fake = await FakeChatCompletions.start();
    fx = await openHost({
      agent: new OpenAIAgent({ baseURL: fake.baseURL, model: "m", limits: { maxHistoryChars: 250 } }),
    });
    await fx.host.call(ADMIN, "session.create", { sessionId: "long" });
    for (const n of [1, 2, 3, 4]) {
      fake.script(textReply(`${n}`.repeat(100)));
      const r = await fx.host.call(ADMIN, "session.prompt", {
        sessionId: "long",
        text: `prompt ${n}`,
        clientMessageId: `m${n}`,
      });
      expect((await turnEvents(fx.store, "long", r.turnId!)).at(-1)!.data).toMatchObject({
        state: "completed",
      });
    }
    // the fourth call: turns 2 and 3 (108 characters each) fit in 250, turn 1 does not
    const sent = fake.requests[3]!.body.messages.map((m) => [m.role, m.content]);
    expect(sent).toEqual([
      ["user", "prompt 2"],
      ["assistant", "2".repeat(100)],
      ["user", "prompt 3"],
      ["assistant", "3".repeat(100)],
      ["user", "prompt 4"],
    ]);
    // and the second call, with one earlier turn, carried it whole
    expect(fake.requests[1]!.body.messages.map((m) => m.content)).toEqual([
      "prompt 1",
      "1".repeat(100),
      "prompt 2",
    ]);
  });
});
