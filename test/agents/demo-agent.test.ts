import { afterEach, describe, expect, test, vi } from "vitest";
import type { SessionEvent } from "../../protocol/index.js";
import { DemoAgent } from "../../src/agents/demo-agent.js";
import { ADMIN } from "../../src/host/principal.js";
import { assistantText, type HostFixture, openHost, turnEvents } from "../host/host-fixture.js";
import { readWholeLog } from "../support/whole-log.js";

/** The demo agent driven through a real host and store: the commands the console and scripts rely on. */

let fx: HostFixture;
afterEach(async () => fx?.dispose());

const S = "demo";
let n = 0;

async function run(text: string): Promise<SessionEvent[]> {
  const r = await fx.host.call(ADMIN, "session.prompt", { sessionId: S, text, clientMessageId: `m${++n}` });
  return turnEvents(fx.store, S, r.turnId!);
}

async function start(model?: string): Promise<void> {
  fx = await openHost();
  await fx.host.call(ADMIN, "session.create", { sessionId: S, ...(model ? { model } : {}) });
}

const types = (events: SessionEvent[]) => events.map((e) => e.type);
const endOf = (events: SessionEvent[]) => events.at(-1)?.data;

describe("DemoAgent", () => {
  test("offers demo-fast (default) and demo-careful", () => {
    const agent = new DemoAgent();
    expect(agent.name).toBe("demo");
    expect(agent.defaultModel).toBe("demo-fast");
    expect(agent.models().map((m) => m.id)).toEqual(["demo-fast", "demo-careful"]);
  });

  test("plain text is echoed in 3 to 5 deltas, then completed", async () => {
    await start();
    const events = await run("the quick brown fox");
    const deltas = events.filter((e) => e.type === "assistant/delta");
    expect(deltas.length).toBeGreaterThanOrEqual(3);
    expect(deltas.length).toBeLessThanOrEqual(5);
    expect(assistantText(events)).toBe("Echo: the quick brown fox");
    expect(endOf(events)).toMatchObject({ state: "completed" });
  });

  test("demo-careful adds a reasoning delta before the echo", async () => {
    await start("demo-careful");
    const events = await run("think");
    expect(types(events).slice(0, 3)).toEqual(["turn/start", "user/message", "reasoning/delta"]);
    expect(assistantText(events)).toBe("Echo: think");
  });

  test("/stream N ms streams N ordered chunks", async () => {
    await start();
    const events = await run("/stream 7 2");
    expect(
      events
        .filter((e) => e.type === "assistant/delta")
        .map((e) => e.type === "assistant/delta" && e.data.text),
    ).toEqual(Array.from({ length: 7 }, (_, i) => `chunk ${i + 1} `));
    expect(endOf(events)).toMatchObject({ state: "completed" });
  });

  test("/approve: tool/call, approval (input-required), approve → tool/result ok, deny → not ok; both complete", async () => {
    await start();
    for (const outcome of ["approve", "deny"] as const) {
      const r = await fx.host.call(ADMIN, "session.prompt", {
        sessionId: S,
        text: "/approve rm -rf build",
        clientMessageId: outcome,
      });
      const interaction = await vi.waitFor(async () => {
        expect((await fx.store.projection(S))?.lastState).toBe("input-required");
        return fx.host.live.interactions()[0]!;
      });
      expect(interaction).toMatchObject({ kind: "approval", action: "rm -rf build" });
      await fx.host.call(ADMIN, "session.respond", {
        interactionId: interaction.interactionId,
        response: { outcome },
      });
      const events = await turnEvents(fx.store, S, r.turnId!);
      expect(types(events)).toEqual([
        "turn/start",
        "user/message",
        "tool/call",
        "interaction/requested",
        "interaction/resolved",
        "tool/result",
        "assistant/delta",
        "turn/end",
      ]);
      const call = events[2]!;
      const result = events[5]!;
      expect(call.data).toMatchObject({ name: "demo.action", args: { action: "rm -rf build" } });
      expect(result.data).toMatchObject({
        toolCallId: (call.data as { toolCallId: string }).toolCallId,
        ok: outcome === "approve",
      });
      expect(endOf(events)).toMatchObject({ state: "completed" });
    }
  });

  test("/job reports progress in the background while the turn ends at once", async () => {
    await start();
    const progress: number[] = [];
    fx.host.live.subscribe((d) => {
      if (d.kind === "jobs" && d.jobs[0]) progress.push(d.jobs[0].progress);
    });
    const events = await run("/job 0.2");
    expect(endOf(events)).toMatchObject({ state: "completed" });
    await vi.waitFor(() => expect(fx.host.live.jobs(S)[0]?.state).toBe("completed"));
    expect(progress).toEqual([0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1]);
  });

  test("/fail ends the turn failed with an error", async () => {
    await start();
    const events = await run("/fail");
    expect(endOf(events)).toEqual({
      turnId: expect.any(String),
      state: "failed",
      error: expect.stringContaining("/fail"),
    });
    expect((await fx.store.projection(S))?.lastState).toBe("failed");
  });

  test("/sleep completes after the wait; cancel during it ends the turn cancelled", async () => {
    await start();
    const slept = await run("/sleep 20");
    expect(assistantText(slept)).toBe("Slept 20 ms");
    expect(endOf(slept)).toMatchObject({ state: "completed" });
    const r = await fx.host.call(ADMIN, "session.prompt", {
      sessionId: S,
      text: "/sleep 60000",
      clientMessageId: "long",
    });
    expect(await fx.host.call(ADMIN, "session.cancel", { sessionId: S })).toEqual({ cancelled: true });
    const cancelled = await turnEvents(fx.store, S, r.turnId!);
    expect(types(cancelled)).toEqual(["turn/start", "user/message", "turn/end"]);
    expect(endOf(cancelled)).toMatchObject({ state: "cancelled" });
  });

  test("/stream is cancelled mid-way without further deltas after turn/end", async () => {
    await start();
    const r = await fx.host.call(ADMIN, "session.prompt", {
      sessionId: S,
      text: "/stream 1000 5",
      clientMessageId: "s",
    });
    await vi.waitFor(async () => {
      const out = await fx.store.readAfter(S, 0, 100);
      expect(
        out.status === "ok" && out.events.filter((e) => e.type === "assistant/delta").length,
      ).toBeGreaterThan(2);
    });
    await fx.host.call(ADMIN, "session.cancel", { sessionId: S });
    const events = await turnEvents(fx.store, S, r.turnId!);
    expect(endOf(events)).toMatchObject({ state: "cancelled" });
    await vi.waitFor(() => expect(fx.host.live.isRunning(S)).toBe(false));
    const all = await readWholeLog(fx.store, S);
    expect(all.status === "ok" && all.events.at(-1)?.type).toBe("turn/end");
  });
});
