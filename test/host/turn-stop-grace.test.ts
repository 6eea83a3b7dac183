import { describe, expect, it } from "vitest";
import type { TurnContext } from "../../src/agents/agent.js";
import type { Principal } from "../../src/host/principal.js";
import { cleanupsAfterEach } from "../support/cleanups.js";
import { capturedLogger } from "../support/log-capture.js";
import { demoAgentWith, type HostFixture, openHost, readLog, turnEvents } from "./host-fixture.js";

/**
 * A stopped turn whose agent does not return (it ignores its abort signal): after the grace the
 * turn is closed without the agent, so a cancel frees the session and a shutdown ends, and what the
 * agent emits afterwards is refused. An agent that returns within the grace ends its turn itself.
 */

const ALICE: Principal = { name: "alice", admin: false };
const cleanups = cleanupsAfterEach();

/** An agent whose first turn hangs, deaf to its signal, until released; later turns are the demo's. */
function hangingAgent() {
  const hung: { ctx?: TurnContext; release?: () => void } = {};
  const agent = demoAgentWith("hanging", (turn, demo) => {
    if (hung.ctx) return demo.runTurn(turn);
    hung.ctx = turn;
    return new Promise((resolve) => {
      hung.release = () => resolve({ state: "completed" });
    });
  });
  return { agent, hung };
}

async function open(turnStopGraceMs: number, agent: ReturnType<typeof hangingAgent>["agent"]) {
  const { logger, lines } = capturedLogger();
  const fixture: HostFixture = await openHost({ agent, turnStopGraceMs, logger });
  cleanups.push(() => fixture.dispose());
  await fixture.host.call(ALICE, "session.create", { sessionId: "s" });
  return { fixture, lines };
}

const prompt = (fixture: HostFixture, text: string, clientMessageId: string) =>
  fixture.host.call(ALICE, "session.prompt", { sessionId: "s", text, clientMessageId }) as Promise<{
    turnId: string;
  }>;

describe("a stopped turn whose agent does not return", () => {
  it("is closed cancelled after the grace; the next prompt runs, and the agent's late emit is refused", async () => {
    const { agent, hung } = hangingAgent();
    const { fixture, lines } = await open(50, agent);
    const first = await prompt(fixture, "hang", "m1");
    await expect.poll(() => hung.ctx !== undefined).toBe(true);
    await fixture.host.call(ALICE, "session.cancel", { sessionId: "s" });
    const ended = await turnEvents(fixture.store, "s", first.turnId);
    expect(ended.at(-1)).toMatchObject({
      type: "turn/end",
      data: { turnId: first.turnId, state: "cancelled" },
    });
    expect(lines.filter((line) => line.msg?.toString().startsWith("the agent did not return"))).toEqual([
      expect.objectContaining({ level: 40, sessionId: "s", turnId: first.turnId, stopGraceMs: 50 }),
    ]);
    const second = await prompt(fixture, "hello", "m2");
    const next = await turnEvents(fixture.store, "s", second.turnId);
    expect(next.at(-1)).toMatchObject({ type: "turn/end", data: { state: "completed" } });
    const before = (await readLog(fixture.store, "s")).length;
    // refused with the stop itself: an AbortError (as abort-aware libraries recognise it) naming the stop
    await expect(
      hung.ctx!.emit({ type: "assistant/delta", data: { text: "late" } } as never),
    ).rejects.toMatchObject({ name: "AbortError", message: "turn stopped: cancel" });
    hung.release!();
    expect(await readLog(fixture.store, "s")).toHaveLength(before);
  });

  it("is closed interrupted by a shutdown, which ends", async () => {
    const { agent, hung } = hangingAgent();
    const { fixture } = await open(50, agent);
    const first = await prompt(fixture, "hang", "m1");
    await expect.poll(() => hung.ctx !== undefined).toBe(true);
    await fixture.host.shutdown();
    const log = await readLog(fixture.store, "s");
    expect(log.at(-1)).toMatchObject({
      type: "turn/end",
      data: { turnId: first.turnId, state: "interrupted" },
    });
  });

  it("but returns within the grace ends its turn itself, and nothing is logged", async () => {
    const { agent, hung } = hangingAgent();
    const { fixture, lines } = await open(60_000, agent);
    const first = await prompt(fixture, "hang", "m1");
    await expect.poll(() => hung.ctx !== undefined).toBe(true);
    hung.ctx!.signal.addEventListener("abort", () => hung.release!());
    await fixture.host.call(ALICE, "session.cancel", { sessionId: "s" });
    const ended = await turnEvents(fixture.store, "s", first.turnId);
    expect(ended.at(-1)).toMatchObject({ type: "turn/end", data: { state: "cancelled" } });
    expect(lines.filter((line) => line.msg?.toString().startsWith("the agent did not return"))).toEqual([]);
  });
});
