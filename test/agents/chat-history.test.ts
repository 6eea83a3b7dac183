import { afterEach, describe, expect, test, vi } from "vitest";
import type { NewEvent, SessionEvent } from "../../protocol/index.js";
import { chatHistory, recentHistory } from "../../src/agents/chat-history.js";
import { OpenAIAgent } from "../../src/agents/openai-agent.js";
import { ADMIN } from "../../src/host/principal.js";
import { HostTurnContext } from "../../src/host/turn-context.js";
import { type HostFixture, openHost, turnEvents } from "../host/host-fixture.js";
import { delta, turnEnd, turnStart, userMessage } from "../store/open-store.js";
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

describe("recentHistory", () => {
  const tool = (turnId: string, result: string): SessionEvent[] => [
    event("tool/call", { turnId, toolCallId: `${turnId}c`, name: "cat", args: {} }),
    event("tool/result", { turnId, toolCallId: `${turnId}c`, ok: true, result, durationMs: 1 }),
  ];
  const log = [
    event("session/created", { model: "m" }),
    ...turn("t1", "p1", "a".repeat(100)),
    ...turn("t2", "p2", "b".repeat(100)),
    ...turn("t3", "p3", "c".repeat(100)),
    event("turn/start", { turnId: "t4" }),
    event("user/message", { turnId: "t4", text: "p4" }),
    ...tool("t4", "r".repeat(50)),
  ];
  // splice the tool events into t3, before its end, so an earlier turn holds some too
  log.splice(
    log.findIndex((e) => e.type === "turn/end" && (e.data as { turnId: string }).turnId === "t3"),
    0,
    ...tool("t3", "x".repeat(500)),
  );
  for (const [i, e] of log.entries()) e.seq = i + 1;

  /** The log in pages of 3 before a seq, as `historyPage` serves it; the seqs asked for are kept. */
  const pager = (asked: (number | undefined)[]) => ({
    turnId: "t4",
    async historyPage(beforeSeq?: number) {
      asked.push(beforeSeq);
      const end = (beforeSeq ?? log.length + 1) - 1;
      const events = log.slice(Math.max(0, end - 3), end);
      return { events, hasMore: (events[0]?.seq ?? 1) > 1 };
    },
  });

  test("the current turn whole; of earlier turns only their chat, back to the turn that passed the budget", async () => {
    const asked: (number | undefined)[] = [];
    const events = await recentHistory(pager(asked), 150);
    // t3 (102 characters) fits, t2 passes 150 and is the last one read; t1 is never reached
    expect(events.map((e) => `${e.type}:${(e.data as { turnId?: string }).turnId ?? ""}`)).toEqual([
      "turn/start:t2",
      "user/message:t2",
      "assistant/delta:t2",
      "assistant/delta:t2",
      "turn/start:t3",
      "user/message:t3",
      "assistant/delta:t3",
      "assistant/delta:t3",
      "turn/start:t4",
      "user/message:t4",
      "tool/call:t4",
      "tool/result:t4",
    ]);
    expect(asked[0]).toBeUndefined();
    expect(Math.min(...(asked.slice(1) as number[]))).toBeGreaterThan(
      log.findIndex((e) => e.type === "turn/start"),
    );
    // what chatHistory then sends: t3 only
    expect(chatHistory(events, "t4", 150).map((m) => m.content)).toEqual(["p3", "c".repeat(100)]);
  });

  test("a budget the whole log fits in reads to its start", async () => {
    const asked: (number | undefined)[] = [];
    const events = await recentHistory(pager(asked), 10_000);
    expect(events.filter((e) => e.type === "turn/start")).toHaveLength(4);
    // the page holding seq 1 says it has nothing before it: no page is asked for past it
    expect(asked.at(-1)).toBe(2);
  });

  test("a prompt's characters count as an answer's do; a budget reached exactly reads on to the turn that passes it", async () => {
    const turnsRead = (events: SessionEvent[]) =>
      events.filter((e) => e.type === "turn/start").map((e) => (e.data as { turnId: string }).turnId);
    // t3 and t2 are 102 characters each, 2 of them the prompt's: 203 is passed at t2
    expect(turnsRead(await recentHistory(pager([]), 203))).toEqual(["t2", "t3", "t4"]);
    // 204 is reached at t2 but not passed: t1 is read, and left out by chatHistory
    const events = await recentHistory(pager([]), 204);
    expect(turnsRead(events)).toEqual(["t1", "t2", "t3", "t4"]);
    expect(chatHistory(events, "t4", 204).map((m) => m.content)).toEqual([
      "p2",
      "b".repeat(100),
      "p3",
      "c".repeat(100),
    ]);
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

  test("a turn of a long session reads the log back only as far as its history reaches", async () => {
    fake = await FakeChatCompletions.start();
    fx = await openHost({
      agent: new OpenAIAgent({ baseURL: fake.baseURL, model: "m", limits: { maxHistoryChars: 250 } }),
    });
    await fx.host.call(ADMIN, "session.create", { sessionId: "tools" });
    // 24 earlier turns, each a prompt, a tool result of 600 KiB and an answer: 14 MiB of log
    for (let n = 1; n <= 24; n++) {
      const turnId = `e${n}`;
      const appended = await fx.store.append("tools", [
        turnStart(turnId),
        userMessage(`prompt ${n}`),
        { type: "tool/call", data: { turnId, toolCallId: `${turnId}c`, name: "cat", args: {} } },
        {
          type: "tool/result",
          data: { turnId, toolCallId: `${turnId}c`, ok: true, result: "r".repeat(600 * 1024), durationMs: 1 },
        } as NewEvent,
        delta(turnId, `${n % 10}`.repeat(100)),
        turnEnd(turnId),
      ]);
      expect(appended.status).toBe("appended");
    }
    const pages = vi.spyOn(fx.store, "page");
    const wholeLog = vi.spyOn(HostTurnContext.prototype, "history");
    fake.script(textReply("done"));
    const r = await fx.host.call(ADMIN, "session.prompt", {
      sessionId: "tools",
      text: "next",
      clientMessageId: "next",
    });
    expect((await turnEvents(fx.store, "tools", r.turnId!)).at(-1)!.data).toMatchObject({
      state: "completed",
    });
    expect(fake.requests[0]!.body.messages.map((m) => m.content)).toEqual([
      "prompt 23",
      "3".repeat(100),
      "prompt 24",
      "4".repeat(100),
      "next",
    ]);
    // three earlier turns reached (the third passed 250 characters), two a page; the whole log
    // (14 MiB, each page stopping past 1 MiB) would take 12
    expect(pages.mock.calls.length).toBeGreaterThanOrEqual(2);
    expect(pages.mock.calls.length).toBeLessThanOrEqual(4);
    expect(wholeLog).not.toHaveBeenCalled();
  });
});
