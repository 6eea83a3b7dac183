import { Writable } from "node:stream";
import { pino } from "pino";
import { describe, expect, it } from "vitest";
import type { AgentDriver, TurnContext, TurnOutcome } from "../../src/agents/agent.js";
import { createSessionmux } from "../../src/index.js";
import { cleanupsAfterEach } from "../support/cleanups.js";
import { tempDir } from "../support/temp-dir.js";
import { until } from "../support/until.js";

const cleanups = cleanupsAfterEach();

/**
 * The README's agent shape: it looks at `turn.signal` between its emits, and otherwise lets an
 * emit refused because the turn was stopped reject its run. Each emit waits for the test, so a
 * turn is stopped while the agent waits on it.
 */
class SteppedAgent implements AgentDriver {
  readonly name = "stepped";
  readonly defaultModel = "stepped-1";
  started = 0;
  #next: (() => void)[] = [];

  models() {
    return [{ id: "stepped-1", label: "Stepped" }];
  }

  step(): void {
    for (const go of this.#next.splice(0)) go();
  }

  async runTurn(turn: TurnContext): Promise<TurnOutcome> {
    this.started++;
    for (const word of ["one ", "two ", "three"]) {
      if (turn.signal.aborted) return { state: "cancelled" };
      await new Promise<void>((resolve) => this.#next.push(resolve));
      await turn.emit({ type: "assistant/delta", text: word });
    }
    return { state: "completed" };
  }
}

function capturedLogger() {
  const lines: { level: number; msg: string }[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _encoding, done) {
      lines.push(JSON.parse(chunk.toString()) as { level: number; msg: string });
      done();
    },
  });
  return { logger: pino({ level: "debug" }, stream), lines };
}

describe("a turn stopped while its agent waits on an emit", () => {
  it("is reported as the turn the log records, not as an agent that threw: no error logged, not counted failed", async () => {
    const dir = tempDir();
    cleanups.push(() => dir.remove());
    const agent = new SteppedAgent();
    const { logger, lines } = capturedLogger();
    const mux = await createSessionmux({
      db: dir.file("sessions.db"),
      agent,
      logger,
      tokens: [{ name: "alice", secret: "s3cret", admin: false }],
      processMetrics: false,
    });
    cleanups.push(() => mux.close());
    const client = mux.connect({ name: "alice", admin: false });
    const { sessionId } = (await client.create({ title: "stopped" })).header;

    await client.prompt({ sessionId, text: "go" });
    await until(() => agent.started === 1 || undefined, 10_000, "the turn started");
    expect(await client.call("session.cancel", { sessionId })).toEqual({ cancelled: true });
    // the agent's pending emit now finds its turn stopped
    agent.step();
    const page = await until(
      async () => {
        const { events } = await client.page({ sessionId });
        return events.some((e) => e.type === "turn/end") ? events : undefined;
      },
      10_000,
      "the turn ended",
    );
    expect(page.find((e) => e.type === "turn/end")?.data).toMatchObject({ state: "cancelled" });

    const metrics = await mux.metrics.registry.getSingleMetricAsString("sessionmux_turn_seconds");
    expect(metrics).toMatch(/sessionmux_turn_seconds_count\{state="cancelled"\} 1/);
    expect(metrics).not.toMatch(/sessionmux_turn_seconds_count\{state="failed"\}/);
    await new Promise((resolve) => setImmediate(resolve));
    expect(lines.filter((line) => line.level >= 50).map((line) => line.msg)).toEqual([]);
    await client.close();
  });
});
