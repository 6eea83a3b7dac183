import { afterEach, beforeEach, describe, expect, test, vi } from "vitest";
import { z } from "zod";
import type { SessionEvent } from "../../protocol/index.js";
import { type AgentTool, defineTool } from "../../src/agents/agent-tool.js";
import { OpenAIAgent } from "../../src/agents/openai-agent.js";
import { ADMIN } from "../../src/host/principal.js";
import { type HostFixture, openHost, readLog, turnEvents } from "../host/host-fixture.js";
import { FakeChatCompletions, type ScriptedCall, textReply, toolCallReply } from "./fake-chat-completions.js";

const S = "outcomes";
const object = { type: "object", properties: {} } as const;
let fake: FakeChatCompletions;
let fx: HostFixture;

beforeEach(async () => {
  fake = await FakeChatCompletions.start();
});
afterEach(async () => {
  vi.restoreAllMocks();
  await fx.dispose();
  await fake.close();
});

/** Runs one turn whose first step makes the calls; the second step answers. */
async function turnWith(tools: AgentTool[], calls: ScriptedCall[]): Promise<SessionEvent[]> {
  fx = await openHost({ agent: new OpenAIAgent({ baseURL: fake.baseURL, model: "m", tools }) });
  await fx.host.call(ADMIN, "session.create", { sessionId: S });
  fake.script(toolCallReply("", calls), textReply("ok"));
  const r = await fx.host.call(ADMIN, "session.prompt", { sessionId: S, text: "go", clientMessageId: "go" });
  return turnEvents(fx.store, S, r.turnId!);
}

/** Each `tool/result` by its call id: `[ok, result]`. */
const results = (events: SessionEvent[]) =>
  Object.fromEntries(
    events.flatMap((e) =>
      e.type === "tool/result" ? [[e.data.toolCallId, [e.data.ok, e.data.result]]] : [],
    ),
  );

/** What the model read of each call's result in the step after it, by call id. */
const modelRead = () =>
  Object.fromEntries(
    fake.requests[1]!.body.messages.filter((m) => m.role === "tool").map((m) => [m.tool_call_id, m.content]),
  );

describe("what a tool call's result records", () => {
  test("a tool runs with its session, turn, call and the turn's live signal", async () => {
    const seen: unknown[] = [];
    const events = await turnWith(
      [
        defineTool({
          name: "where",
          inputSchema: object,
          execute: (_input, { sessionId, turnId, toolCallId, signal }) => {
            seen.push({
              sessionId,
              turnId,
              toolCallId,
              signal: signal instanceof AbortSignal,
              aborted: signal.aborted,
            });
            return "here";
          },
        }),
      ],
      [{ id: "call_1", name: "where", args: {} }],
    );
    expect(seen).toEqual([
      {
        sessionId: S,
        turnId: (events[0]!.data as { turnId: string }).turnId,
        toolCallId: "call_1",
        signal: true,
        aborted: false,
      },
    ]);
  });

  test("a value is recorded as its JSON; undefined as null; a cycle and thrown errors fail the call", async () => {
    const cyclic: Record<string, unknown> = {};
    cyclic.self = cyclic;
    const tool = (name: string, execute: () => unknown) => defineTool({ name, inputSchema: object, execute });
    const events = await turnWith(
      [
        tool("date", () => ({ at: new Date(0), skipped: undefined })),
        tool("nothing", () => undefined),
        tool("cycle", () => cyclic),
        tool("unnamed", () => {
          throw new RangeError("");
        }),
        tool("thrown_string", () => {
          throw "plain text";
        }),
      ],
      ["date", "nothing", "cycle", "unnamed", "thrown_string"].map((name) => ({ id: name, name, args: {} })),
    );
    const recorded = results(events);
    expect(recorded.date).toEqual([true, { at: "1970-01-01T00:00:00.000Z" }]);
    expect(recorded.nothing).toEqual([true, null]);
    expect(recorded.cycle).toEqual([false, { error: expect.stringMatching(/circular/i) }]);
    expect(recorded.unnamed).toEqual([false, { error: "RangeError" }]);
    expect(recorded.thrown_string).toEqual([false, { error: "plain text" }]);
    expect(modelRead()).toMatchObject({
      date: '{"at":"1970-01-01T00:00:00.000Z"}',
      nothing: "null",
      unnamed: "RangeError",
      thrown_string: "plain text",
    });
  });

  test("a call's duration is the time its tool ran; a refused call took none", async () => {
    const realNow = Date.now.bind(Date);
    let skew = 0;
    vi.spyOn(Date, "now").mockImplementation(() => realNow() + skew);
    const events = await turnWith(
      [
        defineTool({
          name: "slow",
          inputSchema: object,
          // an hour passes on the host's clock while it runs
          execute: () => {
            skew += 3_600_000;
            return 1;
          },
        }),
      ],
      [
        { id: "slow", name: "slow", args: {} },
        { id: "missing", name: "nope", args: {} },
      ],
    );
    const durations = Object.fromEntries(
      events.flatMap((e) => (e.type === "tool/result" ? [[e.data.toolCallId, e.data.durationMs]] : [])),
    );
    expect(durations.slow).toBeGreaterThanOrEqual(3_600_000);
    expect(durations.slow).toBeLessThan(2 * 3_600_000);
    expect(durations.missing).toBe(0);
  });
});

