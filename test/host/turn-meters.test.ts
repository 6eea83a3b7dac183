import { Writable } from "node:stream";
import { pino } from "pino";
import { describe, expect, it } from "vitest";
import type { AgentDriver, TurnContext } from "../../src/agents/agent.js";
import { meteredAgent, type TurnMeters } from "../../src/host/turn-meters.js";

function turn(emitted: string[]): TurnContext {
  return {
    sessionId: "s1",
    turnId: "t1",
    model: "m",
    prompt: { text: "hi", attachments: [] },
    signal: new AbortController().signal,
    history: async () => [],
    historyPage: async () => ({ events: [], hasMore: false }),
    emit: async (event) => void emitted.push(event.type),
    requestInteraction: async () => ({ outcome: "approve" }) as never,
    takeInterjections: async () => [],
    startJob: () => {
      throw new Error("unused");
    },
  };
}

function capture() {
  const lines: Record<string, unknown>[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _enc, done) {
      lines.push(JSON.parse(chunk.toString()) as Record<string, unknown>);
      done();
    },
  });
  return { logger: pino(stream), lines };
}

describe("meteredAgent", () => {
  it("times turns and the first text, passes events through, and logs failures with their cause", async () => {
    const ends: string[] = [];
    let firstTokens = 0;
    const meters: TurnMeters = {
      turnEnded: (_s, state) => void ends.push(state),
      firstToken: () => void firstTokens++,
    };
    const { logger, lines } = capture();
    let mode: "ok" | "failed" | "throw" = "ok";
    const agent: AgentDriver = {
      name: "t",
      defaultModel: "m",
      models: () => [{ id: "m", label: "M" }],
      async runTurn(ctx) {
        await ctx.emit({ type: "tool/call", toolCallId: "c", name: "x", args: {} });
        await ctx.emit({ type: "assistant/delta", text: "a" });
        await ctx.emit({ type: "assistant/delta", text: "b" });
        if (mode === "throw") throw new Error("model endpoint refused");
        return mode === "failed" ? { state: "failed", error: "quota exceeded" } : { state: "completed" };
      },
    };
    const metered = meteredAgent(agent, meters, logger);
    expect([metered.name, metered.defaultModel, metered.models()]).toEqual([
      "t",
      "m",
      [{ id: "m", label: "M" }],
    ]);

    const emitted: string[] = [];
    expect(await metered.runTurn(turn(emitted))).toEqual({ state: "completed" });
    expect(emitted).toEqual(["tool/call", "assistant/delta", "assistant/delta"]);
    expect([ends, firstTokens]).toEqual([["completed"], 1]);

    mode = "failed";
    await metered.runTurn(turn([]));
    mode = "throw";
    await expect(metered.runTurn(turn([]))).rejects.toThrow("model endpoint refused");
    expect(ends).toEqual(["completed", "failed", "failed"]);
    expect(firstTokens).toBe(3);
    await new Promise((resolve) => setImmediate(resolve));
    expect(
      lines.map((l) => [l.msg, l.error ?? (l.err as { message?: string } | undefined)?.message]),
    ).toEqual([
      ["agent turn failed", "quota exceeded"],
      ["agent threw during a turn", "model endpoint refused"],
    ]);
  });
});
