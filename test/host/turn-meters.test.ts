import { Writable } from "node:stream";
import { pino } from "pino";
import { afterEach, describe, expect, it, vi } from "vitest";
import type { AgentDriver, ParkedAnswer, TurnContext } from "../../src/agents/agent.js";
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
  it("reads an outcome of plain JavaScript as the log records it: nothing is a failed turn, not a TypeError of its own", async () => {
    const ends: string[] = [];
    const meters: TurnMeters = { turnEnded: (_s, state) => void ends.push(state), firstToken: () => {} };
    const { logger, lines } = capture();
    const agent: AgentDriver = {
      name: "t",
      defaultModel: "m",
      models: () => [{ id: "m", label: "M" }],
      runTurn: async () => undefined as never,
    };
    const outcome = await meteredAgent(agent, meters, logger).runTurn(turn([]));
    // "Cannot read properties of undefined (reading 'state')" before, as the turn's error
    expect(outcome).toEqual({
      state: "failed",
      error:
        'the agent returned no turn outcome (undefined); runTurn resolves with { state: "completed" | "failed" | "cancelled", error? }',
    });
    expect(ends).toEqual(["failed"]);
    await new Promise((resolve) => setImmediate(resolve));
    expect(lines.map((l) => l.msg)).toEqual(["agent turn failed"]);
  });

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

  describe("with a clock the test moves", () => {
    afterEach(() => {
      vi.useRealTimers();
    });

    function recording() {
      const records: string[] = [];
      const meters: TurnMeters = {
        turnEnded: (seconds, state) => void records.push(`ended ${state} ${seconds}`),
        firstToken: (seconds) => void records.push(`first ${seconds}`),
      };
      return { records, meters };
    }

    it("times a turn from its call to its outcome, and its first text (reasoning too) once committed", async () => {
      vi.useFakeTimers({ toFake: ["performance"] });
      // the clock does not start at 0, so a duration is a difference, not a reading
      vi.advanceTimersByTime(10_000);
      const { records, meters } = recording();
      const agent: AgentDriver = {
        name: "t",
        defaultModel: "m",
        models: () => [],
        async runTurn(ctx) {
          vi.advanceTimersByTime(50);
          // a tool call is not text: the first token is the reasoning after it
          await ctx.emit({ type: "tool/call", toolCallId: "c", name: "x", args: {} });
          vi.advanceTimersByTime(30);
          await ctx.emit({ type: "reasoning/delta", text: "thinking" });
          vi.advanceTimersByTime(400);
          await ctx.emit({ type: "assistant/delta", text: "a" });
          vi.advanceTimersByTime(250);
          return { state: "completed" };
        },
      };
      const committing = turn([]);
      // the store's commit takes 20 ms: the first token counts from the call to its commit
      const slowCommit: TurnContext = {
        ...committing,
        emit: async (event) => {
          vi.advanceTimersByTime(20);
          await committing.emit(event);
        },
      };
      await meteredAgent(agent, meters, capture().logger).runTurn(slowCommit);
      expect(records).toEqual(["first 0.12", "ended completed 0.79"]);
    });

    it("continues a parked turn through the agent's continueTurn, timed from the continuation", async () => {
      vi.useFakeTimers({ toFake: ["performance"] });
      const { records, meters } = recording();
      const seen: string[] = [];
      const agent: AgentDriver = {
        name: "t",
        defaultModel: "m",
        models: () => [],
        runTurn: async () => ({ state: "completed" }),
        async continueTurn(ctx, answers) {
          seen.push(`${this.name} ${ctx.turnId} ${answers.length}`);
          vi.advanceTimersByTime(2000);
          await ctx.emit({ type: "assistant/delta", text: "done" });
          return { state: "failed", error: "denied" };
        },
      };
      const { logger, lines } = capture();
      const metered = meteredAgent(agent, meters, logger);
      const answers = [{ interaction: {}, resolution: { outcome: "deny" } }] as unknown as ParkedAnswer[];
      const emitted: string[] = [];
      expect(await metered.continueTurn?.(turn(emitted), answers)).toEqual({
        state: "failed",
        error: "denied",
      });
      expect([seen, emitted, records]).toEqual([
        ["t t1 1"],
        ["assistant/delta"],
        ["first 2", "ended failed 2"],
      ]);
      await new Promise((resolve) => setImmediate(resolve));
      expect(
        lines.map(({ msg, sessionId, turnId, agent, model, error }) => ({
          msg,
          sessionId,
          turnId,
          agent,
          model,
          error,
        })),
      ).toEqual([
        { msg: "agent turn failed", sessionId: "s1", turnId: "t1", agent: "t", model: "m", error: "denied" },
      ]);
    });
  });

  it("logs where a turn threw: its session, turn, agent and model", async () => {
    const agent: AgentDriver = {
      name: "thrower",
      defaultModel: "m",
      models: () => [],
      runTurn: async () => {
        throw new Error("boom");
      },
    };
    const { logger, lines } = capture();
    const ends: string[] = [];
    const metered = meteredAgent(
      agent,
      { turnEnded: (_s, state) => void ends.push(state), firstToken: () => {} },
      logger,
    );
    await expect(metered.runTurn(turn([]))).rejects.toThrow("boom");
    await new Promise((resolve) => setImmediate(resolve));
    expect(ends).toEqual(["failed"]);
    expect(
      lines.map(({ msg, sessionId, turnId, agent, model }) => ({ msg, sessionId, turnId, agent, model })),
    ).toEqual([
      { msg: "agent threw during a turn", sessionId: "s1", turnId: "t1", agent: "thrower", model: "m" },
    ]);
  });

  it("after its turn is stopped, the stop thrown back is counted cancelled; an error of the agent's own is still a failure", async () => {
    const stop = new Error("the turn was cancelled");
    const thrown = [
      stop,
      new DOMException("aborted", "AbortError"),
      new TypeError("x is undefined"),
      Object.assign(new Error("not found"), { name: "NotFoundError" }),
    ];
    const agent: AgentDriver = {
      name: "stopped",
      defaultModel: "m",
      models: () => [],
      runTurn: async () => {
        throw thrown.shift();
      },
    };
    const { logger, lines } = capture();
    const ends: string[] = [];
    const metered = meteredAgent(
      agent,
      { turnEnded: (_s, state) => void ends.push(state), firstToken: () => {} },
      logger,
    );
    for (let i = 0; i < 4; i++) {
      const controller = new AbortController();
      controller.abort(stop);
      await expect(metered.runTurn({ ...turn([]), signal: controller.signal })).rejects.toBeDefined();
    }
    // the same AbortError from a turn not stopped is the agent's own
    const alone = new DOMException("aborted", "AbortError");
    await expect(
      meteredAgent(
        { ...agent, runTurn: async () => Promise.reject(alone) },
        { turnEnded: (_s, state) => void ends.push(state), firstToken: () => {} },
        logger,
      ).runTurn(turn([])),
    ).rejects.toBe(alone);
    await new Promise((resolve) => setImmediate(resolve));
    expect(ends).toEqual(["cancelled", "cancelled", "failed", "failed", "failed"]);
    expect(lines.map((line) => line.msg).filter((msg) => msg === "agent threw during a turn")).toHaveLength(
      3,
    );
  });

  it("a turn whose event the store refused (its database away) is a failed turn logged at warn as such, not an agent's throw", async () => {
    const ends: string[] = [];
    const meters: TurnMeters = { turnEnded: (_s, state) => void ends.push(state), firstToken: () => {} };
    const { logger, lines } = capture();
    const refusal = Object.assign(new Error("the session store could not write; retry later"), {
      code: "persistence_failure",
    });
    const agent: AgentDriver = {
      name: "emitter",
      defaultModel: "m",
      models: () => [{ id: "m", label: "M" }],
      // the agent lets the refusal through, as the README's own agent does
      runTurn: async (ctx) => {
        await ctx.emit({ type: "assistant/delta", text: "a" });
        return { state: "completed" };
      },
    };
    const refusing = { ...turn([]), emit: async () => Promise.reject(refusal) };
    await expect(meteredAgent(agent, meters, logger).runTurn(refusing)).rejects.toBe(refusal);
    expect(ends).toEqual(["failed"]);
    await new Promise((resolve) => setImmediate(resolve));
    expect(lines.map((line) => [line.level, line.msg])).toEqual([
      [40, "a turn's event could not be written: the turn ends"],
    ]);
    expect(lines[0]).toMatchObject({ sessionId: "s1", turnId: "t1", err: { message: refusal.message } });
  });

  it("offers close and continueTurn only when the agent has them, and close reaches the agent", async () => {
    const meters: TurnMeters = { turnEnded: () => {}, firstToken: () => {} };
    const bare: AgentDriver = {
      name: "b",
      defaultModel: "m",
      models: () => [],
      runTurn: async () => ({ state: "completed" }),
    };
    const plain = meteredAgent(bare, meters, capture().logger);
    expect(["close" in plain, "continueTurn" in plain]).toEqual([false, false]);

    let closed = 0;
    const full: AgentDriver = {
      ...bare,
      close: async () => void closed++,
      continueTurn: async () => ({ state: "completed" }),
    };
    const wrapped = meteredAgent(full, meters, capture().logger);
    expect(typeof wrapped.continueTurn).toBe("function");
    await wrapped.close?.();
    expect(closed).toBe(1);

    // the agent's own close is awaited: its failure is the wrapper's
    const failing = meteredAgent(
      { ...bare, close: () => Promise.reject(new Error("still draining")) },
      meters,
      capture().logger,
    );
    await expect(failing.close?.()).rejects.toThrow("still draining");
  });
});