describe("calls that cannot run", () => {
  test("input the tool's schema refuses fails the call without running it; the model reads why", async () => {
    const ran: unknown[] = [];
    const events = await turnWith(
      [
        defineTool({
          name: "weather",
          inputSchema: z.object({ city: z.string() }),
          execute: (input) => {
            ran.push(input);
            return "sunny";
          },
        }),
      ],
      [
        { id: "bad", name: "weather", args: { city: 5 } },
        { id: "good", name: "weather", args: { city: "Oslo" } },
      ],
    );
    const recorded = results(events);
    expect(recorded.bad).toEqual([false, { error: expect.stringMatching(/^invalid call of weather: ./) }]);
    expect(recorded.good).toEqual([true, "sunny"]);
    expect(ran).toEqual([{ city: "Oslo" }]);
    expect(modelRead().bad).toBe((recorded.bad![1] as { error: string }).error);
  });
});

describe("approvals of tool calls", () => {
  test("an approval rule that throws fails the call without asking anyone", async () => {
    let ran = false;
    const events = await turnWith(
      [
        defineTool({
          name: "risky",
          inputSchema: object,
          needsApproval: () => {
            throw new Error("policy store down");
          },
          execute: () => {
            ran = true;
          },
        }),
      ],
      [{ id: "call_r", name: "risky", args: {} }],
    );
    expect(results(events)).toEqual({
      call_r: [false, { error: "approval rule failed: policy store down" }],
    });
    expect(events.some((e) => e.type === "interaction/requested")).toBe(false);
    expect(ran).toBe(false);
    expect(events.at(-1)!.data).toMatchObject({ state: "completed" });
  });

  test("the action text: the tool's name when describe throws; a long one cut at 300 characters, never inside a character", async () => {
    const tools = [
      defineTool({
        name: "described",
        inputSchema: object,
        needsApproval: true,
        describe: () => {
          throw new Error("no description");
        },
        execute: () => "done",
      }),
      defineTool({ name: "long", inputSchema: object, needsApproval: true, execute: () => "done" }),
      defineTool({ name: "fits", inputSchema: object, needsApproval: true, execute: () => "done" }),
      defineTool({ name: "paired", inputSchema: object, needsApproval: true, execute: () => "done" }),
    ];
    const long = { text: "x".repeat(400) };
    // `fits {"text":"…"}` is exactly 300 characters
    const fits = { text: "y".repeat(300 - 'fits {"text":""}'.length) };
    // a character of two UTF-16 units whose first unit is the action's unit at `at`
    const pairedAt = (at: number, char: string) => ({
      text: `${"z".repeat(at - 'paired {"text":"'.length)}${char} and more`,
    });
    // the cut at 299 falls between the two halves (the first halves U+D800, U+D83D and U+DBFF),
    // or just after a whole pair
    const paired = {
      c4: pairedAt(298, "😀"),
      c5: pairedAt(298, "\u{10000}"),
      c6: pairedAt(298, "\u{10FFFD}"),
      c7: pairedAt(297, "😀"),
    };
    fx = await openHost({ agent: new OpenAIAgent({ baseURL: fake.baseURL, model: "m", tools }) });
    await fx.host.call(ADMIN, "session.create", { sessionId: S });
    fake.script(
      toolCallReply("", [
        { id: "c1", name: "described", args: {} },
        { id: "c2", name: "long", args: long },
        { id: "c3", name: "fits", args: fits },
        ...Object.entries(paired).map(([id, args]) => ({ id, name: "paired", args })),
      ]),
      textReply("ok"),
    );
    const r = await fx.host.call(ADMIN, "session.prompt", {
      sessionId: S,
      text: "go",
      clientMessageId: "go",
    });
    const asked = await vi.waitFor(
      async () => {
        const log = await readLog(fx.store, S);
        const requested = log.flatMap((e) => (e.type === "interaction/requested" ? [e.data] : []));
        expect(requested).toHaveLength(7);
        return requested;
      },
      { timeout: 15_000, interval: 10 },
    );
    const actions = Object.fromEntries(asked.map((a) => [a.toolCallId, a.action]));
    expect(actions.c1).toBe("described");
    const full = `long ${JSON.stringify(long)}`;
    expect(actions.c2).toBe(`${full.slice(0, 299)}…`);
    expect(actions.c2).toHaveLength(300);
    expect(actions.c3).toBe(`fits ${JSON.stringify(fits)}`);
    expect(actions.c3).toHaveLength(300);
    const whole = (id: keyof typeof paired) => `paired ${JSON.stringify(paired[id])}`;
    expect((["c4", "c5", "c6"] as const).map((id) => whole(id).charCodeAt(298))).toEqual([
      0xd83d, 0xd800, 0xdbff,
    ]);
    for (const id of ["c4", "c5", "c6"] as const) expect(actions[id]).toBe(`${whole(id).slice(0, 298)}…`);
    expect(whole("c7").charCodeAt(298)).toBe(0xde00);
    expect(actions.c7).toBe(`${whole("c7").slice(0, 299)}…`);
    // the live view holds what the log holds
    const live = Object.fromEntries(fx.host.live.interactions().map((i) => [i.toolCallId, i.action]));
    expect(live).toEqual(actions);
    for (const a of asked) {
      await fx.host.call(ADMIN, "session.respond", {
        interactionId: a.interactionId,
        response: { outcome: "approve" },
      });
    }
    expect(results(await turnEvents(fx.store, S, r.turnId!))).toEqual({
      c1: [true, "done"],
      c2: [true, "done"],
      c3: [true, "done"],
      c4: [true, "done"],
      c5: [true, "done"],
      c6: [true, "done"],
      c7: [true, "done"],
    });
  });
});
